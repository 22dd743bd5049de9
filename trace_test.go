package retry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// hookLog records the hooks a Trace was told, in order.
type hookLog struct {
	mu    sync.Mutex
	calls []string
	errs  []error // the error of each AttemptDone and Done, in order
}

func (l *hookLog) add(s string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, s)
	if err != nil {
		l.errs = append(l.errs, err)
	}
}

func (l *hookLog) trace() *Trace {
	return &Trace{
		AttemptStart: func(ctx context.Context, _ string, n int) context.Context {
			l.add("start "+itoa(n), nil)
			return ctx
		},
		AttemptDone: func(_ context.Context, _ string, n int, err error) {
			l.add("attempt done "+itoa(n), err)
		},
		Retry: func(context.Context, string, int, time.Duration, error) { l.add("retry", nil) },
		GiveUp: func(context.Context, string, *Error) {
			l.add("give up", nil)
		},
		Done: func(_ context.Context, _ string, attempts int, _ time.Duration, err error) {
			l.add("done "+itoa(attempts), err)
		},
	}
}

func itoa(n int) string { return string(rune('0' + n)) }

// TestTracePanicEndsTheAttempt: an attempt that panics ends for the Trace
// (AttemptDone, then Done, each with a *PanicError that holds the value and
// the stack where the panic began), and the panic goes on with the same
// value. Before the fix neither hook was called.
func TestTracePanicEndsTheAttempt(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"marked", nil},
		{"unmarked", []Option{Unmarked()}},
		{"attempt timeout", []Option{AttemptTimeout(time.Hour)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &hookLog{}
			n := 0
			var recovered any
			func() {
				defer func() { recovered = recover() }()
				_ = Do(context.Background(), &Simple{Backoff: Constant(0)}, func(context.Context) error {
					if n++; n == 1 {
						return errTransient
					}
					panicsHere(boom)
					return nil
				}, append(tc.opts, WithTrace(log.trace()))...)
			}()
			if recovered != boom {
				t.Fatalf("recovered %v, want the operation's own value %v", recovered, boom)
			}
			want := []string{"start 1", "attempt done 1", "retry", "start 2", "attempt done 2", "done 2"}
			if strings.Join(log.calls, ", ") != strings.Join(want, ", ") {
				t.Fatalf("hooks %q, want %q", log.calls, want)
			}
			// errs: attempt 1's failure, then attempt 2's panic twice.
			if len(log.errs) != 3 || log.errs[1] != log.errs[2] {
				t.Fatalf("hook errors %v, want attempt 1's failure and one *PanicError twice", log.errs)
			}
			var pe *PanicError
			if !errors.As(log.errs[1], &pe) || pe.Value != boom {
				t.Fatalf("AttemptDone told %#v, want a *PanicError with the value", log.errs[1])
			}
			if !errors.Is(pe, boom) {
				t.Error("errors.Is does not reach the panic's error value")
			}
			if !strings.Contains(string(pe.Stack), "panicsHere") {
				t.Errorf("the stack does not hold the frame where the panic began:\n%s", pe.Stack)
			}
		})
	}
}

//go:noinline
func panicsHere(v any) { panic(v) }

// TestTracePanicNilValue: panic(nil) is a panic too (it recovers as a
// *runtime.PanicNilError), told to the hooks and passed on as such.
func TestTracePanicNilValue(t *testing.T) {
	log := &hookLog{}
	var recovered any
	func() {
		defer func() { recovered = recover() }()
		_ = Do(context.Background(), &Simple{}, func(context.Context) error { panic(nil) }, WithTrace(log.trace()))
	}()
	var pn *runtime.PanicNilError
	if err, ok := recovered.(error); !ok || !errors.As(err, &pn) {
		t.Fatalf("recovered %#v, want a *runtime.PanicNilError", recovered)
	}
	if len(log.errs) != 2 {
		t.Fatalf("hooks %q errors %v", log.calls, log.errs)
	}
	if pe, ok := log.errs[0].(*PanicError); !ok || pe.Value != recovered {
		t.Errorf("AttemptDone told %#v, want a *PanicError with the recovered value", log.errs[0])
	}
}

