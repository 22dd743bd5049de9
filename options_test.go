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
		if elapsed := time.Since(start); elapsed >= time.Second || elapsed < time.Second-time.Millisecond || !errors.Is(err, ErrQuotaExhausted) {
			t.Fatalf("LongPoll with a 1s deadline: %v after %v, want ErrQuotaExhausted just before the deadline", err, elapsed)
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
