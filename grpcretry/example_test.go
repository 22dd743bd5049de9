package grpcretry_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"sync/atomic"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/grpcretry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// flaky is a test service whose every other call fails with UNAVAILABLE.
type flaky struct {
	testpb.UnimplementedTestServiceServer
	calls atomic.Int64
}

func (f *flaky) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	if f.calls.Add(1)%2 == 1 {
		return nil, status.Error(codes.Unavailable, "restarting")
	}
	return &testpb.SimpleResponse{Payload: req.GetPayload()}, nil
}

func (f *flaky) StreamingOutputCall(req *testpb.StreamingOutputCallRequest, s testpb.TestService_StreamingOutputCallServer) error {
	if f.calls.Add(1)%2 == 1 {
		return status.Error(codes.Unavailable, "restarting")
	}
	for _, p := range req.GetResponseParameters() {
		if err := s.Send(&testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: make([]byte, p.GetSize())}}); err != nil {
			return err
		}
	}
	return nil
}

// start serves a flaky test service on a loopback port.
func start() (addr string, stop func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	s := grpc.NewServer()
	testpb.RegisterTestServiceServer(s, &flaky{})
	go s.Serve(lis)
	return lis.Addr().String(), s.Stop
}

func ExampleUnaryClientInterceptor() {
	addr, stop := start()
	defer stop()

	cc, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(), // one layer of retries: the interceptor's
		grpc.WithUnaryInterceptor(grpcretry.UnaryClientInterceptor(
			grpcretry.WithStrategy(retry.NewAdaptive(retry.AdaptiveOptions{})),
			grpcretry.WithIdempotentMethods("/grpc.testing.TestService/UnaryCall"),
		)))
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Close()

	// The first attempt fails with UNAVAILABLE; the retry succeeds.
	resp, err := testpb.NewTestServiceClient(cc).UnaryCall(context.Background(),
		&testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("hello")}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(resp.GetPayload().GetBody()))
	// Output: hello
}

func ExampleStreamClientInterceptor() {
	addr, stop := start()
	defer stop()

	cc, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(),
		grpc.WithStreamInterceptor(grpcretry.StreamClientInterceptor(
			grpcretry.WithBufferLimit(64<<10), // replay at most 64 KiB of client messages
		)))
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Close()

	// The first attempt fails before its first message, so it is retried;
	// once a message has arrived the call is committed.
	stream, err := testpb.NewTestServiceClient(cc).StreamingOutputCall(context.Background(),
		&testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: 1}, {Size: 2}}})
	if err != nil {
		log.Fatal(err)
	}
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(len(m.GetPayload().GetBody()), "bytes")
	}
	// Output:
	// 1 bytes
	// 2 bytes
}

func ExampleWithHedging() {
	addr, stop := start()
	defer stop()

	cc, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(),
		grpc.WithUnaryInterceptor(grpcretry.UnaryClientInterceptor(
			grpcretry.WithIdempotentMethods("/grpc.testing.TestService/"),
			// A second copy goes out if the first has not answered at the
			// 95th percentile of the latencies seen; hedges are paid for
			// from a token quota and stop when it runs dry.
			grpcretry.WithHedging(grpcretry.Hedging{MaxAttempts: 2, Quantile: 0.95}),
		)))
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Close()

	// Until 64 latencies have been seen, calls are not hedged: this one is
	// retried after its first attempt's UNAVAILABLE, as without hedging.
	resp, err := testpb.NewTestServiceClient(cc).UnaryCall(context.Background(),
		&testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("hedged")}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(resp.GetPayload().GetBody()))
	// Output: hedged
}
