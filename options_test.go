package retry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestDoAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var deadlines []time.Duration
		hang := func(ctx context.Context) error {
			d, _ := ctx.Deadline()
			deadlines = append(deadlines, time.Until(d))
			<-ctx.Done()
			return ctx.Err()
		}
		err := Do(context.Background(), &Simple{Backoff: Constant(0)}, hang, AttemptTimeout(time.Second))
		if len(deadlines) != 3 || time.Since(start) != 3*time.Second {
			t.Fatalf("%d attempts in %v, want 3 in 3s", len(deadlines), time.Since(start))
		}
		for i, d := range deadlines {
			if d != time.Second {
				t.Errorf("attempt %d had %v, want a 1s deadline", i+1, d)
			}
		}
		if !errors.Is(err, ErrMaxAttempts) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}

		// The operation's own classification still rules: Permanent is not retried.
		n := 0
		err = Do(context.Background(), &Simple{Backoff: Constant(0)}, func(ctx context.Context) error {
			n++
			<-ctx.Done()
			return Permanent(ctx.Err())
		}, AttemptTimeout(time.Second))
		if n != 1 || !errors.Is(err, ErrNotRetryable) {
			t.Fatalf("calls = %d, err = %v", n, err)
		}

		// A timeout cost: the attempt timeout is charged as a timeout retry.
		b := NewTokenBucket(500)
		s := NewStandard(StandardOptions{Bucket: b, TimeoutCost: 30, MaxAttempts: 2, Backoff: Constant(0)})
		_ = Do(context.Background(), s, hang, AttemptTimeout(time.Second))
		if b.Available() != 470 {
			t.Fatalf("bucket = %d, want 470 after one timeout retry", b.Available())
		}
	})
}
func TestDoMaxElapsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		c := failing(100, errTransient)
		err := Do(context.Background(), &Simple{MaxAttempts: 100, Backoff: Constant(2 * time.Second)}, c.op, MaxElapsed(5*time.Second))
		// Attempts at 0, 2 s and 4 s; the next would start at 6 s, past the 5 s budget.
		if c.calls() != 3 || time.Since(start) != 4*time.Second || !errors.Is(err, ErrDeadline) {
			t.Fatalf("calls = %d in %v, err = %v", c.calls(), time.Since(start), err)
		}
		// The budget bounds the operation too.
		err = Do(context.Background(), &Simple{}, func(ctx context.Context) error {
			<-ctx.Done()
			return Transient(ctx.Err())
		}, MaxElapsed(time.Second))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
	})
}
func TestDoHooks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var events []string
		opts := []Option{
			OnAttemptFailed(func(_ context.Context, attempt int, err error) {
				events = append(events, "failed "+strconv.Itoa(attempt)+" "+err.Error())
			}),
			OnRetry(func(_ context.Context, attempt int, delay time.Duration, err error) {
				events = append(events, "retry "+strconv.Itoa(attempt)+" "+delay.String())
			}),
			OnGiveUp(func(_ context.Context, err *Error) {
				events = append(events, "gave up "+strconv.Itoa(err.Attempts)+" "+err.Reason.Error())
			}),
		}
		s := &Simple{Backoff: Linear{Base: time.Second}}
		_ = Do(context.Background(), s, failing(10, errTransient).op, opts...)
		want := []string{
			"failed 1 boom", "retry 1 1s",
			"failed 2 boom", "retry 2 2s",
			"failed 3 boom", "gave up 3 retry: attempts exhausted",
		}
		if strings.Join(events, "|") != strings.Join(want, "|") {
			t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(events, "\n"), strings.Join(want, "\n"))
		}

		events = nil
		_ = Do(context.Background(), s, failing(1, errTransient).op, opts...)
		if strings.Join(events, "|") != "failed 1 boom|retry 1 1s" {
			t.Fatalf("success after a retry: events = %q", events)
		}
	})
}
func TestDoLongPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		empty := NewTokenBucket(14)
		empty.Take(14)
		s := NewStandard(StandardOptions{Bucket: empty, Backoff: Constant(3 * time.Second)})

		start := time.Now()
		err := Do(context.Background(), s, failing(5, errTransient).op)
		if !errors.Is(err, ErrQuotaExhausted) || time.Since(start) != 0 {
			t.Fatalf("without LongPoll: err = %v after %v, want at once", err, time.Since(start))
		}
		start = time.Now()
		err = Do(context.Background(), s, failing(5, errTransient).op, LongPoll())
		if !errors.Is(err, ErrQuotaExhausted) || time.Since(start) != 3*time.Second {
			t.Fatalf("LongPoll: err = %v after %v, want after the 3s backoff", err, time.Since(start))
		}
		// Up to the deadline, not past it: a poller with a short deadline must
		// not spin either.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start = time.Now()
		err = Do(ctx, s, failing(5, errTransient).op, LongPoll())
		if elapsed := time.Since(start); elapsed != time.Second || !errors.Is(err, ErrQuotaExhausted) {
			t.Fatalf("LongPoll with a 1s deadline: %v after %v, want ErrQuotaExhausted at the deadline", err, elapsed)
		}
		// A retry the quota grants but whose wait ends past the deadline:
		// without LongPoll the loop gives up at once, with it at the
		// deadline, so that a poller whose deadline is shorter than the
		// backoff polls once per deadline, not as fast as it can.
		full := NewStandard(StandardOptions{Backoff: Constant(3 * time.Second)})
		for _, c := range []struct {
			opts []Option
			want time.Duration
		}{{nil, 0}, {[]Option{LongPoll()}, time.Second}} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			start = time.Now()
			err = Do(ctx, full, failing(5, errTransient).op, c.opts...)
			cancel()
			if elapsed := time.Since(start); elapsed != c.want || !errors.Is(err, ErrDeadline) {
				t.Fatalf("a retry past the 1s deadline, %d options: %v after %v, want ErrDeadline after %v", len(c.opts), err, elapsed, c.want)
			}
		}
		// A first attempt's wait past the deadline (Adaptive's send-rate
		// limiter gives one after throttling), and a retry's that fit
		// until an OnRetry hook ran into it: the poller waits until the
		// deadline there too.
		for _, c := range []struct {
			name string
			s    Strategy
			opts []Option
		}{
			{"first attempt", &delayed{initial: 2 * time.Second}, nil},
			{"retry after a slow hook", NewStandard(StandardOptions{Backoff: Constant(995 * time.Millisecond)}),
				[]Option{OnRetry(func(context.Context, int, time.Duration, error) { time.Sleep(10 * time.Millisecond) })}},
		} {
			for _, poll := range []bool{false, true} {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				start = time.Now()
				opts := c.opts
				if poll {
					opts = append(opts[:len(opts):len(opts)], LongPoll())
				}
				err = Do(ctx, c.s, failing(5, errTransient).op, opts...)
				elapsed := time.Since(start)
				cancel()
				want := time.Duration(0)
				if poll {
					want = time.Second
				} else if len(c.opts) > 0 {
					want = 10 * time.Millisecond // the hook's
				}
				if elapsed != want || !errors.Is(err, ErrDeadline) {
					t.Fatalf("%s, LongPoll %v: %v after %v, want ErrDeadline after %v", c.name, poll, err, elapsed, want)
				}
			}
		}
	})
}
func TestDoLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		l := slog.New(slog.NewJSONHandler(&buf, nil))
		_ = Do(context.Background(), &Simple{MaxAttempts: 2, Backoff: Constant(time.Second)},
			failing(5, errTransient).op, Log(l), Scope("billing"))
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 2 {
			t.Fatalf("%d log lines, want 2:\n%s", len(lines), buf.String())
		}
		var retry, gaveUp map[string]any
		if err := json.Unmarshal([]byte(lines[0]), &retry); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(lines[1]), &gaveUp); err != nil {
			t.Fatal(err)
		}
		if retry["level"] != "INFO" || retry["attempt"] != 1.0 || retry["delay"] != float64(time.Second) ||
			retry["error"] != "boom" || retry["scope"] != "billing" {
			t.Errorf("retry entry = %v", retry)
		}
		if gaveUp["level"] != "WARN" || gaveUp["attempt"] != 2.0 || gaveUp["error"] != "boom" ||
			gaveUp["reason"] != "retry: attempts exhausted" {
			t.Errorf("give-up entry = %v", gaveUp)
		}
	})
}
func TestDoScope(t *testing.T) {
	s := NewStandard(StandardOptions{Backoff: Constant(0)})
	_ = Do(context.Background(), s, failing(1, errTransient).op, Scope("a"))
	// One retry paid 14, the successful retry refunded it: a is full again, but
	// a failed request in b leaves b short while a is untouched.
	_ = Do(context.Background(), s, failing(5, errTransient).op, Scope("b"))
	if s.Available("a") != 500 || s.Available("b") != 472 || s.Available("") != 500 {
		t.Fatalf("a = %d, b = %d, unscoped = %d", s.Available("a"), s.Available("b"), s.Available(""))
	}
}

