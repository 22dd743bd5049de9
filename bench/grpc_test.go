package main

import (
	"context"
	"testing"
)

// BenchmarkGRPCSuccess measures one unary call through each gRPC library
// to a loopback server that answers at once.
func BenchmarkGRPCSuccess(b *testing.B) {
	for _, lib := range GRPCLibs() {
		b.Run(lib.Name, func(b *testing.B) { benchScenario(b, lib.Success) })
		lib.Close()
	}
}

// BenchmarkGRPCTwoRetries measures one unary call through each retrying
// gRPC library to a loopback server that fails it twice with UNAVAILABLE and
// then answers, with no delay between attempts.
func BenchmarkGRPCTwoRetries(b *testing.B) {
	for _, lib := range GRPCLibs() {
		if lib.TwoRetries != nil {
			b.Run(lib.Name, func(b *testing.B) { benchScenario(b, lib.TwoRetries) })
		}
		lib.Close()
	}
}

// grpcRuns is how many times TestGRPCScenarios runs each scenario.
const grpcRuns = 100

// TestGRPCScenarios checks that each gRPC scenario ends with the server's
// answer after exactly 1 attempt (success) or 3 (two retries: grpc's own
// retry off, the interceptor's attempt limit not reached), that the server
// forgot the request id after answering it, and that each ClientConn kept
// its one connection.
func TestGRPCScenarios(t *testing.T) {
	ctx := context.Background()
	srv := GRPCServer()
	for _, lib := range GRPCLibs() {
		t.Run(lib.Name, func(t *testing.T) {
			defer lib.Close()
			check := func(name string, s Scenario, attempts int64) {
				if s == nil {
					return
				}
				for i := range grpcRuns {
					before, pending := srv.Attempts(), srv.Pending()
					if err := s(ctx); err != nil {
						t.Fatalf("%s, run %d: error %v, want nil", name, i+1, err)
					}
					if got := srv.Attempts() - before; got != attempts {
						t.Fatalf("%s, run %d: the server saw %d attempts, want %d", name, i+1, got, attempts)
					}
					if got := srv.Pending(); got != pending {
						t.Fatalf("%s, run %d: %d request ids pending on the server, want %d", name, i+1, got, pending)
					}
				}
			}
			check("success", lib.Success, 1)
			check("two retries", lib.TwoRetries, 1+failures)
			if got, want := lib.Dials(), int64(lib.Conns()); got != want {
				t.Errorf("%d connections dialled, want %d (one per ClientConn)", got, want)
			}
		})
	}
}

// TestGRPCTable checks that the gRPC table has every library once, bare
// first with a success scenario, a grpcretry row with both scenarios (the
// ratios divide by bare's and grpcretry's times), and go-grpc-middleware's
// row with both.
func TestGRPCTable(t *testing.T) {
	libs := GRPCLibs()
	defer func() {
		for _, l := range libs {
			l.Close()
		}
	}()
	if len(libs) == 0 || libs[0].Name != "bare" || libs[0].Success == nil || libs[0].TwoRetries != nil {
		t.Fatal("the first gRPC library must be bare, with a success scenario only")
	}
	seen := map[string]GRPCLib{}
	for _, l := range libs {
		if _, ok := seen[l.Name]; ok {
			t.Errorf("gRPC library %q listed twice", l.Name)
		}
		seen[l.Name] = l
		if l.Success == nil {
			t.Errorf("gRPC library %q: no success scenario", l.Name)
		}
	}
	for _, name := range []string{"grpcretry", "go-grpc-middleware"} {
		if l, ok := seen[name]; !ok || l.TwoRetries == nil {
			t.Errorf("no %s row with a two-retries scenario", name)
		}
	}
}
