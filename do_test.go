package retry

import (
	"context"
	"errors"
	"go/parser"
	"go/token"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// counter is an operation that fails with errs in turn, then succeeds, and
// records when each attempt started.
type counter struct {
	errs   []error
	starts []time.Time
}

func (c *counter) op(ctx context.Context) error {
	c.starts = append(c.starts, time.Now())
	if n := len(c.starts); n <= len(c.errs) {
		return c.errs[n-1]
	}
	return nil
}

func (c *counter) calls() int { return len(c.starts) }

func failing(n int, err error) *counter {
	c := &counter{}
	for range n {
		c.errs = append(c.errs, err)
	}
	return c
}

func TestDoSucceedsFirstTime(t *testing.T) {
	b := NewTokenBucket(500)
	b.Take(10)
	s := NewStandard(StandardOptions{Bucket: b})
	c := failing(0, nil)
	if err := Do(context.Background(), s, c.op); err != nil {
		t.Fatal(err)
	}
	if c.calls() != 1 {
		t.Fatalf("%d calls, want 1", c.calls())
	}
	if b.Available() != 491 {
		t.Fatalf("bucket = %d, want 491: the success was not recorded", b.Available())
	}
}

func TestDoRetriesWithDelays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		c := failing(2, errTransient)
		s := &Simple{Backoff: Exponential{Base: time.Second}}
		if err := Do(context.Background(), s, c.op); err != nil {
			t.Fatal(err)
		}
		want := []time.Duration{0, time.Second, 3 * time.Second}
		if c.calls() != len(want) {
			t.Fatalf("%d calls, want %d", c.calls(), len(want))
		}
		for i, w := range want {
			if got := c.starts[i].Sub(start); got != w {
				t.Errorf("attempt %d started at %v, want %v", i+1, got, w)
			}
		}
	})
}

func TestDoGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := failing(10, errTransient)
		err := Do(context.Background(), &Simple{Backoff: Constant(time.Second)}, c.op)
		if c.calls() != 3 {
			t.Fatalf("%d calls, want 3", c.calls())
		}
		var re *Error
		if !errors.As(err, &re) {
			t.Fatalf("err = %T %v, want *Error", err, err)
		}
		if re.Attempts != 3 || !errors.Is(err, errBoom) || !errors.Is(err, ErrMaxAttempts) {
			t.Fatalf("err = %+v", re)
		}
		if msg := err.Error(); msg != "retry: gave up after 3 attempts (attempts exhausted): boom" {
			t.Fatalf("message = %q", msg)
		}
		// The loop's error is not retryable by an outer loop.
		if Classify(err).Retryable() {
			t.Fatal("a loop's error classifies as retryable: nested loops would multiply attempts")
		}
	})
}

func TestDoNotRetryable(t *testing.T) {
	for _, opErr := range []error{errBoom, Permanent(errTransient)} {
		c := failing(10, opErr)
		err := Do(context.Background(), NewStandard(StandardOptions{}), c.op)
		if c.calls() != 1 || !errors.Is(err, ErrNotRetryable) || !errors.Is(err, errBoom) {
			t.Fatalf("%v: %d calls, err = %v", opErr, c.calls(), err)
		}
	}
}

// delayed is a strategy whose initial token carries a delay, and which can be
// told to refuse the initial token.
type delayed struct {
	Simple
	initial time.Duration
	refuse  error
}

func (d *delayed) AcquireInitialToken(scope string) (Token, error) {
	if d.refuse != nil {
		return Token{}, d.refuse
	}
	tok, _ := d.Simple.AcquireInitialToken(scope)
	tok.st.delay = d.initial
	return tok, nil
}

func TestDoWaitsInitialDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		c := failing(0, nil)
		if err := Do(context.Background(), &delayed{initial: 5 * time.Second}, c.op); err != nil {
			t.Fatal(err)
		}
		if c.calls() != 1 || c.starts[0].Sub(start) != 5*time.Second {
			t.Fatalf("calls %d, first at %v; want 1 at 5s", c.calls(), c.starts[0].Sub(start))
		}
	})
}