// BeforeRetry vets a retry before the strategy does: a refusal ends the loop
// with its reason, costs the quota nothing, and is not asked about when the
// caller's context is done.
func TestDoBeforeRetry(t *testing.T) {
	errStop := errors.New("the caller's own limit")
	bucket := NewTokenBucket(500)
	s := NewStandard(StandardOptions{Bucket: bucket, Backoff: Constant(0)})
	var (
		seen   []int
		before int // the quota after the first retry was granted
	)
	granted := OnRetry(func(context.Context, int, time.Duration, error) { before = bucket.Available() })
	vet := BeforeRetry(func(_ context.Context, attempt int, err error) error {
		seen = append(seen, attempt)
		if !errors.Is(err, errTransient) {
			t.Errorf("vetted error %v", err)
		}
		if attempt == 2 {
			return errStop
		}
		return nil
	})
	c := failing(10, errTransient)
	err := Do(context.Background(), s, c.op, vet, granted)
	var e *Error
	if !errors.As(err, &e) || e.Attempts != 2 || !errors.Is(e.Reason, errStop) || !errors.Is(err, errTransient) {
		t.Fatalf("err = %#v", err)
	}
	if c.calls() != 2 || len(seen) != 2 {
		t.Fatalf("%d calls, vetted %v", c.calls(), seen)
	}
	// One retry was granted and paid for; the refusal costs nothing.
	if got := bucket.Available(); got != before || got >= 500 {
		t.Fatalf("available = %d, %d after the first retry was granted", got, before)
	}

	ctx, cancel := context.WithCancel(context.Background())
	seen = nil
	err = Do(ctx, s, func(context.Context) error { cancel(); return errTransient }, vet)
	if !errors.Is(err, context.Canceled) || len(seen) != 0 {
		t.Fatalf("cancelled: err = %v, vetted %v", err, seen)
	}
}

