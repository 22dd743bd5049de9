package retry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
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

// A Bucket given in the options is one quota for every scope: retries held
// in one scope drain it for another, and their success gives it back.
func TestAdaptiveSharedBucketAcrossScopes(t *testing.T) {
	bucket := NewTokenBucket(20)
	a := NewAdaptive(AdaptiveOptions{StandardOptions: StandardOptions{Bucket: bucket}, Streak: -1, Multiplier: -1})
	tok, _ := a.AcquireInitialToken("a")
	held, err := a.RefreshToken(tok, errAdaptive503) // costs 14 of 20
	if err != nil {
		t.Fatal(err)
	}
	if err := failOnce(t, a, "b", errAdaptive503); !errors.Is(err, ErrQuotaExhausted) {
		t.Fatalf("scope b with 6 tokens left: %v, want ErrQuotaExhausted", err)
	}
	if err := a.RecordSuccess(held); err != nil {
		t.Fatal(err)
	}
	if err := failOnce(t, a, "b", errAdaptive503); err != nil {
		t.Fatalf("scope b after the refund: %v", err)
	}
	if got := bucket.Available(); got != 20 {
		t.Fatalf("bucket %d after every retry came back, want 20", got)
	}
}

// ReleaseToken gives a granted retry's withdrawal back to the Budget; an
// unreleased one keeps it, and the budget then refuses with ErrBudgetExhausted.
func TestAdaptiveReleaseRefundsBudget(t *testing.T) {
	clock := newHandClock()
	budget := NewBudget(BudgetOptions{Ratio: -1, MinPerSecond: 0.1, Window: 10 * time.Second, Now: clock.Now}) // 1 retry
	a := NewAdaptive(AdaptiveOptions{StandardOptions: StandardOptions{Budget: budget}, Streak: -1, Multiplier: -1, Now: clock.Now})
	if err := failOnce(t, a, "", errAdaptive503); err != nil { // granted, then released
		t.Fatal(err)
	}
	if got := budget.Available(); got != 1 {
		t.Fatalf("budget %d after a released retry, want 1", got)
	}
	tok, _ := a.AcquireInitialToken("")
	if _, err := a.RefreshToken(tok, errAdaptive503); err != nil { // granted, kept
		t.Fatal(err)
	}
	if err := failOnce(t, a, "", errAdaptive503); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("budget spent: %v, want ErrBudgetExhausted", err)
	}
}

// Rate reports the fill rate, which never goes below MinRate (0.5/s by
// default, whatever invalid value is given).
func TestAdaptiveRateFloor(t *testing.T) {
	for _, tc := range []struct{ min, want float64 }{{0, 0.5}, {3, 3}, {math.NaN(), 0.5}, {-1, 0.5}} {
		clock := newHandClock()
		a := NewAdaptive(AdaptiveOptions{MinRate: tc.min, Now: clock.Now, Rand: noRefusal})
		if rate, limiting := a.Rate("x"); limiting || !math.IsInf(rate, 1) {
			t.Fatalf("an unknown scope: rate %v limiting %v", rate, limiting)
		}
		_ = failOnce(t, a, "x", errAdaptive429) // a throttle at a send rate near 0
		rate, limiting := a.Rate("x")
		if !limiting || rate != tc.want {
			t.Fatalf("MinRate %v: rate %v limiting %v, want %v and limiting", tc.min, rate, limiting, tc.want)
		}
	}
}

// The zero Adaptive retries a transient failure through Do.
func TestAdaptiveZeroValueDo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var a Adaptive
		calls := 0
		err := Do(context.Background(), &a, func(context.Context) error {
			if calls++; calls < 3 {
				return errAdaptive503
			}
			return nil
		})
		if err != nil || calls != 3 {
			t.Fatalf("err %v after %d calls, want success after 3", err, calls)
		}
	})
}

