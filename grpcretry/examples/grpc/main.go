// Command grpc shows grpcretry's client interceptors against a flaky gRPC
// server on loopback: a unary call the server refuses twice, the second time
// with a pushback (grpc-retry-pushback-ms) that sets the wait exactly; a
// server-streaming call whose first attempt fails before any message; and a
// call to a method the server fails with a code retrying cannot fix. Each
// retry is printed as the interceptor's loop announces it. Run it with
//
//	go run ./grpcretry/examples/grpc
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/grpcretry"
)

func main() {
	if err := run(os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// flaky is the server: UnaryCall fails twice, then answers; the second
// failure asks for a 200 ms wait. StreamingOutputCall fails its first attempt
// before sending anything. A request whose payload says "invalid" fails with
// INVALID_ARGUMENT.
type flaky struct {
	testpb.UnimplementedTestServiceServer
	unary, stream atomic.Int32
}

func (f *flaky) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	if string(req.GetPayload().GetBody()) == "invalid" {
		return nil, status.Error(codes.InvalidArgument, "no such order")
	}
	switch f.unary.Add(1) {
	case 1:
		return nil, status.Error(codes.Unavailable, "warming up")
	case 2:
		grpc.SetTrailer(ctx, metadata.Pairs(grpcretry.PushbackKey, "200"))
		return nil, status.Error(codes.Unavailable, "busy")
	}
	return &testpb.SimpleResponse{Payload: &testpb.Payload{Body: []byte("order 42")}}, nil
}

func (f *flaky) StreamingOutputCall(_ *testpb.StreamingOutputCallRequest, st testpb.TestService_StreamingOutputCallServer) error {
	if f.stream.Add(1) == 1 {
		return status.Error(codes.Unavailable, "restarting")
	}
	for i := range 3 {
		if err := st.Send(&testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: fmt.Appendf(nil, "update %d", i+1)}}); err != nil {
			return err
		}
	}
	return nil
}

// run serves flaky on loopback, makes the three calls and writes what
// happens to out.
func run(out io.Writer) error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(grpcretry.UnaryServerInterceptor()))
	testpb.RegisterTestServiceServer(srv, &flaky{})
	go srv.Serve(lis)
	defer srv.Stop()

	announce := retry.OnRetry(func(_ context.Context, attempt int, delay time.Duration, err error) {
		fmt.Fprintf(out, "  attempt %d failed (%s), retrying in %v\n", attempt, status.Code(err), delay.Round(time.Millisecond))
	})
	opts := []grpcretry.Option{
		// 50 ms between attempts, so that the pushback's 200 ms shows.
		grpcretry.WithStrategy(&retry.Simple{Backoff: retry.Constant(50 * time.Millisecond)}),
		grpcretry.WithRetryOptions(announce),
	}
	cc, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(), // one layer of retries: the interceptors'
		grpc.WithUnaryInterceptor(grpcretry.UnaryClientInterceptor(opts...)),
		grpc.WithStreamInterceptor(grpcretry.StreamClientInterceptor(opts...)))
	if err != nil {
		return err
	}
	defer cc.Close()
	client := testpb.NewTestServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	fmt.Fprintln(out, "unary call, refused twice:")
	resp, err := client.UnaryCall(ctx, &testpb.SimpleRequest{})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  answered %q\n", resp.GetPayload().GetBody())

	fmt.Fprintln(out, "server stream, first attempt failed before any message:")
	st, err := client.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{})
	if err != nil {
		return err
	}
	for {
		m, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "  received %q\n", m.GetPayload().GetBody())
	}

	fmt.Fprintln(out, "a call retrying cannot fix:")
	_, err = client.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("invalid")}})
	fmt.Fprintf(out, "  %s: %v\n", status.Code(err), err)
	return nil
}