type attemptKey struct{}

// Hooks of one kind add up in the order given; traces too, each attempt's
// context derived by every AttemptStart in turn, AttemptDone seeing that
// context (the successful attempt's included) and every hook the scope; of
// two BeforeRetry, the first refusal wins and the second is not asked.
func TestDoHooksCompose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var events []string
		log := func(format string, a ...any) { events = append(events, fmt.Sprintf(format, a...)) }
		tag := func(name string) Option {
			return WithTrace(&Trace{
				AttemptStart: func(ctx context.Context, scope string, n int) context.Context {
					prev, _ := ctx.Value(attemptKey{}).(string)
					return context.WithValue(ctx, attemptKey{}, prev+name+strconv.Itoa(n))
				},
				Retry: func(_ context.Context, scope string, n int, _ time.Duration, _ error) {
					log("trace %s retry %s %d", name, scope, n)
				},
			})
		}
		opts := []Option{
			Scope("svc"),
			tag("a"), tag("b"),
			WithTrace(&Trace{AttemptDone: func(ctx context.Context, scope string, n int, err error) {
				log("done %v %s %d %v", ctx.Value(attemptKey{}), scope, n, err)
			}}),
			OnRetry(func(_ context.Context, n int, _ time.Duration, _ error) { log("retry1 %d", n) }),
			OnRetry(func(_ context.Context, n int, _ time.Duration, _ error) { log("retry2 %d", n) }),
		}
		op := func(ctx context.Context) error {
			log("op %v", ctx.Value(attemptKey{}))
			if len(events) < 6 {
				return errTransient
			}
			return nil
		}
		if err := Do(context.Background(), &Simple{Backoff: Constant(time.Second)}, op, opts...); err != nil {
			t.Fatal(err)
		}
		want := "op a1b1|done a1b1 svc 1 boom|retry1 1|retry2 1|trace a retry svc 1|trace b retry svc 1|op a2b2|done a2b2 svc 2 <nil>"
		if got := strings.Join(events, "|"); got != want {
			t.Fatalf("events\n%s\nwant\n%s", got, want)
		}

		errFirst, errSecond := errors.New("first"), errors.New("second")
		asked := 0
		err := Do(context.Background(), &Simple{}, failing(5, errTransient).op,
			BeforeRetry(func(context.Context, int, error) error { return errFirst }),
			BeforeRetry(func(context.Context, int, error) error { asked++; return errSecond }),
			OnGiveUp(func(context.Context, *Error) { log("giveup1") }),
			OnGiveUp(func(context.Context, *Error) { log("giveup2") }),
			Scope("q"),
			WithTrace(&Trace{GiveUp: func(_ context.Context, scope string, e *Error) { log("trace giveup %s %d", scope, e.Attempts) }}))
		if !errors.Is(err, errFirst) || asked != 0 || strings.Join(events[len(events)-3:], "|") != "giveup1|giveup2|trace giveup q 1" {
			t.Fatalf("err = %v, second asked %d times, events %q", err, asked, events)
		}
	})
}

