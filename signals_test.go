package retry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"
)

// Client-side throttling refuses a retry exactly when the pinned draw is
// below (attempts − K·accepts)/(attempts + 1): with 5 accepted attempts and
// a draw of 0.3, K = 2 first refuses at the 10th failure (5/16 > 0.3 > 4/15)
// and K = 3 at the 17th (7/23 > 0.3 > 6/22).
func TestAdaptiveRejectionProbabilityFormula(t *testing.T) {
	for _, tc := range []struct {
		k        float64
		firstRef int
	}{{2, 10}, {3, 17}} {
		clock := newHandClock()
		a := NewAdaptive(AdaptiveOptions{Streak: -1, Multiplier: tc.k, Now: clock.Now,
			Rand: func() float64 { return 0.3 }})
		for range 5 {
			passOnce(t, a, "s")
		}
		for f := 1; f <= tc.firstRef; f++ {
			err := failOnce(t, a, "s", errAdaptive503)
			switch {
			case f < tc.firstRef && err != nil:
				t.Fatalf("K=%v: failure %d refused early: %v", tc.k, f, err)
			case f == tc.firstRef && !errors.Is(err, ErrBudgetExhausted):
				t.Fatalf("K=%v: failure %d: %v, want ErrBudgetExhausted", tc.k, f, err)
			}
		}
	}
}

// TestAdaptiveClientFaultsAreAccepts: answers that blame the client show a
// service at work: they neither build a failure streak nor count against
// the service in client-side throttling. The caller's own cancellation
// counts as nothing.
func TestAdaptiveClientFaultsAreAccepts(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: alwaysRefuse})
	for range 3 {
		if err := failOnce(t, a, "api", errAdaptiveNotFound); !errors.Is(err, ErrNotRetryable) {
			t.Fatalf("NOT_FOUND: %v, want ErrNotRetryable", err)
		}
	}
	if err := failOnce(t, a, "api", errAdaptive503); err != nil {
		t.Fatalf("503 after three NOT_FOUND: %v, want a retry", err)
	}
	// A scope where 80 % of answers are NOT_FOUND and the rest succeed.
	b := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: alwaysRefuse})
	for i := range 100 {
		clock.Advance(50 * time.Millisecond)
		if i%5 == 0 {
			passOnce(t, b, "api")
		} else {
			_ = failOnce(t, b, "api", errAdaptiveNotFound)
		}
	}
	if err := failOnce(t, b, "api", errAdaptive503); err != nil {
		t.Fatalf("503 in a scope of 80%% NOT_FOUND: %v, want a retry", err)
	}
	// Cancellations between failures do not lengthen the streak.
	c := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
	_ = failOnce(t, c, "api", errAdaptive503)
	for _, err := range []error{context.Canceled, context.DeadlineExceeded, fmt.Errorf("call: %w", context.Canceled)} {
		if got := failOnce(t, c, "api", err); !errors.Is(got, ErrNotRetryable) {
			t.Fatalf("%v: %v, want ErrNotRetryable", err, got)
		}
	}
	if err := failOnce(t, c, "api", errAdaptive503); err != nil {
		t.Fatalf("second 503, three cancellations between: %v, want a retry", err)
	}
}

// TestAdaptiveScopesDoNotStarveEachOther: a healthy scope keeps its
// retries while another, sharing the strategy, fails; a failing service
// reached under thousands of scope names is still judged across them.
func TestAdaptiveScopesDoNotStarveEachOther(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: alwaysRefuse})
	for i := range 1000 { // A fails at 100 req/s; B succeeds at 10 req/s
		clock.Advance(10 * time.Millisecond)
		_ = failOnce(t, a, "A", errAdaptive503)
		if i%10 == 0 {
			passOnce(t, a, "B")
		}
	}
	err := failOnce(t, a, "B", errAdaptive503)
	if err != nil {
		t.Fatalf("healthy B while A fails: %v, want a retry", err)
	}
	refused := 0
	for i := range 1000 {
		if failOnce(t, a, fmt.Sprint("host", i), errAdaptive503) != nil {
			refused++
		}
	}
	if refused < 950 {
		t.Fatalf("%d of 1,000 fresh scopes of a failing service refused, want nearly all", refused)
	}
}

