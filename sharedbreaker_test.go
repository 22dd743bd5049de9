package retry

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry/internal/sharedcircuit"
)

// fakeStore is a shared circuit's store as a bound breaker calls it.
type fakeStore struct {
	shared   bool
	claim    sharedcircuit.Claim
	claims   int
	verdicts []string
}

func (s *fakeStore) Shared() bool { return s.shared }
func (s *fakeStore) Claim(string) (sharedcircuit.Claim, bool) {
	s.claims++
	return s.claim, s.shared
}
func (s *fakeStore) Verdict(scope string, round uint64, v sharedcircuit.Verdict) {
	s.verdicts = append(s.verdicts, scope+"/"+string(rune('0'+round))+"/"+string(rune('0'+v)))
}

// TestSharedBreaker: a bound breaker's own failures do not open its
// circuit while its store can be reached; the shared state does; after its
// spell an attempt asks the store for a probe's place, is the probe if
// granted and sends its verdict to the store, and is refused, with no
// claim again before RetryIn, if not; with the store away, the breaker
// decides on its own again.
func TestSharedBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBreaker(BreakerOptions{MinAttempts: 3})
		s := &fakeStore{shared: true}
		h := sharedcircuit.Bind(b, s)
		fail := func() error {
			tk, err := b.Allow("x")
			if err == nil {
				tk.Done(context.Background(), Transient(errors.New("down")))
			}
			return err
		}
		for range 5 {
			if err := fail(); err != nil {
				t.Fatalf("a bound breaker opened on its own counts: %v", err)
			}
		}
		var c sharedcircuit.Circuit
		h.Circuits(func(name string, cc sharedcircuit.Circuit) bool {
			if name == "x" {
				c = cc
			}
			return true
		})
		if epoch, attempts, successes := c.Counts(); epoch != 0 || attempts != 5 || successes != 0 {
			t.Fatalf("Counts = %d, %d, %d; want epoch 0, 5 attempts, 0 successes", epoch, attempts, successes)
		}
		if !h.Trips(5, 0) || h.Trips(2, 0) {
			t.Error("Trips is not the breaker's rule")
		}

		c.Apply(sharedcircuit.State{Epoch: 1, Open: true, Left: time.Second, Spell: time.Second})
		if st := b.State("x"); st != BreakerOpen {
			t.Fatalf("after the shared circuit opened: %v", st)
		}
		if err := fail(); err != ErrCircuitOpen || s.claims != 0 {
			t.Fatalf("open: %v after %d claims; want refused without a claim", err, s.claims)
		}

		time.Sleep(time.Second)
		s.claim = sharedcircuit.Claim{RetryIn: 200 * time.Millisecond, State: sharedcircuit.State{Epoch: 1, Open: true, Spell: time.Second}}
		if err := fail(); err != ErrCircuitOpen || s.claims != 1 {
			t.Fatalf("places taken: %v after %d claims; want refused after one", err, s.claims)
		}
		if err := fail(); err != ErrCircuitOpen || s.claims != 1 {
			t.Fatalf("before RetryIn: %v after %d claims; want refused with no claim", err, s.claims)
		}
		time.Sleep(200 * time.Millisecond)
		s.claim = sharedcircuit.Claim{Granted: true, Round: 3, State: sharedcircuit.State{Epoch: 1, Open: true, Spell: time.Second}}
		tk, err := b.Allow("x")
		if err != nil || !tk.Probe() || s.claims != 2 {
			t.Fatalf("granted: %v, probe %v, %d claims", err, tk.Probe(), s.claims)
		}
		tk.Done(context.Background(), nil)
		tk.Release() // once
		if len(s.verdicts) != 1 || s.verdicts[0] != "x/3/1" {
			t.Fatalf("verdicts %q; want one success of round 3", s.verdicts)
		}
		c.Apply(sharedcircuit.State{Epoch: 2})
		if st := b.State("x"); st != BreakerClosed {
			t.Fatalf("after the shared circuit closed: %v", st)
		}

		s.shared = false
		for range 3 {
			_ = fail()
		}
		if st := b.State("x"); st != BreakerOpen {
			t.Fatalf("store away: %v after 3 failures; want the breaker's own circuit open", st)
		}
	})
}
