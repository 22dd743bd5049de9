package grpcretry

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// seenOptions is a unary interceptor chained below the retrying one: it
// records, for each attempt, how many grpc.Header, grpc.Trailer and
// grpc.Peer options the attempt carried, and the trailer pointers.
type seenOptions struct {
	mu       sync.Mutex
	headers  []int
	trailers [][]*metadata.MD
	peers    []int
}

func (s *seenOptions) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	var h, p int
	var tr []*metadata.MD
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			h++
		case grpc.TrailerCallOption:
			tr = append(tr, o.TrailerAddr)
		case grpc.PeerCallOption:
			p++
		}
	}
	s.mu.Lock()
	s.headers, s.trailers, s.peers = append(s.headers, h), append(s.trailers, tr), append(s.peers, p)
	s.mu.Unlock()
	return invoker(ctx, method, req, reply, cc, opts...)
}

// An attempt carries no grpc.Header option of the interceptor's (its copy of
// the headers would cost every successful call), and one grpc.Trailer (for
// the pushback) and one grpc.Peer (did it leave the client?): the caller's
// own, if it gave them, which then serve both. The caller's options see the
// last attempt, and the pushback read through the caller's trailer is
// obeyed.
func TestAttemptsCaptureOnlyTheTrailerAndPeer(t *testing.T) {
	srv := &server{unary: func(ctx context.Context, n int, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
		if n == 1 {
			// Trailers-Only: headers set here would go out first.
			grpc.SetTrailer(ctx, metadata.Pairs(PushbackKey, "250"))
			return nil, status.Error(codes.Unavailable, "later")
		}
		grpc.SetHeader(ctx, metadata.Pairs("attempt", string(rune('0'+n))))
		return ok(n)
	}}
	for _, own := range []bool{false, true} {
		seen := &seenOptions{}
		rec := &recorder{inner: &retry.Simple{MaxAttempts: 2, Backoff: retry.Constant(time.Second)}}
		c := dial(t, serve(t, srv), grpc.WithChainUnaryInterceptor(UnaryClientInterceptor(WithStrategy(rec)), seen.intercept))
		srv.calls.Store(0)
		var header, trailer metadata.MD
		var p peer.Peer
		var opts []grpc.CallOption
		if own {
			opts = []grpc.CallOption{grpc.Header(&header), grpc.Trailer(&trailer), grpc.Peer(&p)}
		}
		if _, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{}, opts...); err != nil {
			t.Fatalf("caller's options %v: %v", own, err)
		}
		if got := rec.got(); !slices.Equal(got, []time.Duration{250 * time.Millisecond}) {
			t.Errorf("caller's options %v: delays %v, want the pushback's 250ms", own, got)
		}
		wantHeaders, wantPeers := []int{0, 0}, []int{1, 1}
		if own {
			wantHeaders = []int{1, 1} // the caller's
		}
		if !slices.Equal(seen.headers, wantHeaders) || !slices.Equal(seen.peers, wantPeers) {
			t.Errorf("caller's options %v: grpc.Header per attempt %v, grpc.Peer %v; want %v and %v", own, seen.headers, seen.peers, wantHeaders, wantPeers)
		}
		for i, tr := range seen.trailers {
			if len(tr) != 1 || own && tr[0] != &trailer {
				t.Errorf("caller's options %v: attempt %d carried trailer options %v, want one (the caller's, if it gave one)", own, i+1, tr)
			}
		}
		if own && (header.Get("attempt")[0] != "2" || p.Addr == nil || len(trailer[PushbackKey]) != 0) {
			t.Errorf("the caller's options hold header %v, peer %v, trailer %v; want the second attempt's", header, p.Addr, trailer)
		}
	}
}

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