// While a caller waits the limiter's delay, the scope's mutex is free and
// another caller in the same scope gets its token: reserve returns a wait,
// and nothing sleeps under the lock.
func TestAdaptiveWaitHoldsNoLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveOptions{MaxWait: 5 * time.Second, StandardOptions: StandardOptions{MaxAttempts: 1}})
		ctx := context.Background()
		for range 20 {
			_ = Do(ctx, a, func(context.Context) error { return nil })
			time.Sleep(100 * time.Millisecond)
		}
		_ = Do(ctx, a, func(context.Context) error { return errAdaptive429 })
		for range 5 { // kept reservations: the bucket owes tokens
			_, _ = a.AcquireInitialToken("")
		}
		called := make(chan struct{})
		go func() {
			_ = Do(ctx, a, func(context.Context) error { close(called); return nil })
		}()
		synctest.Wait() // the goroutine is asleep in its wait
		select {
		case <-called:
			t.Fatal("the call behind five reservations did not wait")
		default:
		}
		sc := a.scopes.peek("")
		if !sc.mu.TryLock() {
			t.Fatal("the scope's mutex is held while a caller waits")
		}
		sc.mu.Unlock()
		tok, _ := a.AcquireInitialToken("") // the same scope proceeds
		if tok.Delay() <= 0 {
			t.Fatalf("a later token waits %v, want a wait behind the first", tok.Delay())
		}
		_ = a.ReleaseToken(tok)
		<-called
	})
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

// TestAdaptiveRetryNeverQueuesBehindTheLimiter: while the throttled
// limiter owes its longest wait already, a retry is refused rather than
// queued: the client sends more than the service accepts as it is. With
// room, the retry is granted and waits its turn.
func TestAdaptiveRetryNeverQueuesBehindTheLimiter(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
	for range 50 {
		passOnce(t, a, "api")
		clock.Advance(200 * time.Millisecond)
	}
	if err := failOnce(t, a, "api", errAdaptive429); err != nil {
		t.Fatalf("the first throttle, with room in the limiter: %v, want a retry", err)
	}
	for range 20 { // first attempts take every token the limiter may owe
		_, _ = a.AcquireInitialToken("api")
	}
	err := failOnce(t, a, "api", errAdaptive429)
	if !errors.Is(err, ErrBudgetExhausted) || !strings.Contains(err.Error(), "limiter") {
		t.Fatalf("a throttle with the limiter a full wait behind: %v, want the limiter's refusal", err)
	}
}

// handClock is a clock tests move by hand.
type handClock struct {
	mu sync.Mutex
	t  time.Time
}

func newHandClock() *handClock { return &handClock{t: time.Unix(1_700_000_000, 0)} }

