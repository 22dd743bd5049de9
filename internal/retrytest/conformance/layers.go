package conformance

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/retrykit/retry"
)

// oneLayer: an application's loop around a call through the integration
// does not multiply its attempts.
func oneLayer(t *testing.T, in Integration) {
	// The loop marks its attempts, so a server that always fails gets one
	// call per attempt of the loop, 3 and not 3 × 3, even though the
	// application turns the failure into an error of its own that says
	// nothing about retrying: with the integration's own strategy and with
	// one of three attempts.
	for _, tc := range []struct {
		name     string
		strategy retry.Strategy
	}{
		{"zero config", nil},
		{"three attempts", simple(3)},
	} {
		t.Run("ApplicationLoop/"+tc.name, func(t *testing.T) {
			srv := in.Serve(t, always(Unavailable))
			in.inTime(t, func(t *testing.T) {
				call := srv.Client(t, Config{Strategy: tc.strategy})
				attempts := 0
				err := retry.Do(context.Background(), simple(3), func(ctx context.Context) error {
					attempts++
					if out := call(ctx); out.Answer != OK {
						return fmt.Errorf("lookup failed: %v", out.Answer) // %v: the chain is cut
					}
					return nil
				})
				var re *retry.Error
				if !errors.As(err, &re) || re.Attempts != 3 || attempts != 3 || srv.Calls() != 3 {
					t.Fatalf("%v after %d attempts and %d calls, want 3 and 3", err, attempts, srv.Calls())
				}
			})
		})
	}

	// A failure the integration leaves to the application crosses a
	// library loop that cannot retry: the application's retry.Do (3
	// attempts) calls a library whose loop uses retry.No, which makes the
	// call. The integration sees the library's mark and makes one attempt;
	// the library passes the failure on; the application retries it: two
	// calls, success.
	t.Run("LibraryLoop", func(t *testing.T) {
		in.gap(t)
		srv := in.Serve(t, func(n int) Answer {
			if n == 1 {
				return Unavailable
			}
			return OK
		})
		in.inTime(t, func(t *testing.T) {
			call := srv.Client(t, Config{})
			library := func(ctx context.Context) error {
				return retry.Do(ctx, &retry.No{}, func(ctx context.Context) error { return call(ctx).appErr() })
			}
			attempts := 0
			err := retry.Do(context.Background(), simple(3), func(ctx context.Context) error {
				attempts++
				return library(ctx)
			})
			if err != nil || attempts != 2 || srv.Calls() != 2 {
				t.Fatalf("err %v after %d application attempts and %d calls, want success after 2 and 2", err, attempts, srv.Calls())
			}
		})
	})

	// Told Unmarked, or around an independent integration, the layers
	// multiply when the application marks its error transient: 3 × 3.
	for _, tc := range []struct {
		name        string
		independent bool
		opts        []retry.Option
	}{
		{"Unmarked", false, []retry.Option{retry.Unmarked()}},
		{"Independent", true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := in.Serve(t, always(Unavailable))
			in.inTime(t, func(t *testing.T) {
				call := srv.Client(t, Config{Strategy: simple(3), Independent: tc.independent})
				err := retry.Do(context.Background(), simple(3), func(ctx context.Context) error {
					return retry.Transient(call(ctx).appErr())
				}, tc.opts...)
				var re *retry.Error
				if !errors.As(err, &re) || re.Attempts != 3 || srv.Calls() != 9 {
					t.Fatalf("%v, %d calls, want 3 attempts and 9 calls", err, srv.Calls())
				}
			})
		})
	}
}

// outerLoop: inside work whose caller retries, an answered failure gets one
// attempt, left to the caller with retry.ErrOuterLoop (an error, where the
// integration returns one, that classifies as the failure, so that the
// caller retries it); an independent integration retries as if alone.
func outerLoop(t *testing.T, in Integration) {
	srv := in.Serve(t, always(Unavailable))
	in.inTime(t, func(t *testing.T) {
		ctx, done := retry.WithCallerRetries(context.Background())
		defer done()
		out := srv.Client(t, Config{Strategy: simple(3)})(ctx)
		if out.Answer != Unavailable || out.Attempts != 1 || !errors.Is(out.Reason, retry.ErrOuterLoop) || srv.Calls() != 1 {
			t.Fatalf("%+v after %d calls; want Unavailable after 1 attempt, left with ErrOuterLoop", out, srv.Calls())
		}
		if out.Err != nil && !retry.Classify(out.Err).Retryable() {
			t.Fatalf("%v classifies as %+v, which the caller does not retry", out.Err, retry.Classify(out.Err))
		}
	})

	srv = in.Serve(t, always(Unavailable))
	in.inTime(t, func(t *testing.T) {
		ctx, done := retry.WithCallerRetries(context.Background())
		defer done()
		out := srv.Client(t, Config{Strategy: simple(3), Independent: true})(ctx)
		if out.Answer != Unavailable || out.Attempts != 3 || srv.Calls() != 3 {
			t.Fatalf("independent: %+v after %d calls; want Unavailable after 3 attempts", out, srv.Calls())
		}
	})
}
