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
	// An ended mark hides the marks around it: work on its context is over
	// for whoever marked the outer one too.
	outer, endOuter := WithCallerRetries(context.Background())
	defer endOuter()
	inner, endInner := WithCallerRetries(outer)
	endInner()
	if CallerRetries(inner) || !CallerRetries(outer) {
		t.Fatal("an inner mark that ended does not hide the outer one, or ended it")
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
	_ = Do(ctx, &Simple{}, func(ctx context.Context) error {
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
		"No":             Do(ctx, &No{}, marked),
		"no first token": Do(ctx, &outsider{acquire: errNoFirstToken}, marked),
		"Unmarked":       Do(ctx, &Simple{}, marked, Unmarked()),
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

// client stands for a retrying client inside an operation (the Transport,
// say): it retries alone, 3 attempts, unless its caller retries, in which
// case it leaves the failure to the caller after one.
func client(ctx context.Context, calls *int) error {
	return Do(ctx, &Simple{Backoff: Constant(0)}, func(context.Context) error {
		*calls++
		return errTransient
	}, Unmarked(), BeforeRetry(func(ctx context.Context, _ int, _ error) error {
		if CallerRetries(ctx) {
			return ErrOuterLoop
		}
		return nil
	}))
}

// refusing is a strategy whose initial token is refused: one attempt.
type refusing struct{ Strategy }

func (refusing) AcquireInitialToken(string) (Token, error) { return Token{}, ErrMaxAttempts }

// A loop that cannot retry does not mark its attempt, so the client inside it
// retries alone: otherwise nothing would retry the failure.
func TestSingleAttemptLoopsDoNotMark(t *testing.T) {
	for name, s := range map[string]Strategy{
		"Simple, 1 attempt":         &Simple{MaxAttempts: 1},
		"Simple, negative attempts": &Simple{MaxAttempts: -1},
		"Standard, -1":              NewStandard(StandardOptions{MaxAttempts: -1}),
		"Adaptive, 1":               NewAdaptive(AdaptiveOptions{StandardOptions: StandardOptions{MaxAttempts: 1}}),
		"refused initial token":     refusing{&Simple{}},
	} {
		calls := 0
		_ = Do(context.Background(), s, func(ctx context.Context) error { return client(ctx, &calls) })
		if calls != 3 {
			t.Errorf("%s: the client inside made %d calls, want 3", name, calls)
		}
	}
}

// Work an attempt leaves running is not marked during later attempts, and
// what it leaves reaches no loop: the later attempt's own error, which says
// nothing about retrying, is not retried.
func TestWorkLeftRunningIsNotMarked(t *testing.T) {
	unrelated := errors.New("400 bad request")
	start, finished := make(chan struct{}), make(chan struct{})
	var bgMarked bool
	bgCalls, attempts := 0, 0
	err := Do(context.Background(), &Simple{Backoff: Constant(0)}, func(ctx context.Context) error {
		attempts++
		if attempts == 1 {
			bg := context.WithoutCancel(ctx)
			go func() {
				<-start
				bgMarked = CallerRetries(bg)
				_ = client(bg, &bgCalls)
				close(finished)
			}()
			return errTransient
		}
		close(start)
		<-finished
		return unrelated
	})
	var e *Error
	if bgMarked || bgCalls != 3 {
		t.Errorf("work left running: marked %v, its client made %d calls; want false and 3", bgMarked, bgCalls)
	}
	if !errors.As(err, &e) || attempts != 2 || e.Err != unrelated {
		t.Errorf("err %v after %d attempts; want the second attempt's own error, not retried", err, attempts)
	}
}

// Three loops deep, work the middle loop's attempt leaves running does not
// leave its failure to the outer loop once that attempt has ended.
func TestLateFailureDoesNotReachTheOuterLoop(t *testing.T) {
	outer, middle, bgCalls := 0, 0, 0
	err := Do(context.Background(), &Simple{Backoff: Constant(0)}, func(ctx context.Context) error {
		outer++
		start, done := make(chan struct{}), make(chan struct{})
		err := Do(ctx, &Simple{Backoff: Constant(0)}, func(ctx context.Context) error {
			middle++
			if middle == 1 {
				bg := context.WithoutCancel(ctx)
				go func() {
					<-start
					_ = client(bg, &bgCalls)
					close(done)
				}()
			}
			return errTransient
		})
		if middle <= 3 {
			close(start)
			<-done
		}
		if err != nil {
			return errors.New("lookup failed") // says nothing about retrying
		}
		return nil
	})
	if outer != 1 || middle != 3 || bgCalls != 3 || err == nil {
		t.Fatalf("outer %d, middle %d attempts, background calls %d, err %v; want 1, 3, 3", outer, middle, bgCalls, err)
	}
}

// A failure left to a loop is what the loop reports: the hooks, the Trace
// and the *Error get the operation's error (its text; errors.Is reaches it)
// classified as the failure that was left, so what they say agrees with the
// decision the loop took.
func TestLeftFailureIsWhatTheLoopReports(t *testing.T) {
	plain := errors.New("the service answered 503")
	var hooked, traced []Info
	calls := 0
	err := Do(context.Background(), &Simple{Backoff: Constant(0)}, func(ctx context.Context) error {
		_ = client(ctx, &calls)
		return plain
	}, OnAttemptFailed(func(_ context.Context, _ int, err error) {
		if !errors.Is(err, plain) || err.Error() != plain.Error() {
			t.Errorf("a hook got %v, want the operation's error", err)
		}
		hooked = append(hooked, Classify(err))
	}), WithTrace(&Trace{Retry: func(_ context.Context, _ string, _ int, _ time.Duration, err error) {
		traced = append(traced, Classify(err))
	}}))
	var e *Error
	if !errors.As(err, &e) || e.Attempts != 3 || !errors.Is(err, plain) || calls != 3 {
		t.Fatalf("err %v, %d inner calls", err, calls)
	}
	if len(hooked) != 3 || len(traced) != 2 {
		t.Fatalf("hooks told %d times, the Trace %d, want 3 and 2", len(hooked), len(traced))
	}
	for _, info := range append(hooked, traced...) {
		if !info.Retryable() {
			t.Fatalf("a hook saw %+v, want the retryable failure that was left", info)
		}
	}
}

// Three loops deep, where the middle one follows the rule too: the failure
// left to the middle loop goes on to the outer one when the middle loop
// leaves it in turn, so the outer loop retries it (3 requests at the bottom,
// 3 attempts at the top), though both operations return errors of their own.
func TestLeftFailureGoesUpThroughAMiddleLoop(t *testing.T) {
	leaveToCaller := BeforeRetry(func(ctx context.Context, _ int, _ error) error {
		if CallerRetries(ctx) {
			return ErrOuterLoop
		}
		return nil
	})
	outer, bottom := 0, 0
	err := Do(context.Background(), &Simple{Backoff: Constant(0)}, func(ctx context.Context) error {
		outer++
		return Do(ctx, &Simple{Backoff: Constant(0)}, func(ctx context.Context) error {
			if client(ctx, &bottom) != nil {
				return errors.New("status 503")
			}
			return nil
		}, leaveToCaller)
	})
	if outer != 3 || bottom != 3 || err == nil {
		t.Fatalf("outer attempts %d, bottom requests %d, err %v; want 3 and 3", outer, bottom, err)
	}
}

// An attempt that panics ends its mark all the same: a context it kept is
// not marked once the panic has left the loop.
func TestPanickingAttemptEndsItsMark(t *testing.T) {
	runs := map[string]func(func(context.Context) error){
		"Do, Simple":   func(op func(context.Context) error) { _ = Do(context.Background(), &Simple{}, op) },
		"Do, Standard": func(op func(context.Context) error) { _ = Do(context.Background(), NewStandard(StandardOptions{}), op) },
		"DoValue": func(op func(context.Context) error) {
			_, _ = DoValue(context.Background(), &Simple{}, func(ctx context.Context) (int, error) { return 0, op(ctx) })
		},
		"the loop": func(op func(context.Context) error) {
			_ = Do(context.Background(), &Simple{}, op, Scope("svc"))
		},
	}
	for name, run := range runs {
		var kept context.Context
		func() {
			defer func() { _ = recover() }()
			run(func(ctx context.Context) error {
				kept = ctx
				panic("boom")
			})
		}()
		if kept == nil || CallerRetries(kept) {
			t.Errorf("%s: a context kept by a panicking attempt is still marked", name)
		}
	}
}

// An attempt that AttemptTimeout cut short, after an inner loop left it a
// failure with a hint, is retried after the hint.
func TestAttemptTimeoutKeepsTheLeftFailuresHint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		var waits []time.Duration
		_ = Do(context.Background(), &Simple{MaxAttempts: 2, Backoff: Constant(time.Millisecond)}, func(ctx context.Context) error {
			_ = Do(ctx, &Simple{Backoff: Constant(0)}, func(context.Context) error {
				calls++
				return RetryAfter(Transient(errors.New("503")), 300*time.Millisecond)
			}, Unmarked(), BeforeRetry(func(ctx context.Context, _ int, _ error) error {
				if CallerRetries(ctx) {
					return ErrOuterLoop
				}
				return nil
			}))
			<-ctx.Done() // the attempt runs out of time
			return errors.New("gave up waiting")
		}, AttemptTimeout(time.Second), OnRetry(func(_ context.Context, _ int, d time.Duration, _ error) {
			waits = append(waits, d)
		}))
		if calls != 2 || len(waits) != 1 || waits[0] != 300*time.Millisecond {
			t.Fatalf("%d inner calls, waits %v; want 2 and the hint's 300ms", calls, waits)
		}
	})
}