// TestAdaptiveStreakStopsRetries: three failed attempts in a row stop a
// scope's retries until an attempt succeeds; other scopes are not affected.
func TestAdaptiveStreakStopsRetries(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
	for i := range 2 {
		if err := failOnce(t, a, "svc", errAdaptive503); err != nil {
			t.Fatalf("failure %d: %v, want a retry", i+1, err)
		}
	}
	if err := failOnce(t, a, "svc", errAdaptive503); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("third failure in a row: %v, want ErrBudgetExhausted", err)
	}
	if err := failOnce(t, a, "other", errAdaptive503); err != nil {
		t.Fatalf("another scope: %v, want a retry", err)
	}
	passOnce(t, a, "svc")
	if err := failOnce(t, a, "svc", errAdaptive503); err != nil {
		t.Fatalf("after a success: %v, want a retry", err)
	}
}

// TestAdaptiveStreakRelaxesWhileRetriesWork: after a retry succeeded, a
// streak of 2·3+2 = 8 is allowed within the window; throttling errors never
// get the longer streak.
func TestAdaptiveStreakRelaxesWhileRetriesWork(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal, Multiplier: -1})
	tok, _ := a.AcquireInitialToken("")
	tok, err := a.RefreshToken(tok, errAdaptive503)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.RecordSuccess(tok); err != nil { // a retry that worked
		t.Fatal(err)
	}
	for i := range 7 {
		if err := failOnce(t, a, "", errAdaptive503); err != nil {
			t.Fatalf("failure %d after a working retry: %v, want a retry", i+1, err)
		}
	}
	if err := failOnce(t, a, "", errAdaptive503); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("eighth failure: %v, want ErrBudgetExhausted", err)
	}

	b := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal, Multiplier: -1})
	tok, _ = b.AcquireInitialToken("")
	tok, _ = b.RefreshToken(tok, errAdaptive503)
	_ = b.RecordSuccess(tok)
	_ = failOnce(t, b, "", errAdaptive429)
	_ = failOnce(t, b, "", errAdaptive429)
	if err := failOnce(t, b, "", errAdaptive429); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("third throttle in a row: %v, want the short streak", err)
	}

	// Out of the window, the streak is short again.
	c := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal, Multiplier: -1})
	tok, _ = c.AcquireInitialToken("")
	tok, _ = c.RefreshToken(tok, errAdaptive503)
	_ = c.RecordSuccess(tok)
	clock.Advance(11 * time.Second)
	_ = failOnce(t, c, "", errAdaptive503)
	_ = failOnce(t, c, "", errAdaptive503)
	if err := failOnce(t, c, "", errAdaptive503); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("third failure 11 s after the working retry: %v, want the short streak", err)
	}
}

// TestAdaptiveThrottlingAcrossScopes: a service that fails under many scope
// names is judged across them: fresh scopes stop retrying too.
func TestAdaptiveThrottlingAcrossScopes(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: func() float64 { return 0.5 }})
	granted := 0
	for i := range 200 {
		if failOnce(t, a, fmt.Sprint("host", i), errAdaptive503) == nil {
			granted++
		}
	}
	if granted > 20 {
		t.Fatalf("%d of 200 fresh scopes retried a failing service, want few", granted)
	}
	// With a healthy service in between, fresh scopes retry.
	b := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
	for i := range 200 {
		passOnce(t, b, fmt.Sprint("host", i))
		if err := failOnce(t, b, fmt.Sprint("host", i), errAdaptive503); err != nil {
			t.Fatalf("scope %d of a healthy service: %v", i, err)
		}
	}
}