func TestDoAcquireFailsMakesOneAttempt(t *testing.T) {
	refusal := errors.New("no tokens for you")
	s := &delayed{refuse: refusal}
	c := failing(0, nil)
	if err := Do(context.Background(), s, c.op); err != nil || c.calls() != 1 {
		t.Fatalf("success: err = %v, calls = %d", err, c.calls())
	}
	c = failing(5, errTransient)
	err := Do(context.Background(), s, c.op)
	var re *Error
	if c.calls() != 1 || !errors.As(err, &re) || re.Attempts != 1 || !errors.Is(err, refusal) || !errors.Is(err, errBoom) {
		t.Fatalf("failure: calls = %d, err = %v", c.calls(), err)
	}
}

// errNoFirstToken is the refusal of a strategy that grants no first token.
var errNoFirstToken = errors.New("no first token")

// TestDoNilStrategyIsRefused: a nil strategy is refused, no attempt made,
// with ErrNilStrategy, whose text says what to pass; the hooks hear of it
// and a ticket's probe place is freed, as for a nil operation.
func TestDoNilStrategyIsRefused(t *testing.T) {
	b := NewBreaker(BreakerOptions{})
	for _, path := range []string{"Do", "Do with options", "DoValue"} {
		calls, gaveUp := 0, 0
		op := func(context.Context) error { calls++; return nil }
		var err error
		switch path {
		case "Do":
			err = Do(context.Background(), nil, op)
		case "Do with options":
			tk, _ := b.Allow("")
			err = Do(context.Background(), nil, op, Scope("svc"), WithBreaker(b), WithTicket(tk),
				OnGiveUp(func(context.Context, *Error) { gaveUp++ }))
			if gaveUp != 1 {
				t.Errorf("%s: OnGiveUp called %d times, want 1", path, gaveUp)
			}
		case "DoValue":
			_, err = DoValue(context.Background(), nil, func(ctx context.Context) (int, error) { return 1, op(ctx) })
		}
		var e *Error
		if calls != 0 || !errors.As(err, &e) || e.Attempts != 0 || e.Reason != ErrNilStrategy || !errors.Is(err, ErrNilStrategy) {
			t.Fatalf("%s: %d calls, %v; want no attempt and ErrNilStrategy", path, calls, err)
		}
		if !strings.Contains(err.Error(), "retry.No") || !strings.Contains(err.Error(), "NewAdaptive") {
			t.Errorf("%s: %q does not say what to pass", path, err)
		}
		if Classify(err).Retryable() {
			t.Errorf("%s: the refusal classifies as retryable", path)
		}
	}
}

func TestDoCancelDuringWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Second, cancel)
		c := failing(10, errTransient)
		err := Do(ctx, &Simple{Backoff: Constant(10 * time.Second)}, c.op)
		if elapsed := time.Since(start); elapsed != time.Second {
			t.Fatalf("returned after %v, want 1s (at the cancellation)", elapsed)
		}
		var re *Error
		if !errors.As(err, &re) || re.Attempts != 1 || !errors.Is(err, context.Canceled) || !errors.Is(err, errBoom) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestDoDoesNotStartWaitPastDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c := failing(10, errTransient)
		var retried bool
		err := Do(ctx, &Simple{Backoff: Constant(10 * time.Second)}, c.op,
			OnRetry(func(context.Context, int, time.Duration, error) { retried = true }))
		if elapsed := time.Since(start); elapsed != 0 {
			t.Fatalf("returned after %v, want at once", elapsed)
		}
		if c.calls() != 1 || !errors.Is(err, ErrDeadline) || !errors.Is(err, errBoom) || retried {
			t.Fatalf("calls = %d, retried = %v, err = %v", c.calls(), retried, err)
		}

		// A wait that fits is made.
		c = failing(1, errTransient)
		if err := Do(ctx, &Simple{Backoff: Constant(3 * time.Second)}, c.op); err != nil || c.calls() != 2 {
			t.Fatalf("calls = %d, err = %v", c.calls(), err)
		}
		// An initial delay past the deadline is not waited either.
		c = failing(0, nil)
		err = Do(ctx, &delayed{initial: time.Hour}, c.op)
		if c.calls() != 0 || !errors.Is(err, ErrDeadline) || time.Since(start) != 3*time.Second {
			t.Fatalf("calls = %d, err = %v, at %v", c.calls(), err, time.Since(start))
		}
	})
}

func TestDoContextDoneBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := failing(0, nil)
	err := Do(ctx, NewStandard(StandardOptions{}), c.op)
	var re *Error
	if c.calls() != 0 || !errors.As(err, &re) || re.Attempts != 0 || !errors.Is(err, context.Canceled) {
		t.Fatalf("calls = %d, err = %v", c.calls(), err)
	}
}