// TestTraceGoexitEndsTheAttempt: an attempt whose goroutine exits through
// runtime.Goexit ends for the hooks too, with an error that is no
// *PanicError, and the goroutine goes on exiting.
func TestTraceGoexitEndsTheAttempt(t *testing.T) {
	log := &hookLog{}
	returned := false
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = Do(context.Background(), &Simple{}, func(context.Context) error {
			runtime.Goexit()
			return nil
		}, WithTrace(log.trace()))
		returned = true
	}()
	<-done
	if returned {
		t.Fatal("Do returned after its attempt's goroutine called Goexit")
	}
	want := "start 1, attempt done 1, done 1"
	if got := strings.Join(log.calls, ", "); got != want {
		t.Fatalf("hooks %q, want %q", got, want)
	}
	var pe *PanicError
	if len(log.errs) != 2 || log.errs[0] == nil || errors.As(log.errs[0], &pe) {
		t.Errorf("hook errors %v, want a Goexit error that is no *PanicError", log.errs)
	}
}

// TestTraceHookPanicIsNotTheAttempts: a hook that panics is not an attempt
// that panics: AttemptDone is not told twice, and Done is not told at all.
func TestTraceHookPanicIsNotTheAttempts(t *testing.T) {
	calls := 0
	tr := &Trace{
		AttemptDone: func(context.Context, string, int, error) {
			calls++
			panic("hook")
		},
		Done: func(context.Context, string, int, time.Duration, error) { calls += 10 },
	}
	var recovered any
	func() {
		defer func() { recovered = recover() }()
		_ = Do(context.Background(), &Simple{}, succeed, WithTrace(tr))
	}()
	if recovered != "hook" || calls != 1 {
		t.Fatalf("recovered %v after %d hook calls (Done counts 10), want the hook's panic after one", recovered, calls)
	}
}

// TestUntracedPanicPassesThrough: without a Trace, a panic goes through the
// loop untouched.
func TestUntracedPanicPassesThrough(t *testing.T) {
	var recovered any
	func() {
		defer func() { recovered = recover() }()
		_ = Do(context.Background(), &Simple{}, func(context.Context) error { panic("op") }, Scope("x"))
	}()
	if recovered != "op" {
		t.Fatalf("recovered %v, want op", recovered)
	}
}

// A Trace's Done hears every call end once: the attempts, the time waited
// between them (in virtual time) and the call's error.
func TestTraceDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []string
		trace := WithTrace(&Trace{Done: func(_ context.Context, scope string, n int, waited time.Duration, err error) {
			got = append(got, fmt.Sprintf("%s %d %v %v", scope, n, waited, err != nil))
		}})
		s := &Simple{Backoff: Linear{Base: time.Second}}
		_ = Do(context.Background(), s, failing(2, errTransient).op, trace, Scope("a"))
		_ = Do(context.Background(), s, failing(5, errTransient).op, trace)
		_ = Do(context.Background(), s, failing(0, errTransient).op, trace)
		want := "a 3 3s false| 3 3s true| 1 0s false"
		if strings.Join(got, "|") != want {
			t.Fatalf("Done heard %q, want %q", strings.Join(got, "|"), want)
		}
	})
}

type callKey struct{}

// A Trace's CallStart gives the whole call a context of its own: every
// attempt and every later hook sees it, and two traces nest.
func TestTraceCallStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen []string
		start := func(name string) Option {
			return WithTrace(&Trace{CallStart: func(ctx context.Context, scope string) context.Context {
				prev, _ := ctx.Value(callKey{}).(string)
				return context.WithValue(ctx, callKey{}, prev+name+scope)
			}})
		}
		look := func(where string, ctx context.Context) {
			seen = append(seen, fmt.Sprint(where, " ", ctx.Value(callKey{})))
		}
		opts := []Option{Scope("s"), start("a"), start("b"),
			WithTrace(&Trace{
				Retry: func(ctx context.Context, _ string, _ int, _ time.Duration, _ error) { look("retry", ctx) },
				Done:  func(ctx context.Context, _ string, _ int, _ time.Duration, _ error) { look("done", ctx) },
			})}
		n := 0
		_ = Do(context.Background(), &Simple{Backoff: Constant(time.Second)}, func(ctx context.Context) error {
			look("op", ctx)
			if n++; n == 1 {
				return errTransient
			}
			return nil
		}, opts...)
		if got, want := strings.Join(seen, "|"), "op asbs|retry asbs|op asbs|done asbs"; got != want {
			t.Fatalf("seen %q, want %q", got, want)
		}
	})
}