// TestAdaptiveAllowedIsStillBounded: the server's permission (Info.Allowed)
// lifts only the refusal of a timeout. The failure streak, client-side
// throttling, a Budget and a quota still bound the retries it allows.
func TestAdaptiveAllowedIsStillBounded(t *testing.T) {
	t.Run("streak", func(t *testing.T) {
		clock := newHandClock()
		a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
		for i := range 2 {
			if err := failOnce(t, a, "api", errAdaptiveAllowed); err != nil {
				t.Fatalf("allowed timeout %d: %v, want a retry", i+1, err)
			}
		}
		if err := failOnce(t, a, "api", errAdaptiveAllowed); !errors.Is(err, ErrBudgetExhausted) {
			t.Fatalf("a third allowed timeout in a row: %v, want the streak's ErrBudgetExhausted", err)
		}
	})
	t.Run("client-side throttling", func(t *testing.T) {
		clock := newHandClock()
		a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: alwaysRefuse, Streak: -1})
		for range 20 { // a window of failures: the service accepts nothing
			clock.Advance(100 * time.Millisecond)
			_ = failOnce(t, a, "api", errAdaptive503)
		}
		err := failOnce(t, a, "api", errAdaptiveAllowed)
		if !errors.Is(err, ErrBudgetExhausted) {
			t.Fatalf("an allowed timeout where the service accepts nothing: %v, want client-side throttling's refusal", err)
		}
	})
	t.Run("budget", func(t *testing.T) {
		clock := newHandClock()
		b := NewBudget(BudgetOptions{Ratio: -1, MinPerSecond: 0.1, Window: 10 * time.Second, Now: clock.Now})
		a := NewAdaptive(AdaptiveOptions{StandardOptions: StandardOptions{Budget: b}, Now: clock.Now, Rand: noRefusal})
		retried := func() error { // an allowed timeout whose retry is made and succeeds
			tok, _ := a.AcquireInitialToken("api")
			next, err := a.RefreshToken(tok, errAdaptiveAllowed)
			if err != nil {
				return err
			}
			return a.RecordSuccess(next)
		}
		if err := retried(); err != nil {
			t.Fatalf("the budget's one retry: %v", err)
		}
		if err := retried(); !errors.Is(err, ErrBudgetExhausted) {
			t.Fatalf("an allowed timeout with the budget spent: %v, want ErrBudgetExhausted", err)
		}
	})
	t.Run("quota", func(t *testing.T) {
		clock := newHandClock()
		a := NewAdaptive(AdaptiveOptions{StandardOptions: StandardOptions{Capacity: DefaultRetryCost}, Now: clock.Now, Rand: noRefusal})
		tok, _ := a.AcquireInitialToken("api")
		if _, err := a.RefreshToken(tok, errAdaptiveAllowed); err != nil { // takes the quota's only retry
			t.Fatalf("the quota's one retry: %v", err)
		}
		if err := failOnce(t, a, "api", errAdaptiveAllowed); !errors.Is(err, ErrQuotaExhausted) {
			t.Fatalf("an allowed timeout with the quota drained: %v, want ErrQuotaExhausted", err)
		}
	})
}

// TestAdaptiveAttemptDeadlineIsTheServicesTimeout: an attempt that ends
// with a deadline of its own while the caller's context is still alive (a
// context.WithTimeout inside op, retry.AttemptTimeout) is a service that
// did not answer in time, even when op marks it Transient: against a
// black-holed service the timeout rule and the streak stop the retries,
// where every request used to get both of its own.
func TestAdaptiveAttemptDeadlineIsTheServicesTimeout(t *testing.T) {
	blackHole := func(ctx context.Context) error { <-ctx.Done(); return Transient(ctx.Err()) }
	for _, tc := range []struct {
		name string
		op   func(context.Context) error
		opts []Option
	}{
		{"context.WithTimeout in op", func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			defer cancel()
			return blackHole(ctx)
		}, nil},
		{"AttemptTimeout", blackHole, []Option{AttemptTimeout(20 * time.Millisecond)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := NewAdaptive(AdaptiveOptions{})
				attempts := 0
				op := func(ctx context.Context) error { attempts++; return tc.op(ctx) }
				for range 100 { // a request a second
					if err := Do(context.Background(), a, op, tc.opts...); err == nil {
						t.Fatal("a black-holed service answered")
					}
					time.Sleep(time.Second)
				}
				if retries := attempts - 100; retries > 2 {
					t.Fatalf("%d retries of 100 requests to a service that never answers, want at most the streak's 2", retries)
				}
			})
		})
	}
}

