package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/retrykit/retry"
)

// A Breaker shared by every call to a service: when most recent attempts
// failed for the service's fault, calls fail at once with ErrCircuitOpen
// instead of reaching it, until a probe succeeds.
func ExampleWithBreaker() {
	now := time.Unix(1_700_000_000, 0) // a clock of the example's own
	breaker := retry.NewBreaker(retry.BreakerOptions{
		MinAttempts: 4,
		OpenFor:     5 * time.Second,
		Now:         func() time.Time { return now },
	})
	strategy := retry.NewAdaptive(retry.AdaptiveOptions{StandardOptions: retry.StandardOptions{Backoff: retry.Constant(0)}})
	down := true
	call := func() error {
		return retry.Do(context.Background(), strategy, func(context.Context) error {
			if down {
				return retry.WithInfo(errors.New("503 Service Unavailable"), retry.Info{Safety: retry.Safe, Fault: retry.FaultServer})
			}
			return nil
		}, retry.WithBreaker(breaker), retry.Unmarked())
	}

	fmt.Println(call()) // three attempts fail
	fmt.Println(call()) // a fourth opens the circuit (the strategy refused its retry first)
	fmt.Println(breaker.State(""))
	fmt.Println(call()) // refused: the service is not called

	down = false
	now = now.Add(5 * time.Second)
	fmt.Println(breaker.State(""))
	fmt.Println(call()) // the probe succeeds
	fmt.Println(breaker.State(""))
	// Output:
	// retry: gave up after 3 attempts (attempts exhausted): 503 Service Unavailable
	// retry: gave up after 1 attempt (retry budget exhausted: too many attempts in a row failed in this scope; retries resume after a success): 503 Service Unavailable
	// open
	// retry: gave up after 0 attempts (circuit open, attempt not made)
	// half-open
	// <nil>
	// closed
}

// A loop of one's own (here a poller that does not retry) consults a
// Breaker as Do does: Allow before each attempt, Done with its outcome.
func ExampleBreaker_Allow() {
	now := time.Unix(1_700_000_000, 0) // a clock of the example's own
	breaker := retry.NewBreaker(retry.BreakerOptions{
		MinAttempts: 3,
		OpenFor:     10 * time.Second,
		Now:         func() time.Time { return now },
	})
	poll := func(ctx context.Context) error {
		ticket, err := breaker.Allow("inventory")
		if err != nil {
			return err // the circuit is open: the service is not called
		}
		err = retry.WithInfo(errors.New("502 Bad Gateway"), retry.Info{Fault: retry.FaultServer})
		ticket.Done(ctx, err)
		return err
	}
	for range 4 {
		fmt.Println(poll(context.Background()))
	}
	fmt.Println(breaker.State("inventory"), breaker.Delay("inventory"))
	// Output:
	// 502 Bad Gateway
	// 502 Bad Gateway
	// 502 Bad Gateway
	// retry: circuit open, attempt not made
	// open 10s
}