// A failure that a BeforeRetry check refuses still reaches the strategy,
// marked Unsafe: an Adaptive counts it (its streak and failure counts miss
// none), a Standard charges nothing for it.
func TestBeforeRetryRefusalIsToldToTheStrategy(t *testing.T) {
	refuse := BeforeRetry(func(context.Context, int, error) error { return ErrOuterLoop })
	a := NewAdaptive(AdaptiveOptions{})
	for range 3 {
		_ = Do(context.Background(), a, failing(10, errTransient).op, refuse)
	}
	// Three failures in a row: the streak refuses the next call's retry
	// even without the check.
	c := failing(10, errTransient)
	err := Do(context.Background(), a, c.op)
	if c.calls() != 1 || errors.Is(err, ErrMaxAttempts) {
		t.Fatalf("after three refused failures: %d calls, err %v; want the streak to refuse the retry", c.calls(), err)
	}
	s := NewStandard(StandardOptions{})
	_ = Do(context.Background(), s, failing(10, errTransient).op, refuse)
	if got := s.Available(""); got != DefaultBucketCapacity {
		t.Fatalf("a refused failure cost the quota: %d left", got)
	}
}

// Options that set nothing before a failure keep the first attempt off the
// loop (none), and still apply once it fails: LongPoll waits out a quota's
// refusal after a first attempt made that way, through Do's shortcut and
// DoValue's alike, as it does through the loop.
func TestInertOptionsApplyAfterTheFirstAttempt(t *testing.T) {
	inert := []Option{{}, Unmarked(), Scope(""), AttemptTimeout(0), MaxElapsed(0), WithTrace(nil),
		OnAttemptFailed(nil), BeforeRetry(nil), OnRetry(nil), OnGiveUp(nil), Log(nil), WithBreaker(nil)}
	if _, b, ok := begin(nil, inert); !ok || b != nil {
		t.Fatal("options that set nothing take the loop's path")
	}
	for _, o := range []Option{Scope("svc"), AttemptTimeout(time.Second), MaxElapsed(time.Second), WithTrace(&Trace{}), Log(slog.Default())} {
		if _, _, ok := begin(nil, []Option{o}); ok {
			t.Errorf("option of kind %d skips the loop", o.kind)
		}
	}
	for _, path := range []string{"Do", "DoValue"} {
		for _, longPoll := range []bool{false, true} {
			synctest.Test(t, func(t *testing.T) {
				s := NewStandard(StandardOptions{Backoff: Constant(3 * time.Second)})
				_ = Do(context.Background(), s, succeed) // the strategy's own quota exists
				b, _ := s.quota("").(*TokenBucket)
				if b == nil || !b.Take(b.Available()) {
					t.Fatal("could not drain the quota")
				}
				opts := append([]Option(nil), inert...)
				if longPoll {
					opts = append(opts, LongPoll())
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				start := time.Now()
				var err error
				if path == "Do" {
					err = Do(ctx, s, failing(9, errTransient).op, opts...)
				} else {
					_, err = DoValue(ctx, s, func(ctx context.Context) (int, error) { return 0, failing(9, errTransient).op(ctx) }, opts...)
				}
				waited := time.Since(start)
				if !errors.Is(err, ErrQuotaExhausted) {
					t.Fatalf("%s: %v, want the quota's refusal", path, err)
				}
				if longPoll != (waited > 0) {
					t.Errorf("%s, LongPoll %v: waited %v after the refusal", path, longPoll, waited)
				}
			})
		}
	}
}

// BreakerOf answers as the loop applies the options: the last WithBreaker
// wins, and WithBreaker(nil), the zero Option, replaces none before it.
func TestBreakerOf(t *testing.T) {
	a, b := NewBreaker(BreakerOptions{}), NewBreaker(BreakerOptions{})
	tests := []struct {
		name string
		opts []Option
		want *Breaker
	}{
		{"none", nil, nil},
		{"other options", []Option{Scope("s"), LongPoll()}, nil},
		{"nil", []Option{WithBreaker(nil)}, nil},
		{"one", []Option{Scope("s"), WithBreaker(a), LongPoll()}, a},
		{"the last", []Option{WithBreaker(a), WithBreaker(b)}, b},
		{"nil after", []Option{WithBreaker(b), WithBreaker(nil)}, b},
	}
	for _, tt := range tests {
		if got := BreakerOf(tt.opts...); got != tt.want {
			t.Errorf("%s: BreakerOf = %p, want %p", tt.name, got, tt.want)
		}
		var c config
		c.apply(tt.opts)
		if c.breaker != tt.want {
			t.Errorf("%s: the loop applies breaker %p, BreakerOf says %p", tt.name, c.breaker, tt.want)
		}
	}
}

// TestScopeOf: ScopeOf names the scope the loop applies, the last Scope's,
// Scope("") included, and says whether any was given.
func TestScopeOf(t *testing.T) {
	tests := []struct {
		name   string
		opts   []Option
		want   string
		wantOK bool
	}{
		{"none", nil, "", false},
		{"other options", []Option{LongPoll(), Unmarked()}, "", false},
		{"one", []Option{LongPoll(), Scope("a"), Unmarked()}, "a", true},
		{"the last", []Option{Scope("a"), Scope("b")}, "b", true},
		{"empty after", []Option{Scope("a"), Scope("")}, "", true},
	}
	for _, tt := range tests {
		got, ok := ScopeOf(tt.opts...)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("%s: ScopeOf = %q, %v; want %q, %v", tt.name, got, ok, tt.want, tt.wantOK)
		}
		c := config{scope: "before"}
		c.apply(tt.opts)
		if tt.wantOK && c.scope != got {
			t.Errorf("%s: the loop applies scope %q, ScopeOf says %q", tt.name, c.scope, got)
		}
	}
}

