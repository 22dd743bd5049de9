package retry

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
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

// Do marks the context it hands its operation while an attempt runs, so that
// integrations inside it see that their caller retries; its own hooks, which
// run between attempts, see only the marks of the loops around it; a context
// the operation keeps for later work is no longer marked once the attempt is
// done; a loop that cannot retry, or is told Unmarked, marks nothing.
func TestDoMarksItsOperation(t *testing.T) {
	ctx := context.Background()
	var kept context.Context
	var inOp, inHook []bool
	hook := BeforeRetry(func(ctx context.Context, _ int, _ error) error {
		inHook = append(inHook, CallerRetries(ctx))
		return nil
	})
	err := Do(ctx, &Simple{Backoff: Constant(0)}, func(ctx context.Context) error {
		inOp = append(inOp, CallerRetries(ctx))
		kept = context.WithoutCancel(ctx)
		if len(inOp) < 3 {
			return errTransient
		}
		return nil
	}, hook)
	if err != nil || len(inOp) != 3 || !inOp[0] || !inOp[1] || !inOp[2] {
		t.Fatalf("err %v, marked in the operation: %v", err, inOp)
	}
	if len(inHook) != 2 || inHook[0] || inHook[1] {
		t.Fatalf("the loop's own hooks see its mark: %v", inHook)
	}
	if CallerRetries(kept) {
		t.Fatal("a context kept for later work is still marked after Do returned")
	}
	v, _ := DoValue(ctx, &Simple{}, func(ctx context.Context) (bool, error) { return CallerRetries(ctx), nil })
	if !v {
		t.Fatal("DoValue does not mark its operation")
	}

	// Hooks of an inner loop see the outer loop's mark.
	inHook = nil
	_ = Do(ctx, &Simple{MaxAttempts: 1}, func(ctx context.Context) error {
		return Do(ctx, &Simple{MaxAttempts: 2, Backoff: Constant(0)}, func(context.Context) error { return errTransient }, hook)
	})
	if len(inHook) != 2 || !inHook[0] || !inHook[1] {
		t.Fatalf("an inner loop's hooks do not see the outer mark: %v", inHook)
	}

	marked := func(ctx context.Context) error {
		if CallerRetries(ctx) {
			return errors.New("marked")
		}
		return nil
	}
	for name, err := range map[string]error{
		"No":       Do(ctx, &No{}, marked),
		"nil":      Do(ctx, nil, marked),
		"Unmarked": Do(ctx, &Simple{}, marked, Unmarked()),
		"DoValue Unmarked": func() error {
			_, err := DoValue(ctx, &Simple{}, func(ctx context.Context) (int, error) { return 0, marked(ctx) }, Unmarked())
			return err
		}(),
	} {
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// An inner loop that left a failure to its caller (ErrOuterLoop) tells the
// caller's loop, so that the failure is retried there even when the
// operation returns an error of its own that says nothing about retrying,
// with the failure's hint; an error that classifies itself keeps its own
// classification. Two levels make 3 attempts in all, three levels 3 too.
func TestFailureLeftToTheCallerIsRetriedThere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		leaveToCaller := BeforeRetry(func(ctx context.Context, _ int, _ error) error {
			if CallerRetries(ctx) {
				return ErrOuterLoop
			}
			return nil
		})
		calls := 0
		hinted := RetryAfter(Transient(errors.New("503")), 2*time.Second)
		inner := func(ctx context.Context) error {
			return Do(ctx, &Simple{Backoff: Constant(0)}, func(context.Context) error {
				calls++
				return hinted
			}, leaveToCaller)
		}
		plain := errors.New("the service answered 503")
		start := time.Now()
		err := Do(context.Background(), &Simple{Backoff: Constant(0)}, func(ctx context.Context) error {
			if err := inner(ctx); err != nil {
				return plain // the caller's own error, as an application writes it
			}
			return nil
		})
		var e *Error
		if !errors.As(err, &e) || e.Attempts != 3 || calls != 3 || !errors.Is(err, plain) {
			t.Fatalf("err %v after %d inner attempts, want 3 attempts of the outer loop", err, calls)
		}
		if waited := time.Since(start); waited != 4*time.Second {
			t.Fatalf("waited %v, want the hint's 2s before each retry", waited)
		}

		calls = 0
		err = Do(context.Background(), &Simple{Backoff: Constant(0)}, func(ctx context.Context) error {
			_ = inner(ctx)
			return Permanent(plain)
		})
		if !errors.As(err, &e) || e.Attempts != 1 || calls != 1 {
			t.Fatalf("a Permanent error was retried: %v after %d inner attempts", err, calls)
		}

		// Three levels: the middle loop leaves the failure to the outer one.
		calls = 0
		err = Do(context.Background(), &Simple{Backoff: Constant(0)}, func(ctx context.Context) error {
			return Do(ctx, &Simple{Backoff: Constant(0)}, inner, leaveToCaller)
		})
		if !errors.As(err, &e) || e.Attempts != 3 || calls != 3 {
			t.Fatalf("three levels: %v after %d innermost attempts, want 3", err, calls)
		}

		// Without the outer mark the inner loop retries alone.
		calls = 0
		_ = Do(context.Background(), &Simple{Backoff: Constant(0)}, inner, Unmarked())
		if calls != 3 {
			t.Fatalf("unmarked: %d inner attempts, want 3", calls)
		}
	})
}
