package main

import (
	"context"
	"testing"
)

// BenchmarkSuccess measures one call whose operation succeeds at once.
func BenchmarkSuccess(b *testing.B) {
	for _, lib := range Libs() {
		if lib.Success != nil {
			b.Run(lib.Name, func(b *testing.B) { benchScenario(b, lib.Success) })
		}
	}
}

// BenchmarkTwoRetries measures one call whose operation fails twice with a
// retryable error and then succeeds, with no delay between attempts.
func BenchmarkTwoRetries(b *testing.B) {
	for _, lib := range Libs() {
		if lib.TwoRetries != nil {
			b.Run(lib.Name, func(b *testing.B) { benchScenario(b, lib.TwoRetries) })
		}
	}
}

// BenchmarkHTTPSuccess measures one GET through each HTTP library to a
// loopback server that answers 200 "ok" at once.
func BenchmarkHTTPSuccess(b *testing.B) {
	for _, lib := range HTTPLibs() {
		b.Run(lib.Name, func(b *testing.B) { benchScenario(b, lib.Success) })
		lib.CloseIdleConnections()
	}
}

// BenchmarkHTTPTwoRetries measures one GET through each retrying HTTP
// library to a loopback server that answers 503 twice and then 200 "ok",
// with no delay between attempts.
func BenchmarkHTTPTwoRetries(b *testing.B) {
	for _, lib := range HTTPLibs() {
		if lib.TwoRetries != nil {
			b.Run(lib.Name, func(b *testing.B) { benchScenario(b, lib.TwoRetries) })
		}
		lib.CloseIdleConnections()
	}
}

// runs is how many times TestScenarios runs each scenario: enough for a
// retry quota that drains to run dry, had the scenario not topped it up.
const runs = 300

func TestScenarios(t *testing.T) {
	ctx := context.Background()
	for _, lib := range Libs() {
		t.Run(lib.Name, func(t *testing.T) {
			if lib.Success == nil && lib.TwoRetries == nil {
				t.Fatal("no scenario")
			}
			check := func(name string, s Scenario, calls int) {
				if s == nil {
					return
				}
				for i := range runs {
					if err := s(ctx); err != nil {
						t.Fatalf("%s, run %d: error %v, want nil", name, i+1, err)
					}
					if got := lib.Calls(); got != calls {
						t.Fatalf("%s, run %d: %d calls, want %d", name, i+1, got, calls)
					}
				}
			}
			check("success", lib.Success, 1)
			check("two retries", lib.TwoRetries, 3)
		})
	}
}

// httpRuns is how many times TestHTTPScenarios runs each scenario.
const httpRuns = 100

// TestHTTPScenarios checks that each HTTP scenario ends with 200 "ok", that
// the server saw 1 request per success run and 3 per two-retries run (and
// forgot the request id after its 200), and that each library kept using
// its connection instead of dialling one per attempt.
func TestHTTPScenarios(t *testing.T) {
	ctx := context.Background()
	srv := Server()
	for _, lib := range HTTPLibs() {
		t.Run(lib.Name, func(t *testing.T) {
			defer lib.CloseIdleConnections()
			check := func(name string, s Scenario, requests int64) {
				if s == nil {
					return
				}
				for i := range httpRuns {
					before, pending := srv.Requests(), srv.Pending()
					if err := s(ctx); err != nil {
						t.Fatalf("%s, run %d: error %v, want nil", name, i+1, err)
					}
					if got := srv.Requests() - before; got != requests {
						t.Fatalf("%s, run %d: the server saw %d requests, want %d", name, i+1, got, requests)
					}
					if got := srv.Pending(); got != pending {
						t.Fatalf("%s, run %d: %d request ids pending on the server, want %d", name, i+1, got, pending)
					}
				}
			}
			check("success", lib.Success, 1)
			check("two retries", lib.TwoRetries, 1+failures)
			// One connection serves every run; a second may be dialled
			// if a request comes while the previous response's
			// connection is on its way back to the pool.
			if d := lib.Dials(); d < 1 || d > 2 {
				t.Errorf("%d connections dialled, want 1 (or 2)", d)
			}
		})
	}
}

// TestTable checks that the table has every library once, retrykit first,
// and a retrykit row for both scenarios, which the ratios divide by.
func TestTable(t *testing.T) {
	libs := Libs()
	if len(libs) == 0 || libs[0].Name != "retrykit" || libs[0].Success == nil || libs[0].TwoRetries == nil {
		t.Fatal("the first library must be retrykit, with both scenarios")
	}
	seen := map[string]bool{}
	for _, l := range libs {
		if seen[l.Name] {
			t.Errorf("library %q listed twice", l.Name)
		}
		seen[l.Name] = true
	}

	hlibs := HTTPLibs()
	if len(hlibs) == 0 || hlibs[0].Name != "bare" || hlibs[0].Success == nil {
		t.Fatal("the first HTTP library must be bare, with a success scenario")
	}
	seen = map[string]bool{}
	for _, l := range hlibs {
		if seen[l.Name] {
			t.Errorf("HTTP library %q listed twice", l.Name)
		}
		seen[l.Name] = true
		if l.Success == nil {
			t.Errorf("HTTP library %q: no success scenario", l.Name)
		}
		if l.TwoRetries == nil && l.Name != "bare" {
			t.Errorf("HTTP library %q: no two-retries scenario", l.Name)
		}
		l.CloseIdleConnections()
	}
	if !seen["httpretry"] {
		t.Error("no httpretry row, which the HTTP two-retries ratios divide by")
	}
}