func (c *handClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *handClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

var (
	errAdaptive503     = WithInfo(errors.New("503"), Info{Safety: Safe, Fault: FaultServer})
	errAdaptive429     = WithInfo(errors.New("429"), Info{Safety: Safe, Throttle: true, Fault: FaultClient})
	errAdaptiveTimeout = WithInfo(errors.New("timed out"), Info{Safety: Safe, Timeout: true, Fault: FaultServer})
	noRefusal          = func() float64 { return 0.999999 } // client-side throttling refuses only at probability 1
)

// failOnce runs one failed attempt of a new request in scope and reports
// whether its retry was granted, spending the granted token.
func failOnce(t *testing.T, a *Adaptive, scope string, err error) error {
	t.Helper()
	tok, _ := a.AcquireInitialToken(scope)
	next, refused := a.RefreshToken(tok, err)
	if refused == nil {
		_ = a.ReleaseToken(next)
	}
	return refused
}

func passOnce(t *testing.T, a *Adaptive, scope string) {
	t.Helper()
	tok, _ := a.AcquireInitialToken(scope)
	if err := a.RecordSuccess(tok); err != nil {
		t.Fatal(err)
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

// TestAdaptiveLimiter: a throttling error starts the limiter; attempts then
// wait, first attempts included, for at most MaxWait; Rate reports it; once
// the throttling is over the limiter stops.
func TestAdaptiveLimiter(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal, MaxWait: 2 * time.Second})
	for range 50 { // a client sending 5 requests a second
		passOnce(t, a, "api")
		clock.Advance(200 * time.Millisecond)
	}
	if _, limiting := a.Rate("api"); limiting {
		t.Fatal("limiting before any throttle")
	}
	_ = failOnce(t, a, "api", errAdaptive429)
	rate, limiting := a.Rate("api")
	if !limiting || rate <= 0 || rate > 5 {
		t.Fatalf("after a throttle: rate %v, limiting %v; want a limit below 5/s", rate, limiting)
	}
	var waited time.Duration
	for range 20 {
		tok, _ := a.AcquireInitialToken("api")
		if tok.Delay() > 2*time.Second {
			t.Fatalf("wait %v beyond MaxWait", tok.Delay())
		}
		waited = max(waited, tok.Delay())
		_ = a.ReleaseToken(tok)
		_, _ = a.AcquireInitialToken("api") // a second one, kept: the bucket empties
	}
	if waited == 0 {
		t.Fatal("a throttled limiter never made a first attempt wait")
	}
	// No throttle for a while: successes grow the rate back and the limiter
	// stops limiting (AWS's limits for the life of the client).
	for range 100 {
		clock.Advance(100 * time.Millisecond)
		passOnce(t, a, "api")
	}
	if _, limiting := a.Rate("api"); limiting {
		t.Fatal("still limiting 10 s after the last throttle")
	}
	if tok, _ := a.AcquireInitialToken("api"); tok.Delay() != 0 {
		t.Fatalf("a first attempt waits %v after the limiter stopped", tok.Delay())
	}
}

// TestAdaptiveQuotaRefills: with a quota, successes refill it (the AWS SDK
// for Go's adaptive mode never did, aws-sdk-go-v2 #3550), and a released
// retry gives its tokens back.
func TestAdaptiveQuotaRefills(t *testing.T) {
	a := NewAdaptive(AdaptiveOptions{StandardOptions: StandardOptions{Capacity: 30}, Streak: -1, Multiplier: -1})
	_ = failOnce(t, a, "", errAdaptive503) // granted and released: refunded
	if got := a.Available(""); got != 30 {
		t.Fatalf("after a released retry: %d, want 30", got)
	}
	tok, _ := a.AcquireInitialToken("")
	if _, err := a.RefreshToken(tok, errAdaptive503); err != nil {
		t.Fatal(err)
	}
	tok, _ = a.AcquireInitialToken("")
	if _, err := a.RefreshToken(tok, errAdaptive503); err != nil {
		t.Fatal(err)
	}
	if got := a.Available(""); got != 2 {
		t.Fatalf("after two retries: %d, want 2", got)
	}
	tok, _ = a.AcquireInitialToken("")
	if _, err := a.RefreshToken(tok, errAdaptive503); !errors.Is(err, ErrQuotaExhausted) {
		t.Fatalf("drained: %v, want ErrQuotaExhausted", err)
	}
	for range 10 {
		passOnce(t, a, "")
	}
	if got := a.Available(""); got != 12 {
		t.Fatalf("after 10 successes: %d, want 12", got)
	}
}

// TestAdaptiveTokensAreSingleUse: a spent token is rejected.
func TestAdaptiveTokensAreSingleUse(t *testing.T) {
	a := NewAdaptive(AdaptiveOptions{})
	tok, _ := a.AcquireInitialToken("")
	if err := a.RecordSuccess(tok); err != nil {
		t.Fatal(err)
	}
	if err := a.RecordSuccess(tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("second use: %v", err)
	}
	if _, err := a.RefreshToken(tok, errAdaptive503); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("refresh of a spent token: %v", err)
	}
	if err := a.ReleaseToken(tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("release of a spent token: %v", err)
	}
}