func TestDoCallerCancelDuringAttemptIsNotRetried(t *testing.T) {
	b := NewTokenBucket(500)
	s := NewStandard(StandardOptions{Bucket: b})
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := Do(ctx, s, func(ctx context.Context) error {
		calls++
		cancel()
		return Transient(ctx.Err()) // even an error marked transient
	})
	if calls != 1 || !errors.Is(err, context.Canceled) {
		t.Fatalf("calls = %d, err = %v", calls, err)
	}
	if b.Available() != 500 {
		t.Fatalf("quota charged %d for a retry that never happened", 500-b.Available())
	}
}

func TestDoValue(t *testing.T) {
	n := 0
	v, err := DoValue(context.Background(), &Simple{Backoff: Constant(0)}, func(context.Context) (int, error) {
		n++
		if n < 3 {
			return -n, errTransient
		}
		return 42, nil
	})
	if v != 42 || err != nil || n != 3 {
		t.Fatalf("v = %d, err = %v, calls = %d", v, err, n)
	}
	// On failure, the last attempt's value comes back with the error.
	n = 0
	v, err = DoValue(context.Background(), &Simple{Backoff: Constant(0)}, func(context.Context) (int, error) {
		n++
		return -n, errTransient
	})
	if v != -3 || !errors.Is(err, ErrMaxAttempts) {
		t.Fatalf("v = %d, err = %v", v, err)
	}
}

func TestSleep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := Sleep(context.Background(), 2*time.Second); err != nil || time.Since(start) != 2*time.Second {
			t.Fatalf("err = %v after %v, want nil after 2s", err, time.Since(start))
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start = time.Now()
		if err := Sleep(ctx, 2*time.Second); !errors.Is(err, ErrDeadline) || time.Since(start) != 0 {
			t.Fatalf("past the deadline: err = %v after %v, want ErrDeadline at once", err, time.Since(start))
		}
		cctx, ccancel := context.WithCancel(context.Background())
		time.AfterFunc(300*time.Millisecond, ccancel)
		start = time.Now()
		if err := Sleep(cctx, time.Hour); !errors.Is(err, context.Canceled) || time.Since(start) != 300*time.Millisecond {
			t.Fatalf("cancelled: err = %v after %v", err, time.Since(start))
		}
		if err := Sleep(cctx, 0); !errors.Is(err, context.Canceled) {
			t.Fatalf("zero wait on a cancelled context: %v", err)
		}
		if err := Sleep(context.Background(), -time.Second); err != nil {
			t.Fatalf("negative wait: %v", err)
		}
	})
}

// TestDoDoesNotChargeForRetriesItDoesNotMake: a retry granted but given up,
// because its wait would pass the deadline or the caller cancelled during
// it, returns its cost to the quota. Otherwise short deadlines alone would
// drain the quota without one retry reaching the service.
func TestDoDoesNotChargeForRetriesItDoesNotMake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, s := range []Strategy{
			NewStandard(StandardOptions{Backoff: Constant(time.Second)}),
			&struct{ *Standard }{NewStandard(StandardOptions{Backoff: Constant(time.Second)})}, // through tokens and Releaser
		} {
			available := func() int {
				if w, ok := s.(*struct{ *Standard }); ok {
					return w.Available("")
				}
				return s.(*Standard).Available("")
			}
			for range 100 {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
				err := Do(ctx, s, failing(5, errTransient).op)
				cancel()
				if !errors.Is(err, ErrDeadline) {
					t.Fatalf("%T: err = %v, want ErrDeadline", s, err)
				}
			}
			if got := available(); got != 500 {
				t.Fatalf("%T: quota = %d after 100 retries that were never made, want 500", s, got)
			}
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(100*time.Millisecond, cancel)
			if err := Do(ctx, s, failing(5, errTransient).op); !errors.Is(err, context.Canceled) {
				t.Fatalf("%T: err = %v", s, err)
			}
			if got := available(); got != 500 {
				t.Fatalf("%T: quota = %d after a retry cancelled during its wait, want 500", s, got)
			}
		}
	})
}

// outsider is a strategy of the caller's own, unknown to the loop's fast
// paths: its initial token can be refused, and its tokens are built with
// NewToken from whatever retry count it is given.
type outsider struct {
	acquire error
	retries int
}

func (o *outsider) AcquireInitialToken(string) (Token, error) {
	return NewToken(o.retries, 0, nil), o.acquire
}

