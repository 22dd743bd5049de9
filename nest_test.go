package retry

import (
	"context"
	"errors"
	"testing"
)

// The mark reaches contexts derived from the marked one, and none once its
// work is done, a background task's included.
func TestCallerRetriesMark(t *testing.T) {
	type key struct{}
	plain := context.WithValue(context.Background(), key{}, "v")
	if CallerRetries(plain) {
		t.Fatal("an unmarked context is marked")
	}
	marked, done := WithCallerRetries(plain)
	child, cancel := context.WithCancel(marked)
	defer cancel()
	background := context.WithoutCancel(child)
	for name, ctx := range map[string]context.Context{"marked": marked, "child": child, "background": background} {
		if !CallerRetries(ctx) {
			t.Fatalf("%s: not marked while the work runs", name)
		}
		if ctx.Value(key{}) != "v" {
			t.Fatalf("%s: lost its parent's values", name)
		}
	}
	done()
	for name, ctx := range map[string]context.Context{"marked": marked, "child": child, "background": background} {
		if CallerRetries(ctx) {
			t.Fatalf("%s: still marked after the work is done", name)
		}
	}
	// A mark ended inside one still running leaves the outer one.
	outer, endOuter := WithCallerRetries(context.Background())
	inner, endInner := WithCallerRetries(outer)
	endInner()
	if !CallerRetries(inner) {
		t.Fatal("the outer mark is hidden by an inner one that ended")
	}
	endOuter()
	if CallerRetries(inner) {
		t.Fatal("marked after both ended")
	}
}

// An *Error that left its failure to the caller classifies as that failure,
// so the caller's loop retries it: two layers make three attempts in all, not
// nine; any other *Error stays Unsafe.
func TestErrOuterLoopIsRetriedByTheCaller(t *testing.T) {
	inner := 0
	err := Do(context.Background(), &Simple{Backoff: Constant(0)}, func(ctx context.Context) error {
		ctx, done := WithCallerRetries(ctx)
		defer done()
		return Do(ctx, &Simple{Backoff: Constant(0)}, func(ctx context.Context) error {
			inner++
			return errTransient
		}, BeforeRetry(func(ctx context.Context, _ int, _ error) error {
			if CallerRetries(ctx) {
				return ErrOuterLoop
			}
			return nil
		}))
	})
	var e *Error
	if !errors.As(err, &e) || e.Attempts != 3 || inner != 3 || !errors.Is(err, errTransient) {
		t.Fatalf("err = %v after %d inner attempts", err, inner)
	}
	if !Classify(&Error{Err: errTransient, Reason: ErrOuterLoop}).Retryable() {
		t.Fatal("an Error left to the caller is not retryable")
	}
	if Classify(&Error{Err: errTransient, Reason: ErrMaxAttempts}).Retryable() {
		t.Fatal("an Error that retried already is retryable")
	}
}