// TestAdaptiveDoWaitsTheLimiterNeverPastTheDeadline: Do waits a first
// attempt's turn, and does not start a wait that would end past the
// deadline; a waiting caller blocks no other.
func TestAdaptiveDoWaitsTheLimiterNeverPastTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveOptions{MaxWait: 5 * time.Second, StandardOptions: StandardOptions{Backoff: Constant(0)}})
		ctx := context.Background()
		for range 20 {
			_ = Do(ctx, a, func(context.Context) error { return nil })
			time.Sleep(100 * time.Millisecond)
		}
		_ = Do(ctx, a, func(context.Context) error { return errAdaptive429 }) // the limiter starts
		for range 5 {                                                         // reservations kept: the bucket owes tokens
			_, _ = a.AcquireInitialToken("")
		}
		short, cancel := context.WithTimeout(ctx, time.Millisecond)
		defer cancel()
		calls := 0
		err := Do(short, a, func(context.Context) error { calls++; return nil })
		if !errors.Is(err, ErrDeadline) || calls != 0 {
			t.Fatalf("err %v with %d calls; want ErrDeadline and no call", err, calls)
		}
		start := time.Now()
		if err := Do(ctx, a, func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if time.Since(start) == 0 {
			t.Fatal("a call behind five reservations did not wait its turn")
		}

		// One caller waiting its turn does not hold up another scope.
		var other atomic.Bool
		done := make(chan struct{})
		go func() {
			_ = Do(ctx, a, func(context.Context) error { return nil })
			close(done)
		}()
		_ = Do(ctx, a, func(context.Context) error { other.Store(true); return nil }, Scope("elsewhere"))
		if !other.Load() {
			t.Fatal("a call in another scope did not run")
		}
		<-done
	})
}

// TestAdaptiveConcurrent runs many calls with failures and successes on one
// Adaptive from several goroutines (for the race detector).
func TestAdaptiveConcurrent(t *testing.T) {
	a := NewAdaptive(AdaptiveOptions{StandardOptions: StandardOptions{Backoff: Constant(0), ThrottleBackoff: Constant(0)}, MaxWait: time.Millisecond})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				n := 0
				scope := fmt.Sprint("s", (g+i)%5)
				_ = Do(context.Background(), a, func(context.Context) error {
					n++
					switch (g + i + n) % 7 {
					case 0:
						return errAdaptive429
					case 1, 2:
						return errAdaptive503
					}
					return nil
				}, Scope(scope))
				_, _ = a.Rate(scope)
				_ = a.Available(scope)
			}
		})
	}
	wg.Wait()
}