// A failure left to the caller crosses a loop that cannot retry: the
// application retries (3 attempts) a library whose loop uses No, which
// calls a client that retries; the client sees the application's mark and
// leaves the failure to it, the middle loop passes it on, and the
// application retries it: 2 attempts, success.
func TestLeftFailureCrossesALoopThatCannotRetry(t *testing.T) {
	leaveToCaller := BeforeRetry(func(ctx context.Context, _ int, _ error) error {
		if CallerRetries(ctx) {
			return ErrOuterLoop
		}
		return nil
	})
	for name, middle := range map[string]Strategy{"No": &No{}, "one attempt": &Simple{MaxAttempts: 1}, "no first token": &outsider{acquire: errNoFirstToken}} {
		t.Run(name, func(t *testing.T) {
			outer, bottom := 0, 0
			err := Do(context.Background(), &Simple{Backoff: Constant(0)}, func(ctx context.Context) error {
				outer++
				return Do(ctx, middle, func(ctx context.Context) error {
					return Do(ctx, &Simple{Backoff: Constant(0)}, func(context.Context) error {
						bottom++
						if bottom == 1 {
							return errTransient
						}
						return nil
					}, leaveToCaller)
				})
			})
			if err != nil || outer != 2 || bottom != 2 {
				t.Fatalf("err %v, outer attempts %d, client requests %d; want success after 2 and 2", err, outer, bottom)
			}
		})
	}
	// Without a caller that retries, the middle loop's refusal stands.
	err := Do(context.Background(), &No{}, func(ctx context.Context) error {
		return Do(ctx, &Simple{Backoff: Constant(0)}, func(context.Context) error { return errTransient }, leaveToCaller)
	})
	if errors.Is(err, ErrOuterLoop) {
		t.Fatalf("a loop with no caller that retries left its failure to no one: %v", err)
	}
}

