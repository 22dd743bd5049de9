package retry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// timedPass runs one successful request in scope that takes latency on
// clock, as the loop would: the token is acquired before the attempt and
// recorded after it.
func timedPass(t *testing.T, a *Adaptive, clock *handClock, scope string, latency time.Duration) {
	t.Helper()
	tok, _ := a.AcquireInitialToken(scope)
	clock.Advance(latency)
	if err := a.RecordSuccess(tok); err != nil {
		t.Fatal(err)
	}
}

var (
	errAdaptiveNotFound = WithInfo(errors.New("NOT_FOUND"), Info{Safety: Unsafe, Fault: FaultClient})
	errAdaptiveAllowed  = WithInfo(errors.New("DEADLINE_EXCEEDED, retry allowed"), Info{Safety: Safe, Timeout: true, Fault: FaultServer, Allowed: true})
	alwaysRefuse        = func() float64 { return 0 } // client-side throttling refuses at any probability above 0
)

// TestAdaptiveRetriesTimeoutsOfAHealthyService: a timeout among fast
// successes (one bad replica, one slow attempt) is retried. A client with
// no recent timed success has no evidence of health and does not retry
// one, unless RetryTimeouts says to.
func TestAdaptiveRetriesTimeoutsOfAHealthyService(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
	if err := failOnce(t, a, "fresh", errAdaptiveTimeout); !errors.Is(err, ErrNotRetryable) {
		t.Fatalf("a fresh scope's first timeout: %v, want ErrNotRetryable", err)
	}
	if err := failOnce(t, NewAdaptive(AdaptiveOptions{RetryTimeouts: true}), "fresh", errAdaptiveTimeout); err != nil {
		t.Fatalf("a fresh scope's first timeout with RetryTimeouts: %v, want a retry", err)
	}
	for i := range 100 {
		timedPass(t, a, clock, "api", 5*time.Millisecond)
		clock.Advance(100 * time.Millisecond)
		if i%10 == 9 { // one attempt in ten times out: a black-holed replica of ten
			if err := failOnce(t, a, "api", errAdaptiveTimeout); err != nil {
				t.Fatalf("timeout %d among fast successes: %v, want a retry", i/10+1, err)
			}
		}
	}
}

// TestAdaptiveRefusesTimeoutsOfAnOverloadedService: a timeout is not
// retried when the latency of successes has climbed (a queue builds at the
// server), nor when most of the window's attempts time out; the server's
// explicit permission and RetryTimeouts lift the refusal.
func TestAdaptiveRefusesTimeoutsOfAnOverloadedService(t *testing.T) {
	t.Run("latency climbing", func(t *testing.T) {
		clock := newHandClock()
		a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
		for range 20 {
			timedPass(t, a, clock, "api", 5*time.Millisecond)
			clock.Advance(100 * time.Millisecond)
		}
		for i := range 10 { // the queue grows: each success takes longer
			timedPass(t, a, clock, "api", time.Duration(i+1)*60*time.Millisecond)
			clock.Advance(100 * time.Millisecond)
		}
		if err := failOnce(t, a, "api", errAdaptiveTimeout); !errors.Is(err, ErrNotRetryable) {
			t.Fatalf("timeout while latency climbs 5 ms → 600 ms: %v, want ErrNotRetryable", err)
		}
		if err := failOnce(t, a, "api", errAdaptiveAllowed); err != nil {
			t.Fatalf("a timeout the server allows retrying: %v, want a retry", err)
		}
		b := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal, RetryTimeouts: true})
		for i := range 10 {
			timedPass(t, b, clock, "api", time.Duration(i+1)*60*time.Millisecond)
		}
		// Evidence grows stale: a window without a timed success.
		for range 5 {
			timedPass(t, a, clock, "stale", 5*time.Millisecond)
		}
		clock.Advance(11 * time.Second)
		if err := failOnce(t, a, "stale", errAdaptiveTimeout); !errors.Is(err, ErrNotRetryable) {
			t.Fatalf("a timeout 11 s after the last timed success: %v, want ErrNotRetryable", err)
		}
		if err := failOnce(t, b, "api", errAdaptiveTimeout); err != nil {
			t.Fatalf("RetryTimeouts: %v, want a retry", err)
		}
	})
	t.Run("most attempts time out", func(t *testing.T) {
		clock := newHandClock()
		a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
		var last error
		for range 8 { // alternate, so that no streak stops it first
			timedPass(t, a, clock, "api", 5*time.Millisecond)
			clock.Advance(100 * time.Millisecond)
			last = failOnce(t, a, "api", errAdaptiveTimeout)
		}
		if !errors.Is(last, ErrNotRetryable) {
			t.Fatalf("half of 16 attempts timed out: %v, want ErrNotRetryable", last)
		}
	})
}