// FuzzAdaptiveOptions: arbitrary dials, with a Budget and a shared Bucket,
// over several scopes and a clock that jumps both ways. A token's delay is
// never negative and, with no backoff, never beyond the effective MaxWait;
// a limiting Rate is finite and at least the effective MinRate.
func FuzzAdaptiveOptions(f *testing.F) {
	f.Add(0.0, 0.0, 0.0, 0.0, int64(0), int64(0), 0, []byte{2, 2, 2, 2, 0, 0, 1, 5, 9})
	f.Add(math.Inf(-1), math.NaN(), 1.0, math.Inf(1), int64(math.MinInt64), int64(-5), -1, []byte{6, 6, 6, 250, 6, 6})
	f.Add(1e308, 1e-308, 1e308, 1e-308, int64(1), int64(math.MaxInt64), 1<<30, []byte{10, 2, 2, 2, 130, 2, 2})
	f.Fuzz(func(t *testing.T, k, minRate, beta, scale float64, window, maxWait int64, streak int, steps []byte) {
		now := time.Unix(1_700_000_000, 0)
		clock := func() time.Time { return now }
		a := NewAdaptive(AdaptiveOptions{
			StandardOptions: StandardOptions{Backoff: Constant(0), ThrottleBackoff: Constant(0), MaxAttempts: 4,
				Bucket: NewTokenBucket(100), Budget: NewBudget(BudgetOptions{Ratio: k, MinPerSecond: scale, Window: time.Duration(window), Now: clock})},
			Streak: streak, Multiplier: k, Window: time.Duration(window), MaxWait: time.Duration(maxWait),
			MinRate: minRate, Beta: beta, Scale: scale, Now: clock, Rand: func() float64 { return 0.5 },
		})
		limit := orDuration(time.Duration(maxWait), DefaultAdaptiveMaxWait)
		floor := positiveOr(minRate, cubicMinRate)
		check := func(tok Token) {
			if d := tok.Delay(); d < 0 || d > limit {
				t.Fatalf("delay %v outside [0, %v]", d, limit)
			}
		}
		errs := []error{errAdaptive503, errAdaptive429, errAdaptiveTimeout}
		for i, s := range steps {
			scope := string(rune('a' + s%3))
			tok, _ := a.AcquireInitialToken(scope)
			check(tok)
			if s&4 == 0 {
				_ = a.RecordSuccess(tok)
			} else if next, err := a.RefreshToken(tok, errs[i%3]); err == nil {
				check(next)
				if s&8 == 0 {
					_ = a.ReleaseToken(next)
				} else {
					_ = a.RecordSuccess(next)
				}
			}
			now = now.Add(time.Duration(int8(s)) * 53 * time.Millisecond)
			if rate, limiting := a.Rate(scope); limiting && (math.IsNaN(rate) || math.IsInf(rate, 0) || rate < floor) {
				t.Fatalf("limiting at rate %v (floor %v)", rate, floor)
			}
			if a.Available(scope) < 0 {
				t.Fatalf("available %d", a.Available(scope))
			}
		}
	})
}