func (o *outsider) RefreshToken(t Token, err error) (Token, error) {
	if !Classify(err).Retryable() {
		return Token{}, ErrNotRetryable
	}
	if t.RetryCount() >= 2 {
		return Token{}, ErrMaxAttempts
	}
	return NewToken(t.RetryCount()+1, 0, nil), nil
}

func (o *outsider) RecordSuccess(Token) error { return nil }

// Whatever the strategy, a give-up is an *Error with the attempts really made
// and the reason: a refused initial token, a negative retry count (which
// NewToken clamps, so it can not shorten or lengthen the loop), a nil op.
func TestDoGiveUpIsAlwaysError(t *testing.T) {
	refused := errors.New("no token")
	cases := []struct {
		name     string
		s        Strategy
		op       bool // false: a nil op; true: one that always fails, retryably
		attempts int
		reason   error
	}{
		{"acquire fails", &outsider{acquire: refused}, true, 1, refused},
		{"negative retry count", &outsider{retries: -7}, true, 3, ErrMaxAttempts},
		{"nil op", NewStandard(StandardOptions{}), false, 0, ErrNilOperation},
		{"nil op, nil strategy", nil, false, 0, ErrNilOperation},
		{"nil op, outsider", &outsider{}, false, 0, ErrNilOperation},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			check := func(what string, err error) {
				t.Helper()
				var re *Error
				if !errors.As(err, &re) || re.Attempts != tc.attempts || !errors.Is(err, tc.reason) {
					t.Fatalf("%s: err = %v (%#v); want an *Error after %d attempts, reason %v", what, err, re, tc.attempts, tc.reason)
				}
			}
			var (
				op  func(context.Context) error
				vop func(context.Context) (int, error)
			)
			if tc.op {
				op = func(context.Context) error { return errTransient }
				vop = func(context.Context) (int, error) { return 0, errTransient }
			}
			check("Do", Do(context.Background(), tc.s, op))
			check("Do with an option", Do(context.Background(), tc.s, op, Scope("x")))
			_, err := DoValue(context.Background(), tc.s, vop)
			check("DoValue", err)
		})
	}
}

// An attempt cut short by AttemptTimeout keeps the cautious answer of a walk
// cut short: a Permanent mark too deep to see is still never retried.
func TestDoAttemptTimeoutDeepPermanent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		deep := Permanent(errBoom)
		for range 300 {
			deep = &ctWrap{deep}
		}
		calls := 0
		err := Do(context.Background(), NewStandard(StandardOptions{}), func(ctx context.Context) error {
			calls++
			<-ctx.Done()
			return deep
		}, AttemptTimeout(time.Second))
		if calls != 1 || !errors.Is(err, ErrNotRetryable) {
			t.Fatalf("calls = %d, err = %v; want 1 attempt, not retryable", calls, err)
		}
	})
}

// The package documentation's first example must retry when it is copied:
// an unclassified error is never retried, so the example classifies its own.
func TestPackageDocFirstExampleClassifies(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "doc.go", nil, parser.PackageClauseOnly|parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var code []string
	for _, line := range strings.Split(f.Doc.Text(), "\n") {
		if strings.HasPrefix(line, "\t") {
			code = append(code, line)
		} else if len(code) > 0 {
			break
		}
	}
	first := strings.Join(code, "\n")
	if !regexp.MustCompile(`return retry\.(Transient|Throttled|RetryAfter|WithInfo)\(`).MatchString(first) {
		t.Fatalf("the package doc's first example returns an unclassified error, so it never retries:\n%s", first)
	}
}

func TestFitsBoundary(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		c := failing(10, errTransient)
		err := Do(context.Background(), &Simple{MaxAttempts: 10, Backoff: Constant(2 * time.Second)}, c.op, MaxElapsed(4*time.Second))
		if c.calls() != 2 || time.Since(start) != 2*time.Second || !errors.Is(err, ErrDeadline) {
			t.Fatalf("calls %d in %v: %v", c.calls(), time.Since(start), err)
		}
	})
}

func TestAcquireFailedPath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &delayed{refuse: errors.New("no")}
		var failed, retried, gave int
		var dl time.Duration
		_ = Do(context.Background(), s, func(ctx context.Context) error {
			d, ok := ctx.Deadline()
			if ok {
				dl = time.Until(d)
			}
			return errTransient
		}, AttemptTimeout(time.Second),
			OnAttemptFailed(func(_ context.Context, a int, _ error) { failed += a }),
			OnRetry(func(context.Context, int, time.Duration, error) { retried++ }),
			OnGiveUp(func(context.Context, *Error) { gave++ }))
		if failed != 1 || retried != 0 || gave != 1 || dl != time.Second {
			t.Fatalf("failed %d retried %d gave %d deadline %v", failed, retried, gave, dl)
		}
	})
}