// A first attempt let through before the loop (WithTicket) is judged by
// the circuit it went through, not by the circuit as the loop finds it:
// the loop that follows makes it even if the circuit opened meanwhile, its
// failure does not take the place of a probe once the circuit lets probes
// through, and a refusal's ticket refuses the call.
func TestWithTicket(t *testing.T) {
	open := func(k *brk) {
		k.t.Helper()
		for range 20 {
			_ = k.call("", errBrk500)
		}
		k.want("", BreakerOpen)
	}
	ticketed := func(k *brk, tk BreakerTicket, s Strategy, errs ...error) (int, error) {
		n := 0
		_, err := DoValue(context.Background(), s, func(context.Context) (int, error) {
			n++
			return 0, errs[min(n, len(errs))-1]
		}, WithBreaker(k.b), WithTicket(tk))
		return n, err
	}
	t.Run("the circuit opened meanwhile", func(t *testing.T) {
		k := newBrk(t, BreakerOptions{})
		tk, err := k.b.Allow("")
		if err != nil {
			t.Fatal(err)
		}
		open(k)
		if n, err := ticketed(k, tk, &No{}, nil); n != 1 || err != nil {
			t.Fatalf("the attempt let through before the circuit opened: %d calls, %v; want 1 and success", n, err)
		}
		// The zero ticket lets the first attempt through; its retry asks
		// the circuit as it is.
		n, err := ticketed(k, BreakerTicket{}, &Simple{MaxAttempts: 3, Backoff: Constant(0)}, errBrk500)
		var e *Error
		if !errors.As(err, &e) || n != 1 || e.Attempts != 1 || !errors.Is(err, ErrCircuitOpen) || !errors.Is(err, errBrk500) {
			t.Fatalf("a failed ticketed attempt in an open circuit: %d calls, %v; want its retry refused after 1 attempt", n, err)
		}
	})
	t.Run("a stale attempt is no probe", func(t *testing.T) {
		// A strategy that grants no first token makes one attempt outside
		// the loop's own.
		for _, s := range []Strategy{&No{}, &outsider{acquire: errNoFirstToken}} {
			k := newBrk(t, BreakerOptions{})
			tk, _ := k.b.Allow("")
			open(k)
			k.clock.Advance(DefaultBreakerOpenFor)
			k.want("", BreakerHalfOpen)
			if n, err := ticketed(k, tk, s, errBrk500); n != 1 || !errors.Is(err, errBrk500) {
				t.Fatalf("%T: the stale attempt: %d calls, %v", s, n, err)
			}
			k.want("", BreakerHalfOpen) // not reopened: the probe's place is free
			if err := k.call("", nil); err != nil {
				t.Fatalf("%T: the probe after the stale failure: %v", s, err)
			}
			k.want("", BreakerClosed)
		}
	})
	t.Run("a refusal's ticket", func(t *testing.T) {
		k := newBrk(t, BreakerOptions{})
		open(k)
		tk, err := k.b.Allow("")
		if !errors.Is(err, ErrCircuitOpen) {
			t.Fatalf("Allow in an open circuit: %v", err)
		}
		// The circuit lets probes through by the time the loop runs: the
		// call is refused all the same, as its attempt was.
		k.clock.Advance(DefaultBreakerOpenFor)
		var gaveUp []*Error
		n := 0
		err = Do(context.Background(), &Simple{}, func(context.Context) error { n++; return nil },
			WithBreaker(k.b), WithTicket(tk), OnGiveUp(func(_ context.Context, e *Error) { gaveUp = append(gaveUp, e) }))
		var e *Error
		if !errors.As(err, &e) || n != 0 || e.Attempts != 0 || e.Reason != ErrCircuitOpen || len(gaveUp) != 1 || gaveUp[0] != e {
			t.Fatalf("a call with a refusal's ticket: %d calls, %v, hook told %v; want no attempt, ErrCircuitOpen, the hook told", n, err, gaveUp)
		}
		// The refusal's ticket reports nothing: counted, its 40 successes
		// would keep 20 fresh failures under the failure rate.
		if err := k.call("", nil); err != nil {
			t.Fatal(err)
		}
		k.want("", BreakerClosed)
		for range 40 * breakerPlaceEvery {
			tk.Done(context.Background(), nil)
		}
		open(k)
	})
	// probe opens k's circuit, lets it turn half-open, and takes its one
	// probe place.
	probe := func(k *brk) BreakerTicket {
		k.t.Helper()
		open(k)
		k.clock.Advance(DefaultBreakerOpenFor)
		tk, err := k.b.Allow("")
		if err != nil || !tk.Probe() {
			k.t.Fatalf("Allow in a half-open circuit: %v, a probe's: %v", err, tk.Probe())
		}
		if _, err := k.b.Allow(""); !errors.Is(err, ErrCircuitOpen) {
			k.t.Fatalf("a second probe while the first is out: %v", err)
		}
		return tk
	}
	t.Run("no first wait", func(t *testing.T) {
		// The attempt began: a first delay of the strategy's (Adaptive's
		// while its limiter is on) is not waited, and cannot misreport it
		// as not made.
		k := newBrk(t, BreakerOptions{})
		tk := probe(k)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		n := 0
		err := Do(ctx, delayedFirst{time.Hour}, func(context.Context) error { n++; return nil }, WithBreaker(k.b), WithTicket(tk))
		if err != nil || n != 1 {
			t.Fatalf("a ticketed call whose strategy delays its first attempt an hour: %v, %d calls; want the attempt's success", err, n)
		}
		k.want("", BreakerClosed) // the probe's verdict
	})
	t.Run("a nil operation releases the ticket", func(t *testing.T) {
		k := newBrk(t, BreakerOptions{})
		tk := probe(k)
		if err := Do(context.Background(), &No{}, nil, WithBreaker(k.b), WithTicket(tk)); !errors.Is(err, ErrNilOperation) {
			t.Fatalf("a nil operation: %v", err)
		}
		if err := k.call("", nil); err != nil {
			t.Fatalf("the probe after the released one: %v", err)
		}
		k.want("", BreakerClosed)
	})
	t.Run("Release and Probe", func(t *testing.T) {
		k := newBrk(t, BreakerOptions{})
		closed, _ := k.b.Allow("")
		tk := probe(k)
		refusal, _ := k.b.Allow("")
		if closed.Probe() || refusal.Probe() || (BreakerTicket{}).Probe() {
			t.Fatalf("Probe of a closed circuit's ticket %v, a refusal's %v, the zero ticket's %v; want false", closed.Probe(), refusal.Probe(), (BreakerTicket{}).Probe())
		}
		closed.Release() // nothing to free, nothing counted
		refusal.Release()
		(BreakerTicket{}).Release()
		k.want("", BreakerHalfOpen)
		tk.Release()
		k.want("", BreakerHalfOpen) // released: no verdict
		if err := k.call("", nil); err != nil {
			t.Fatalf("the probe after the released one: %v", err)
		}
		k.want("", BreakerClosed)
	})
	t.Run("a caller that gave up", func(t *testing.T) {
		// The attempt began before the loop: its outcome is collected
		// (the caller's cancellation, counted as neither, which frees
		// the probe's place) and reported as the call's one attempt.
		k := newBrk(t, BreakerOptions{})
		tk := probe(k)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		n := 0
		err := Do(ctx, &No{}, func(ctx context.Context) error { n++; return ctx.Err() }, WithBreaker(k.b), WithTicket(tk))
		var e *Error
		if !errors.As(err, &e) || n != 1 || e.Attempts != 1 || !errors.Is(err, context.Canceled) {
			t.Fatalf("a cancelled ticketed call: %v, %d calls; want its attempt's outcome, 1 attempt", err, n)
		}
		if err := k.call("", nil); err != nil {
			t.Fatalf("the probe after the cancelled one: %v", err)
		}
		k.want("", BreakerClosed)
		// A refusal's ticket made no attempt: the caller's give-up is
		// reported as before any attempt.
		open(k)
		refusal, _ := k.b.Allow("")
		n = 0
		err = Do(ctx, &No{}, func(ctx context.Context) error { n++; return nil }, WithBreaker(k.b), WithTicket(refusal))
		if !errors.As(err, &e) || n != 0 || e.Attempts != 0 || e.Reason != context.Canceled {
			t.Fatalf("a cancelled call with a refusal's ticket: %v, %d calls; want no attempt", err, n)
		}
	})
}

