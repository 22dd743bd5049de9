package sim

import (
	"testing"
	"time"

	"github.com/retrykit/retry"
)

// watched is a strategy that checks, as it is asked, what the runner owes
// the breaker of its client: no first attempt is asked for while the
// circuit is open, and the retries the breaker refuses are handed back.
type watched struct {
	retry.Strategy
	t        *testing.T
	breaker  *retry.Breaker
	asked    int // first attempts asked for
	released int // retries handed back
}

func (w *watched) AcquireInitialToken(scope string) (retry.Token, error) {
	if d := w.breaker.Delay(""); d > 0 {
		w.t.Errorf("a first attempt asked for with the circuit open for %v more", d)
	}
	w.asked++
	return w.Strategy.AcquireInitialToken(scope)
}

func (w *watched) ReleaseToken(tok retry.Token) error {
	w.released++
	return w.Strategy.(retry.Releaser).ReleaseToken(tok)
}

// TestBreakerConsultedAsDo: a policy with a breaker runs as Do with
// WithBreaker: while the circuit is open no attempt reaches the server but
// the probes, the strategy is not asked for first attempts, and the retries
// refused are handed back to it; the outcomes reach the breaker, which
// opens during an outage and closes after it.
func TestBreakerConsultedAsDo(t *testing.T) {
	s := mustDefaults(t, Outage) // 50 clients, 500 req/s for 30 s; the outage from 5 s to 15 s
	w := &watched{t: t}
	p := Policy{
		Name: "watched",
		New: func(env Env) func(int) retry.Strategy {
			w.Strategy = &retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(300 * time.Millisecond)}
			return func(int) retry.Strategy { return w }
		},
		Breaker: func(env Env) func(int) *retry.Breaker {
			w.breaker = retry.NewBreaker(retry.BreakerOptions{OpenFor: 2 * time.Second, Now: env.Now})
			return func(int) *retry.Breaker { return w.breaker }
		},
	}
	r := run(t, s, p)
	if w.breaker.State("") != retry.BreakerClosed {
		t.Errorf("after the outage: %v, want closed", w.breaker.State(""))
	}
	if w.asked >= r.Requests || w.released == 0 {
		t.Errorf("%d first attempts asked for of %d requests, %d retries handed back; want fewer, and some", w.asked, r.Requests, w.released)
	}
	// Open by 9 s (the failures, and their retries, are half the window),
	// probes after 2 s, 4 s, 8 s: each second to the outage's end holds a
	// probe at most.
	for i := 9; i < 15; i++ {
		if r.Offered[i] > 1 {
			t.Errorf("second %d: %.0f attempts sent, want a probe at most", i, r.Offered[i])
		}
	}
	// Closed again once a probe succeeded: every request of the last
	// seconds succeeds.
	for i := 25; i < 30; i++ {
		if r.Goodput[i] < 490 {
			t.Errorf("second %d: %.0f successes, want the 500 requests sent", i, r.Goodput[i])
		}
	}
}