// FuzzAdaptiveDials drives an Adaptive with arbitrary dials through an
// arbitrary sequence of outcomes and clock steps, backwards ones included:
// no panic, no negative or not-a-number wait or rate, no negative quota.
func FuzzAdaptiveDials(f *testing.F) {
	f.Add(0.0, 0.0, 0.0, 0.0, int64(0), int64(0), 0, []byte{0, 1, 2, 3, 4, 5})
	f.Add(math.NaN(), math.Inf(1), -1.0, 1e308, int64(-1), int64(math.MaxInt64), -5, []byte{3, 3, 3, 3, 255, 0, 128})
	f.Add(-2.0, 1e-300, 0.999, 1e-9, int64(1), int64(1), 1, []byte{2, 2, 2, 2, 2, 2, 2, 1, 1})
	f.Fuzz(func(t *testing.T, k, minRate, beta, scale float64, window, maxWait int64, streak int, steps []byte) {
		now := time.Unix(1_700_000_000, 0)
		a := NewAdaptive(AdaptiveOptions{
			StandardOptions: StandardOptions{Backoff: Constant(0), ThrottleBackoff: Constant(0), Capacity: int(uint8(streak))},
			Streak:          streak, Multiplier: k, Window: time.Duration(window), MaxWait: time.Duration(maxWait),
			MinRate: minRate, Beta: beta, Scale: scale,
			Now:  func() time.Time { return now },
			Rand: func() float64 { return 0.5 },
		})
		for _, b := range steps {
			tok, _ := a.AcquireInitialToken("s")
			if d := tok.Delay(); d < 0 {
				t.Fatalf("negative wait %v", d)
			}
			switch b % 5 {
			case 0:
				_ = a.RecordSuccess(tok)
			case 1:
				if next, err := a.RefreshToken(tok, errAdaptive503); err == nil {
					if next.Delay() < 0 {
						t.Fatalf("negative wait %v", next.Delay())
					}
					_ = a.ReleaseToken(next)
				}
			case 2:
				if next, err := a.RefreshToken(tok, errAdaptive429); err == nil {
					_ = a.RecordSuccess(next)
				}
			case 3:
				_, _ = a.RefreshToken(tok, errAdaptiveTimeout)
			case 4:
				_ = a.ReleaseToken(tok)
			}
			now = now.Add(time.Duration(int8(b)) * 37 * time.Millisecond) // forwards and backwards
			if rate, limiting := a.Rate("s"); limiting && (math.IsNaN(rate) || rate < 0 || math.IsInf(rate, 0)) {
				t.Fatalf("rate %v", rate)
			}
			if a.Available("s") < 0 {
				t.Fatalf("available %d", a.Available("s"))
			}
		}
	})
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

// TestDoAndDoValueTellTheLimiterAlike: an attempt in flight when the
// scope's limiter starts limiting ends in a success the limiter should hear
// of, whether the call is Do's or DoValue's (Do's shortcut read "not
// limiting" when the attempt began, and skipped the tell at its end).
func TestDoAndDoValueTellTheLimiterAlike(t *testing.T) {
	// fastNow: the next call's first attempt goes on the fast path.
	fastNow := func(a *Adaptive) bool { _, now := a.quick(); return now }
	limiting := map[string]bool{}
	for _, name := range []string{"Do", "DoValue"} {
		clk := newHandClock()
		a := NewAdaptive(AdaptiveOptions{Now: clk.Now})
		ctx := context.Background()
		// A client that calls every millisecond: latency probes are a
		// hundred calls apart, and Do's shortcut serves the calls between.
		for range 300 {
			clk.Advance(time.Millisecond)
			_ = Do(ctx, a, succeed, Unmarked())
		}
		for i := 0; !fastNow(a); i++ {
			if i == 200 {
				t.Fatal("a latency probe is always due")
			}
			clk.Advance(time.Millisecond)
			_ = Do(ctx, a, succeed, Unmarked())
		}
		started, release, done := make(chan struct{}), make(chan struct{}), make(chan error)
		op := func(context.Context) error { close(started); <-release; return nil }
		go func() {
			if name == "Do" {
				done <- Do(ctx, a, op, Unmarked())
			} else {
				_, err := DoValue(ctx, a, func(ctx context.Context) (int, error) { return 0, op(ctx) }, Unmarked())
				done <- err
			}
		}()
		<-started
		throttle := WithInfo(errors.New("429"), Info{Safety: Safe, Throttle: true, Fault: FaultClient})
		_ = Do(ctx, a, func(context.Context) error { return throttle }, Unmarked(),
			BeforeRetry(func(context.Context, int, error) error { return errors.New("stop") }))
		if _, limiting := a.Rate(""); !limiting {
			t.Fatalf("%s: the throttle did not start the limiter", name)
		}
		clk.Advance(time.Minute) // the throttling is long over: the next answer ends the limiting
		close(release)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		_, limiting[name] = a.Rate("")
	}
	if limiting["Do"] || limiting["DoValue"] {
		t.Fatalf("still limiting after a success a minute past the throttle: Do %v, DoValue %v", limiting["Do"], limiting["DoValue"])
	}
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

// TestAdaptiveLimiterSettlesWithTime: the limiter stops limiting once the
// throttling has been over long enough, whether an answer came since or
// not: an hour after a single throttle, a burst of first attempts waits
// nothing.
func TestAdaptiveLimiterSettlesWithTime(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
	for range 50 { // 5 requests a second
		passOnce(t, a, "api")
		clock.Advance(200 * time.Millisecond)
	}
	_ = failOnce(t, a, "api", errAdaptive429)
	if _, limiting := a.Rate("api"); !limiting {
		t.Fatal("the throttle did not start the limiter")
	}
	clock.Advance(time.Hour)
	waited := 0
	for range 20 {
		if tok, _ := a.AcquireInitialToken("api"); tok.Delay() > 0 {
			waited++
		}
	}
	if waited > 0 {
		t.Fatalf("%d of 20 first attempts wait an hour after the only throttle, want none", waited)
	}
	if _, limiting := a.Rate("api"); limiting {
		t.Fatal("still limiting an hour after the only throttle")
	}
}