// FuzzDo runs the loop with arbitrary options, strategy settings and
// operation behaviour in virtual time, and checks the promises that hold
// whatever the input: it returns, it never makes more attempts than allowed,
// it never runs past a deadline, its error accounts for what happened, and
// the quota stays within its bounds.
func FuzzDo(f *testing.F) {
	f.Add(int8(3), uint8(2), int64(0), int64(0), int64(0), int64(time.Second), int64(0), false, false, int16(500))
	f.Add(int8(3), uint8(0), int64(0), int64(0), int64(0), int64(0), int64(0), false, false, int16(500))
	f.Add(int8(4), uint8(1), int64(0), int64(0), int64(2*time.Second), int64(time.Second), int64(0), false, false, int16(0))
	f.Add(int8(5), uint8(9), int64(time.Second), int64(0), int64(0), int64(0), int64(0), true, false, int16(500))
	f.Add(int8(0), uint8(1), int64(0), int64(5*time.Second), int64(0), int64(2*time.Second), int64(time.Hour), false, true, int16(14))
	f.Add(int8(-1), uint8(255), int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), true, true, int16(-1))
	f.Add(int8(127), uint8(200), int64(1), int64(1<<62), int64(3*time.Second), int64(1<<62), int64(1<<62), true, true, int16(0))
	f.Fuzz(func(t *testing.T, maxAttempts int8, failures uint8, attemptTimeout, maxElapsed, ctxTimeout, backoff, retryAfter int64,
		hang, longPoll bool, capacity int16) {
		synctest.Test(t, func(t *testing.T) {
			if hang && attemptTimeout <= 0 && maxElapsed <= 0 && ctxTimeout <= 0 {
				ctxTimeout = int64(time.Minute) // a hanging op needs something to end it
			}
			bucket := NewTokenBucket(int(capacity))
			s := NewStandard(StandardOptions{
				MaxAttempts: int(maxAttempts),
				Backoff:     Constant(backoff),
				Bucket:      bucket,
			})
			ctx := context.Background()
			if ctxTimeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Duration(ctxTimeout))
				defer cancel()
			}
			// Without options, Do takes its fast path for the first attempt.
			var opts []Option
			if attemptTimeout != 0 || maxElapsed != 0 {
				opts = append(opts, AttemptTimeout(time.Duration(attemptTimeout)), MaxElapsed(time.Duration(maxElapsed)))
			}
			if longPoll {
				opts = append(opts, LongPoll())
			}
			errFuzz := RetryAfter(errors.New("fuzz"), time.Duration(retryAfter))
			calls := 0
			start := time.Now()
			err := Do(ctx, s, func(ctx context.Context) error {
				calls++
				if calls > int(failures) {
					return nil
				}
				if hang {
					<-ctx.Done()
				}
				return errFuzz
			}, opts...)
			elapsed := time.Since(start)

			allowed := int(maxAttempts)
			switch {
			case allowed == 0:
				allowed = 3
			case allowed < 0:
				allowed = 1
			}
			if calls > allowed {
				t.Fatalf("%d calls, at most %d allowed", calls, allowed)
			}
			for _, limit := range []int64{ctxTimeout, maxElapsed} {
				if limit > 0 && elapsed > time.Duration(limit) {
					t.Fatalf("ran %v, past a limit of %v", elapsed, time.Duration(limit))
				}
			}
			if v := bucket.Available(); v < 0 || v > max(int(capacity), 0) {
				t.Fatalf("bucket at %d, capacity %d", v, capacity)
			}
			if err == nil {
				if calls != int(failures)+1 {
					t.Fatalf("success after %d calls, but the op fails %d times first", calls, failures)
				}
				return
			}
			var re *Error
			if !errors.As(err, &re) {
				t.Fatalf("err = %T %v, want *Error", err, err)
			}
			if re.Attempts != calls || re.Reason == nil || (calls > 0 && !errors.Is(err, errFuzz)) {
				t.Fatalf("err = %+v after %d calls", re, calls)
			}
			if calls > int(failures) {
				t.Fatalf("gave up (%v) although attempt %d succeeded", err, calls)
			}
		})
	})
}