// TestAdaptiveLatencyProbesFollowTheRate: a slow client times every
// attempt; a fast one a few, so that its success path stays cheap.
func TestAdaptiveLatencyProbesFollowTheRate(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Now: clock.Now})
	timed := func(n int, every time.Duration) (probes int) {
		for range n {
			tok, _ := a.AcquireInitialToken("")
			if tok.st.started != 0 {
				probes++
			}
			clock.Advance(every)
			_ = a.RecordSuccess(tok)
		}
		return probes
	}
	if n := timed(20, time.Second); n < 19 {
		t.Fatalf("a client sending one request a second timed %d of 20, want all but the first few", n)
	}
	if n := timed(100_000, 10*time.Microsecond); n > 20 || n < 5 {
		t.Fatalf("a client sending 100,000 requests a second timed %d in a second, want about 10", n)
	}
}

// TestAdaptiveDoRetriesAnAttemptTimeout: retry.Do with AttemptTimeout
// retries an attempt that ran out of its time, with the default strategy of
// a client whose calls have been succeeding.
func TestAdaptiveDoRetriesAnAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewAdaptive(AdaptiveOptions{})
		for range 3 {
			if err := Do(context.Background(), a, func(context.Context) error {
				time.Sleep(10 * time.Millisecond)
				return nil
			}, AttemptTimeout(2*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		attempts := 0
		err := Do(context.Background(), a, func(ctx context.Context) error {
			attempts++
			if attempts == 1 {
				<-ctx.Done() // a replica that never answers
				return ctx.Err()
			}
			return nil
		}, AttemptTimeout(2*time.Second))
		if err != nil || attempts != 2 {
			t.Fatalf("Do: %v after %d attempts, want success on attempt 2", err, attempts)
		}
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

// TestAdaptiveClockSteppingBack: a clock that steps back an hour (an NTP
// correction) changes nothing: the limiter stops limiting once the
// throttling is over, as it would have.
func TestAdaptiveClockSteppingBack(t *testing.T) {
	clock := newHandClock()
	a := NewAdaptive(AdaptiveOptions{Now: clock.Now, Rand: noRefusal})
	for range 50 {
		passOnce(t, a, "api")
		clock.Advance(200 * time.Millisecond)
	}
	_ = failOnce(t, a, "api", errAdaptive429)
	if _, limiting := a.Rate("api"); !limiting {
		t.Fatal("not limiting after a throttle")
	}
	clock.Advance(-time.Hour)
	for range 100 {
		clock.Advance(100 * time.Millisecond)
		passOnce(t, a, "api")
	}
	if rate, limiting := a.Rate("api"); limiting {
		t.Fatalf("still limiting, to %.2f/s, 10 s after the last throttle and a step back of the clock", rate)
	}
}

// TestBudgetRefundInALaterSlot: a retry released after its wait crossed
// into a later slot of the window is returned all the same.
func TestBudgetRefundInALaterSlot(t *testing.T) {
	clock := newHandClock()
	b := NewBudget(BudgetOptions{MinPerSecond: 0.1, Ratio: -1, Window: 10 * time.Second, Now: clock.Now})
	if !b.TryWithdraw() {
		t.Fatal("a floor of 1 retry per window must allow one")
	}
	clock.Advance(2500 * time.Millisecond) // two slots later
	b.refund()
	if !b.TryWithdraw() {
		t.Fatal("a retry refunded two slots after it was taken is lost")
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

// TestClassifyMergesAllowed: a join is allowed only if every branch was.
func TestClassifyMergesAllowed(t *testing.T) {
	allowed := WithInfo(errors.New("a"), Info{Safety: Safe, Fault: FaultServer, Allowed: true})
	plain := WithInfo(errors.New("b"), Info{Safety: Safe, Fault: FaultServer})
	if !Classify(errors.Join(allowed, allowed)).Allowed {
		t.Fatal("two allowed branches: not allowed")
	}
	if Classify(errors.Join(allowed, plain)).Allowed {
		t.Fatal("one branch without the server's permission: allowed")
	}
}