// delayedFirst is a Strategy whose first token carries a delay, as
// Adaptive's does while its client-side limiter is on, and that never
// retries.
type delayedFirst struct{ d time.Duration }

func (s delayedFirst) AcquireInitialToken(string) (Token, error) { return NewToken(0, s.d, nil), nil }
func (delayedFirst) RefreshToken(Token, error) (Token, error)    { return Token{}, ErrMaxAttempts }
func (delayedFirst) RecordSuccess(Token) error                   { return nil }

// TestWithTicketSeveralReleasesAllButTheLast: of several WithTicket options
// the last applies, and the others' probe places are freed, not held until
// OpenFor gives them out again.
func TestWithTicketSeveralReleasesAllButTheLast(t *testing.T) {
	k := newBrk(t, BreakerOptions{Probes: 2})
	k.probing()
	first, _ := k.b.Allow("")
	last, _ := k.b.Allow("")
	if !first.Probe() || !last.Probe() {
		t.Fatalf("probes: %v, %v", first.Probe(), last.Probe())
	}
	err := Do(context.Background(), &No{}, func(context.Context) error { return errBrk404 }, WithBreaker(k.b), WithTicket(first), WithTicket(last))
	if !errors.Is(err, errBrk404) {
		t.Fatal(err)
	}
	free := 0
	for range 4 {
		if tk, err := k.b.Allow(""); err == nil && tk.Probe() {
			free++
		}
	}
	if free != 2 {
		t.Fatalf("%d probe places free after the call, want both", free)
	}
}