// TestAdaptiveClientTimeoutIsTheServicesTimeout: the same through an
// http.Client with a Timeout, against a loopback server that never
// answers: the client's timeout is the attempt's, not the caller's.
func TestAdaptiveClientTimeoutIsTheServicesTimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer srv.Close()
	c := &http.Client{Timeout: 20 * time.Millisecond}
	defer c.CloseIdleConnections()
	a := NewAdaptive(AdaptiveOptions{})
	attempts := 0
	for range 20 {
		err := Do(context.Background(), a, func(ctx context.Context) error {
			attempts++
			req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL, nil)
			resp, err := c.Do(req)
			if err != nil {
				return Transient(err)
			}
			return resp.Body.Close()
		})
		if err == nil {
			t.Fatal("a server that never answers answered")
		}
	}
	if retries := attempts - 20; retries > 2 {
		t.Fatalf("%d retries of 20 requests with http.Client.Timeout to a server that never answers, want at most the streak's 2", retries)
	}
}

// TestAdaptiveCallersDeadlineCountsAsNothing: the caller's own deadline,
// passed while the service was working on the attempt, builds no streak:
// a server failure after a run of them is still retried.
func TestAdaptiveCallersDeadlineCountsAsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveOptions{})
		for range 5 {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			_ = Do(ctx, a, func(ctx context.Context) error { <-ctx.Done(); return Transient(ctx.Err()) })
			cancel()
		}
		attempts := 0
		err := Do(context.Background(), a, func(context.Context) error {
			if attempts++; attempts == 1 {
				return errAdaptive503
			}
			return nil
		})
		if err != nil || attempts != 2 {
			t.Fatalf("a 503 after five deadlines of the caller's: %v after %d attempts, want a retry that succeeds", err, attempts)
		}
	})
}

// TestAdaptivePermissionKeepsTheStreakAndThrottling: a server's permission
// (Info.Allowed, as httpretry gives a 413 with Retry-After: 0 and forrst a
// client error with "allowed": true) on a client fault does not make the
// answer an accepted one: the streak, and with it off client-side
// throttling, still stop the retries of a server that answers every
// request so.
func TestAdaptivePermissionKeepsTheStreakAndThrottling(t *testing.T) {
	tooLarge := WithInfo(errors.New("413 Content Too Large, Retry-After: 0"), Info{Safety: Safe, Fault: FaultClient, Allowed: true})
	for _, tc := range []struct {
		name string
		opts AdaptiveOptions
		max  int
	}{
		{"streak", AdaptiveOptions{}, 2},
		{"client-side throttling", AdaptiveOptions{Streak: -1, Rand: alwaysRefuse}, minEvidence},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := NewAdaptive(tc.opts)
				attempts := 0
				for range 50 {
					_ = Do(context.Background(), a, func(context.Context) error { attempts++; return tooLarge })
					time.Sleep(100 * time.Millisecond)
				}
				if retries := attempts - 50; retries > tc.max {
					t.Fatalf("%d retries of 50 requests answered 413 with the server's permission, want at most %d", retries, tc.max)
				}
			})
		})
	}
}

// TestAdaptiveHealthyScopeDoesNotHideAFailingOne: the strategy-wide counts
// that judge scopes without a window of their own are not diluted by a
// healthy scope's successes: a failing service reached under ever-new host
// names, beside a busy healthy one, does not collect a retry under each;
// the healthy scope keeps its own.
func TestAdaptiveHealthyScopeDoesNotHideAFailingOne(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: func() float64 { return 0.5 }})
	granted, failures := 0, 0
	for i := range 20_000 { // 1,000 successes a second, 100 failures a second, for 20 s
		clock.Advance(time.Millisecond)
		passOnce(t, a, "healthy")
		if i%10 == 0 {
			failures++
			if failOnce(t, a, fmt.Sprint("host", i), errAdaptive503) == nil {
				granted++
			}
		}
	}
	if granted > failures/20 {
		t.Fatalf("%d of %d failures of fresh host names retried beside a healthy scope, want few", granted, failures)
	}
	if err := failOnce(t, a, "healthy", errAdaptive503); err != nil {
		t.Fatalf("the healthy scope's failure: %v, want a retry", err)
	}
}