// Each attempt runs in the context its Trace's AttemptStart gave it, marked
// for that attempt alone, whichever attempts share an allocation of marks.
func TestEachAttemptHasItsTraceContext(t *testing.T) {
	type key struct{}
	trace := WithTrace(&Trace{AttemptStart: func(ctx context.Context, _ string, n int) context.Context {
		return context.WithValue(ctx, key{}, n)
	}})
	var earlier []context.Context
	n := 0
	err := Do(context.Background(), &Simple{Backoff: Constant(0), MaxAttempts: 6}, func(ctx context.Context) error {
		n++
		if got := ctx.Value(key{}); got != n || !CallerRetries(ctx) {
			t.Errorf("attempt %d: its Trace's value %v, marked %v; want %d, marked", n, got, CallerRetries(ctx), n)
		}
		for i, e := range earlier {
			if CallerRetries(e) {
				t.Errorf("attempt %d: attempt %d's context is still marked", n, i+1)
			}
		}
		earlier = append(earlier, ctx)
		if n < 6 {
			return errTransient
		}
		return nil
	}, trace)
	if err != nil || n != 6 {
		t.Fatalf("%v after %d attempts, want success on the sixth", err, n)
	}
}

// TestNilOperationTraceStartsTheCall: a Trace's CallStart is "called once
// when the call begins", and Done "once when the call ends": a call given a
// nil operation ends for the Trace (GiveUp, Done) without having begun.
func TestNilOperationTraceStartsTheCall(t *testing.T) {
	type key struct{}
	var started, done int
	var doneSawStart bool
	tr := &Trace{
		CallStart: func(ctx context.Context, _ string) context.Context {
			started++
			return context.WithValue(ctx, key{}, true)
		},
		Done: func(ctx context.Context, _ string, _ int, _ time.Duration, _ error) {
			done++
			doneSawStart = ctx.Value(key{}) != nil
		},
	}
	err := Do(context.Background(), &No{}, nil, WithTrace(tr))
	if !errors.Is(err, ErrNilOperation) {
		t.Fatal(err)
	}
	if started != 1 || done != 1 || !doneSawStart {
		t.Fatalf("CallStart %d, Done %d (with CallStart's context: %v); want 1, 1, true", started, done, doneSawStart)
	}
}

// eventLog records hooks by name, in order, and is the writer of a Log
// option's logger: each record it is given is an event too.
type eventLog []string

func (l *eventLog) add(s string) { *l = append(*l, s) }

func (l *eventLog) Write(p []byte) (int, error) {
	_, msg, _ := strings.Cut(string(p), `msg="`)
	msg, _, _ = strings.Cut(msg, `"`)
	l.add("log " + msg)
	return len(p), nil
}

// hooksOf returns options of every hook kind, each telling l, two Traces
// among them.
func hooksOf(l *eventLog) []Option {
	named := func(name string) *Trace {
		return &Trace{
			CallStart: func(ctx context.Context, scope string) context.Context {
				l.add(name + " call start " + scope)
				return ctx
			},
			AttemptStart: func(ctx context.Context, _ string, n int) context.Context {
				l.add(name + " attempt start " + itoa(n))
				return ctx
			},
			AttemptDone: func(_ context.Context, _ string, n int, err error) {
				l.add(fmt.Sprintf("%s attempt done %d %v", name, n, err != nil))
			},
			Retry: func(_ context.Context, _ string, n int, d time.Duration, _ error) {
				l.add(fmt.Sprintf("%s retry %d %v", name, n, d))
			},
			GiveUp: func(_ context.Context, _ string, e *Error) { l.add(name + " give up " + itoa(e.Attempts)) },
			Done: func(_ context.Context, _ string, n int, waited time.Duration, err error) {
				l.add(fmt.Sprintf("%s done %d %v %v", name, n, waited, err != nil))
			},
		}
	}
	return []Option{
		OnRetry(func(_ context.Context, n int, d time.Duration, _ error) { l.add(fmt.Sprintf("OnRetry %d %v", n, d)) }),
		WithTrace(named("a")),
		OnAttemptFailed(func(_ context.Context, n int, _ error) { l.add("OnAttemptFailed " + itoa(n)) }),
		Log(slog.New(slog.NewTextHandler(l, nil))),
		OnGiveUp(func(_ context.Context, e *Error) { l.add("OnGiveUp " + itoa(e.Attempts)) }),
		WithTrace(named("b")),
		Scope("s"),
	}
}

