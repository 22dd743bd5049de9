package main

import (
	"context"
	"runtime"
	"testing"
	"time"
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

// BenchmarkGRPCSuccessPaired makes, in each iteration, one successful call
// through every gRPC library, in an order that rotates from one iteration to
// the next, and reports each library's total time over bare's
// ("<lib>/bare"): the calls of one iteration see the same load on a shared
// machine, where separate benchmarks, run one after another, do not.
func BenchmarkGRPCSuccessPaired(b *testing.B) {
	benchPaired(b, "bare", func(l GRPCLib) Scenario { return l.Success })
}

// BenchmarkGRPCTwoRetriesPaired does the same with the two-retries
// scenario of every retrying library, over grpcretry's time
// ("<lib>/grpcretry").
func BenchmarkGRPCTwoRetriesPaired(b *testing.B) {
	benchPaired(b, "grpcretry", func(l GRPCLib) Scenario { return l.TwoRetries })
}

// benchPaired runs the scenario that pick returns of every gRPC library that
// has one once per iteration, in rotating order, and reports each one's
// total time over that of the library named base.
func benchPaired(b *testing.B, base string, pick func(GRPCLib) Scenario) {
	libs := GRPCLibs()
	defer func() {
		for _, l := range libs {
			l.Close()
		}
	}()
	ctx := context.Background()
	var names []string
	var ss []Scenario
	ref := -1
	for _, l := range libs {
		s := pick(l)
		if s == nil {
			continue
		}
		if err := s(ctx); err != nil { // connect first
			b.Fatal(err)
		}
		if l.Name == base {
			ref = len(ss)
		}
		names, ss = append(names, l.Name), append(ss, s)
	}
	if ref < 0 {
		b.Fatalf("no %s row", base)
	}
	total := make([]time.Duration, len(ss))
	first := 0
	for b.Loop() {
		for k := range ss {
			i := (first + k) % len(ss)
			start := time.Now()
			if err := ss[i](ctx); err != nil {
				b.Fatal(err)
			}
			total[i] += time.Since(start)
		}
		first = (first + 1) % len(ss)
	}
	for i, name := range names {
		if i != ref {
			b.ReportMetric(float64(total[i])/float64(total[ref]), name+"/"+base)
		}
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

// BenchmarkGRPCAllocs runs each allocation scenario through every row over
// bufconn, the row without interceptor first, and reports beside allocs/op
// and B/op what each row adds to it ("extra-allocs/op", "extra-B/op"):
// allocations are exact, where the time of an in-memory call is dominated
// by scheduling. Run it with -benchmem.
func BenchmarkGRPCAllocs(b *testing.B) {
	rows := GRPCAllocRows()
	defer func() {
		for _, r := range rows {
			r.Close()
		}
	}()
	for _, sc := range []struct {
		name string
		pick func(GRPCAllocRow) Scenario
	}{
		{"unary", func(r GRPCAllocRow) Scenario { return r.Unary }},
		{"two-retries", func(r GRPCAllocRow) Scenario { return r.TwoRetries }},
		{"stream", func(r GRPCAllocRow) Scenario { return r.Stream }},
	} {
		b.Run(sc.name, func(b *testing.B) {
			var plainAllocs, plainBytes float64
			for i, r := range rows {
				s := sc.pick(r)
				b.Run(r.Name, func(b *testing.B) {
					ctx := context.Background()
					if err := s(ctx); err != nil { // connect first
						b.Fatal(err)
					}
					b.ReportAllocs()
					var before, after runtime.MemStats
					runtime.ReadMemStats(&before)
					for b.Loop() {
						if err := s(ctx); err != nil {
							b.Fatal(err)
						}
					}
					runtime.ReadMemStats(&after)
					allocs := float64(after.Mallocs-before.Mallocs) / float64(b.N)
					bytes := float64(after.TotalAlloc-before.TotalAlloc) / float64(b.N)
					if i == 0 {
						plainAllocs, plainBytes = allocs, bytes
						return
					}
					b.ReportMetric(allocs-plainAllocs, "extra-allocs/op")
					b.ReportMetric(bytes-plainBytes, "extra-B/op")
				})
			}
		})
	}
}

// TestGRPCAllocScenarios checks that each row's scenarios end as the
// allocation benchmark expects: the server's answer after 1 attempt
// (unary, stream) or 3 (two retries), and no request id left pending.
func TestGRPCAllocScenarios(t *testing.T) {
	ctx := context.Background()
	srv := BufServer()
	rows := GRPCAllocRows()
	if rows[0].Name != "plain" {
		t.Fatalf("first row %q, want plain", rows[0].Name)
	}
	for _, r := range rows {
		t.Run(r.Name, func(t *testing.T) {
			defer r.Close()
			for _, sc := range []struct {
				name     string
				s        Scenario
				attempts int64
			}{{"unary", r.Unary, 1}, {"two retries", r.TwoRetries, 1 + failures}, {"stream", r.Stream, 1}} {
				if sc.s == nil {
					t.Fatalf("%s: no scenario", sc.name)
				}
				for i := range grpcRuns {
					before, pending := srv.Attempts(), srv.Pending()
					if err := sc.s(ctx); err != nil {
						t.Fatalf("%s, run %d: error %v, want nil", sc.name, i+1, err)
					}
					if got := srv.Attempts() - before; got != sc.attempts {
						t.Fatalf("%s, run %d: the server saw %d attempts, want %d", sc.name, i+1, got, sc.attempts)
					}
					if got := srv.Pending(); got != pending {
						t.Fatalf("%s, run %d: %d request ids pending on the server, want %d", sc.name, i+1, got, pending)
					}
				}
			}
		})
	}
}