// TestWithTicketTwiceTheSameTicket: the same ticket given twice (an
// integration appending the caller's options and its own WithTicket of the
// same probe) must not free the probe's place before its attempt is made:
// with Probes 1, a second caller is let through beside it, and the probe's
// success must still be counted.
func TestWithTicketTwiceTheSameTicket(t *testing.T) {
	k := newBrk(t, BreakerOptions{Probes: 1})
	k.probing()
	tk, _ := k.b.Allow("")
	if !tk.Probe() {
		t.Fatal("not a probe")
	}
	others := 0
	err := Do(context.Background(), &No{}, func(context.Context) error {
		// While the probe's attempt runs, its place is held.
		if o, err := k.b.Allow(""); err == nil {
			others++
			o.Release()
		}
		return nil
	}, WithBreaker(k.b), WithTicket(tk), WithTicket(tk))
	if err != nil {
		t.Fatal(err)
	}
	if others != 0 {
		t.Errorf("%d other attempts let through while the only probe ran", others)
	}
	k.want("", BreakerClosed)
}

// TestWithTicketGivenAgainAfterAnother: WithTicket(a), WithTicket(b),
// WithTicket(a): a applies and must not have been released.
func TestWithTicketGivenAgainAfterAnother(t *testing.T) {
	k := newBrk(t, BreakerOptions{Probes: 2})
	k.probing()
	a, _ := k.b.Allow("")
	b, _ := k.b.Allow("")
	others := 0
	err := Do(context.Background(), &No{}, func(context.Context) error {
		var got []BreakerTicket
		for range 3 {
			if o, err := k.b.Allow(""); err == nil {
				others++
				got = append(got, o)
			}
		}
		for _, o := range got {
			o.Release()
		}
		return nil
	}, WithBreaker(k.b), WithTicket(a), WithTicket(b), WithTicket(a))
	if err != nil {
		t.Fatal(err)
	}
	if others != 1 {
		t.Errorf("%d other attempts let through while a probe ran, want 1 (b's place)", others)
	}
}
