package grpcretry

import (
	"context"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// droppingListener is a loopback listener whose server connections can all
// be closed at once, as a server that crashes mid-call would drop them.
type droppingListener struct {
	net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func (l *droppingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.mu.Lock()
		l.conns = append(l.conns, c)
		l.mu.Unlock()
	}
	return c, err
}
func (l *droppingListener) drop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}

// serveDropping starts srv on a loopback listener that the handlers can
// drop, and returns its address.
func serveDropping(t *testing.T, srv *server) (string, *droppingListener) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dl := &droppingListener{Listener: lis}
	gs := grpc.NewServer()
	testpb.RegisterTestServiceServer(gs, srv)
	go gs.Serve(dl)
	t.Cleanup(gs.Stop)
	return lis.Addr().String(), dl
}

// Whether a failed attempt may have been handled is read from its trailer:
// an UNAVAILABLE the server sent as Trailers-Only (before any headers) is
// retried for every method; one that came after the server's headers (with
// trailer metadata or without) or from a connection lost after the call
// left (no status from the server: it may have done the work) only for an
// idempotent method. Unary calls and streams alike.
func TestAnsweredFromTheTrailer(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fail      func(ctx context.Context, dl *droppingListener) error // the first attempt
		anyMethod bool                                                  // retried when not idempotent
	}{
		{"trailers-only", func(context.Context, *droppingListener) error {
			return status.Error(codes.Unavailable, "down")
		}, true},
		{"after headers", func(ctx context.Context, _ *droppingListener) error {
			grpc.SendHeader(ctx, metadata.Pairs("handled", "yes"))
			return status.Error(codes.Unavailable, "failed halfway")
		}, false},
		{"after headers, with trailer metadata", func(ctx context.Context, _ *droppingListener) error {
			grpc.SendHeader(ctx, metadata.Pairs("handled", "yes"))
			grpc.SetTrailer(ctx, metadata.Pairs("why", "halfway"))
			return status.Error(codes.Unavailable, "failed halfway")
		}, false},
		{"connection lost", func(ctx context.Context, dl *droppingListener) error {
			dl.drop()
			<-ctx.Done()
			return ctx.Err()
		}, false},
	} {
		for _, idem := range []bool{false, true} {
			var dl *droppingListener
			srv := &server{
				unary: func(ctx context.Context, n int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
					if n == 1 {
						return nil, tc.fail(ctx, dl)
					}
					return ok(n)
				},
				output: func(n int, _ *testpb.StreamingOutputCallRequest, st testpb.TestService_StreamingOutputCallServer) error {
					if n == 1 {
						return tc.fail(st.Context(), dl)
					}
					return st.Send(&testpb.StreamingOutputCallResponse{})
				},
			}
			var addr string
			addr, dl = serveDropping(t, srv)
			opts := []Option{WithStrategy(simple(2))}
			if idem {
				opts = append(opts, WithIdempotentMethods("/grpc.testing.TestService/"))
			}
			c := dial(t, addr, grpc.WithUnaryInterceptor(UnaryClientInterceptor(opts...)), grpc.WithStreamInterceptor(StreamClientInterceptor(opts...)))
			retried := idem || tc.anyMethod
			want := map[bool]int64{false: 1, true: 2}[retried]
			_, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{})
			if (err == nil) != retried || srv.calls.Load() != want {
				t.Errorf("%s, idempotent %v, unary: %v after %d attempts, want %d", tc.name, idem, err, srv.calls.Load(), want)
			}
			srv.calls.Store(0)
			st, err := c.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Recv(); (err == nil) != retried || srv.calls.Load() != want {
				t.Errorf("%s, idempotent %v, stream: %v after %d attempts, want %d", tc.name, idem, err, srv.calls.Load(), want)
			}
		}
	}
}