// A closed circuit keeps Do's shortcut, and an attempt made there is one
// verdict to the breaker: its failure counts once, whether the loop then
// retries it or not.
func TestBreakerOnTheShortcutCountsEachAttemptOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBreaker(BreakerOptions{MinAttempts: 4, FailureRate: 1, Window: time.Minute})
		s := NewStandard(StandardOptions{Backoff: Constant(0)})
		_ = Do(context.Background(), s, succeed) // the strategy's own quota exists: the shortcut applies
		serverDown := Permanent(WithInfo(errors.New("500"), Info{Fault: FaultServer}))
		ctx := context.Background()
		// Three calls of one attempt each: three failures, one short of opening
		// (a first attempt counted twice would have opened it).
		for range 3 {
			_ = Do(ctx, s, func(context.Context) error { return serverDown }, WithBreaker(b))
			if st := b.State(""); st != BreakerClosed {
				t.Fatalf("circuit %v after fewer failed attempts than MinAttempts", st)
			}
		}
		// A call whose first attempt fails and is retried: two verdicts, the
		// first of which opens the circuit, which refuses the retry.
		calls := 0
		err := Do(ctx, s, func(context.Context) error { calls++; return errTransient }, WithBreaker(b))
		var e *Error
		if !errors.As(err, &e) || !errors.Is(err, ErrCircuitOpen) || calls != 1 || e.Attempts != 1 {
			t.Fatalf("%v after %d calls; want the retry refused by the open circuit", err, calls)
		}
		calls = 0
		err = Do(ctx, s, func(context.Context) error { calls++; return nil }, WithBreaker(b))
		if !errors.As(err, &e) || !errors.Is(err, ErrCircuitOpen) || calls != 0 || e.Attempts != 0 {
			t.Fatalf("%v after %d calls; want the first attempt refused", err, calls)
		}
	})
}

// A nil context is context.Background, as for a BreakerTicket's Done: a
// clear default rather than a nil dereference deep in the loop.
func TestNilContextIsBackground(t *testing.T) {
	var nilCtx context.Context
	calls := 0
	op := func(ctx context.Context) error {
		if calls++; ctx == nil || ctx.Err() != nil || !CallerRetries(ctx) {
			t.Errorf("attempt %d: context %v, want a live marked one", calls, ctx)
		}
		if calls < 2 {
			return errTransient
		}
		return nil
	}
	if err := Do(nilCtx, &Simple{Backoff: Constant(0)}, op); err != nil || calls != 2 {
		t.Fatalf("Do: %v after %d attempts, want success on the second", err, calls)
	}
	calls = 0
	if _, err := DoValue(nilCtx, NewStandard(StandardOptions{Backoff: Constant(0)}), func(ctx context.Context) (int, error) {
		return 0, op(ctx)
	}); err != nil || calls != 2 {
		t.Fatalf("DoValue: %v after %d attempts, want success on the second", err, calls)
	}
	if err := Sleep(nilCtx, 0); err != nil {
		t.Fatalf("Sleep: %v", err)
	}
	if CallerRetries(nilCtx) {
		t.Fatal("a nil context is marked")
	}
	marked, done := WithCallerRetries(nilCtx)
	if !CallerRetries(marked) || marked.Err() != nil || marked.Value("key") != nil {
		t.Fatal("WithCallerRetries(nil) did not mark a background context")
	}
	done()
}

// TestCallerGaveUpReasonWithoutStrategy: a caller whose context is done
// gets the context's error as the Reason, whether its one attempt was
// made under No or without a first token, with a ticket or without.
func TestCallerGaveUpReasonWithoutStrategy(t *testing.T) {
	b := NewBreaker(BreakerOptions{})
	for _, s := range []Strategy{&No{}, &outsider{acquire: errNoFirstToken}} {
		for _, ticketed := range []bool{false, true} {
			ctx, cancel := context.WithCancel(context.Background())
			opts := []Option{WithBreaker(b)}
			if ticketed {
				tk, _ := b.Allow("")
				opts = append(opts, WithTicket(tk))
			}
			op := func(ctx context.Context) error { cancel(); return ctx.Err() }
			err := Do(ctx, s, op, opts...)
			var e *Error
			if !errors.As(err, &e) || e.Reason != context.Canceled {
				t.Errorf("%T, ticketed %v: %v; want the Reason context.Canceled", s, ticketed, err)
			}
		}
	}
}