// Marks allocated together (see marker) are still one per attempt: while
// attempt n+1 runs, the context attempt n handed to work it left running is
// no longer marked, and what that work leaves reaches no attempt, whichever
// attempts share an allocation.
func TestAttemptsSharingAnAllocationHaveTheirOwnMarks(t *testing.T) {
	for stop := 2; stop <= 6; stop++ {
		var prev context.Context
		attempts := 0
		unrelated := errors.New("lookup failed") // says nothing about retrying
		err := Do(context.Background(), &Simple{Backoff: Constant(0), MaxAttempts: 6}, func(ctx context.Context) error {
			attempts++
			if !CallerRetries(ctx) {
				t.Errorf("attempt %d: not marked", attempts)
			}
			if prev != nil {
				if CallerRetries(prev) {
					t.Errorf("attempt %d: attempt %d's context is still marked", attempts, attempts-1)
				}
				leave(prev, Info{Safety: Safe}) // too late: must reach no one
			}
			prev = ctx
			if attempts == stop {
				return unrelated
			}
			return errTransient
		})
		var e *Error
		if !errors.As(err, &e) || e.Attempts != stop || e.Err != unrelated {
			t.Errorf("stopping at %d: err %v after %d attempts; want attempt %d's own error, not retried", stop, err, attempts, stop)
		}
	}
}

// What an inner loop left to one attempt is that attempt's alone: the next
// attempt, whose operation fails with an error that says nothing about
// retrying and left nothing, is judged by that error, whether it shares the
// earlier attempt's allocation (see marker) or not.
func TestLeftFailureIsTheAttemptsOwn(t *testing.T) {
	for left := 1; left <= 5; left++ {
		attempts := 0
		plain := errors.New("the service answered 503")
		err := Do(context.Background(), &Simple{Backoff: Constant(0), MaxAttempts: 6}, func(ctx context.Context) error {
			attempts++
			switch {
			case attempts < left:
				return errTransient
			case attempts == left:
				leave(ctx, Info{Safety: Safe, Fault: FaultServer})
			}
			return plain
		})
		var e *Error
		if !errors.As(err, &e) || e.Attempts != left+1 || e.Err != plain {
			t.Errorf("left to attempt %d: err %v after %d attempts; want attempt %d's own error, not retried", left, err, attempts, left+1)
		}
	}
}

// A failure left to an attempt by work an earlier attempt left running, that
// found its mark live just before the mark ended, lands after the attempt's
// own: it must not replace it.
func TestLateLeaveKeepsTheLaterAttemptsFailure(t *testing.T) {
	b := &markBlock{Context: context.Background()}
	b.end(1)
	b.tell(2, func(l *leftFailure) { l.info, l.left = Info{Safety: Safe, Fault: FaultServer}, true })
	b.ended.Store(0) // attempt 1's work saw its mark live, then stores
	b.tell(1, func(l *leftFailure) { l.info, l.left = Info{Safety: Unsafe}, true })
	b.ended.Store(1)
	if got := b.leftTo(2).failure(); got == nil || got.Safety != Safe {
		t.Fatalf("attempt 2's left failure %+v, want its own, not attempt 1's late one", got)
	}
	if b.leftTo(1) != nil {
		t.Fatal("attempt 1's late failure reached it after its mark ended")
	}
}