// TestTraceOfCallsWhatDoCalls: the Trace TraceOf folds from a call's
// options, its hooks called at the moments Do calls hooks, tells every
// option what Do tells it, in Do's order: a call that gives up after two
// attempts, and one whose second attempt succeeds.
func TestTraceOfCallsWhatDoCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, failures := range []int{5, 1} {
			var viaDo, viaTrace eventLog
			s := &Simple{MaxAttempts: 2, Backoff: Constant(time.Second)}
			_ = Do(context.Background(), s, failing(failures, errTransient).op, hooksOf(&viaDo)...)

			// The moments of Do's loop, as an integration whose attempts
			// another loop makes tells them.
			tr := TraceOf(hooksOf(&viaTrace)...)
			ctx := tr.CallStart(context.Background(), "s")
			var waited time.Duration
			for n := 1; ; n++ {
				actx := tr.AttemptStart(ctx, "s", n)
				if n > failures {
					tr.AttemptDone(actx, "s", n, nil)
					tr.Done(ctx, "s", n, waited, nil)
					break
				}
				tr.AttemptDone(actx, "s", n, errTransient)
				if n == 2 {
					e := &Error{Attempts: n, Err: errTransient, Reason: ErrMaxAttempts}
					tr.GiveUp(ctx, "s", e)
					tr.Done(ctx, "s", n, waited, e)
					break
				}
				tr.Retry(ctx, "s", n, time.Second, errTransient)
				waited += time.Second
			}
			if got, want := strings.Join(viaTrace, "\n"), strings.Join(viaDo, "\n"); got != want {
				t.Errorf("%d failures: TraceOf's hooks told\n%s\n\nDo told\n%s", failures, got, want)
			}
		}
	})
}

// TraceOf is nil without hooks, and calls OnAttemptFailed for no attempt
// that did not return, as Do does; BeforeRetryOf asks each check in order,
// the first refusal ending it, and is nil without one.
func TestTraceOfAndBeforeRetryOf(t *testing.T) {
	if tr := TraceOf(Scope("s"), AttemptTimeout(time.Second), WithBreaker(NewBreaker(BreakerOptions{}))); tr != nil {
		t.Errorf("TraceOf without hooks = %+v, want nil", tr)
	}
	if BeforeRetryOf(OnRetry(func(context.Context, int, time.Duration, error) {})) != nil {
		t.Error("BeforeRetryOf without BeforeRetry is not nil")
	}
	failed := 0
	tr := TraceOf(OnAttemptFailed(func(context.Context, int, error) { failed++ }))
	tr.AttemptDone(context.Background(), "", 1, &PanicError{Value: "boom"})
	tr.AttemptDone(context.Background(), "", 1, errGoexit)
	tr.AttemptDone(context.Background(), "", 1, nil)
	tr.AttemptDone(context.Background(), "", 1, errBoom)
	if failed != 1 {
		t.Errorf("OnAttemptFailed told %d times, want once (the failure that returned)", failed)
	}
	errVeto := errors.New("veto")
	var asked []string
	vet := BeforeRetryOf(
		BeforeRetry(func(context.Context, int, error) error { asked = append(asked, "first"); return nil }),
		BeforeRetry(func(context.Context, int, error) error { asked = append(asked, "second"); return errVeto }),
		BeforeRetry(func(context.Context, int, error) error { asked = append(asked, "third"); return nil }),
	)
	if err := vet(context.Background(), 1, errBoom); err != errVeto || strings.Join(asked, " ") != "first second" {
		t.Errorf("BeforeRetryOf = %v after asking %v, want the veto after first and second", err, asked)
	}
}
