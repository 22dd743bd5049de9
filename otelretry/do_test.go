package otelretry_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/otelretry"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

var errBoom = errors.New("boom")

func TestSucceedsFirstTime(t *testing.T) {
	r := newRig(t)
	inst := r.inst()
	ctx, span := r.caller(context.Background())
	err := retry.Do(ctx, &retry.Simple{}, func(context.Context) error { return nil }, retry.Scope("svc"), inst.Option())
	span.End()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(r.spans.Ended()); n != 1 {
		t.Errorf("%d spans ended, want the caller's alone", n)
	}
	wantEvents(t, r.ended("caller")[0])
	wantMetrics(t, r.metrics(t), map[string]string{
		"retry.client.attempts{retry.outcome=success,retry.scope=svc}": "1",
	})
}

func TestRetriedTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		inst := r.inst()
		ctx, span := r.caller(context.Background())
		n := 0
		s := &retry.Simple{Backoff: retry.Constant(10 * time.Millisecond)}
		start := time.Now()
		err := retry.Do(ctx, s, func(context.Context) error {
			n++
			switch n {
			case 1:
				return retry.Transient(errBoom)
			case 2:
				return retry.RetryAfter(retry.Throttled(errBoom), 20*time.Millisecond)
			}
			return nil
		}, retry.Scope("svc"), inst.Option())
		span.End()
		if err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited != 30*time.Millisecond {
			t.Errorf("waited %v, want 30ms", waited)
		}
		caller := r.ended("caller")[0]
		wantEvents(t, caller,
			"retry.attempt_failed{error.type=transient,retry.attempt=1,retry.error=boom}",
			"retry.wait{error.type=transient,retry.attempt=1,retry.delay=0.01}",
			"retry.attempt_failed{error.type=throttle,retry.attempt=2,retry.error=boom,retry.retry_after=0.02}",
			"retry.wait{error.type=throttle,retry.attempt=2,retry.delay=0.02,retry.retry_after=0.02}",
		)
		attempts := r.ended(otelretry.SpanAttempt)
		if len(attempts) != 2 {
			t.Fatalf("%d attempt spans, want 2 (the retries)", len(attempts))
		}
		for i, a := range attempts {
			if a.Parent().SpanID() != caller.SpanContext().SpanID() {
				t.Errorf("attempt span %d is not a child of the caller's", i+2)
			}
			if got := attr(a, "retry.attempt"); got != []string{"2", "3"}[i] {
				t.Errorf("attempt span %d: retry.attempt = %s", i+2, got)
			}
			if got := attr(a, "http.request.resend_count"); got != "" {
				t.Errorf("attempt span %d has http.request.resend_count without WithHTTPConventions", i+2)
			}
		}
		if st := attempts[0].Status(); st.Code != codes.Error || attr(attempts[0], "error.type") != "throttle" {
			t.Errorf("failed attempt span: status %v, error.type %q", st, attr(attempts[0], "error.type"))
		}
		if st := attempts[1].Status(); st.Code == codes.Error {
			t.Errorf("successful attempt span has status %v", st)
		}
		if !attempts[0].StartTime().Equal(start.Add(10 * time.Millisecond)) {
			t.Errorf("the second attempt's span starts at %v, want after the first wait", attempts[0].StartTime().Sub(start))
		}
		wantMetrics(t, r.metrics(t), map[string]string{
			"retry.client.attempts{retry.outcome=success,retry.scope=svc}":                      "1",
			"retry.client.attempts{error.type=transient,retry.outcome=failure,retry.scope=svc}": "1",
			"retry.client.attempts{error.type=throttle,retry.outcome=failure,retry.scope=svc}":  "1",
			"retry.client.retries{retry.outcome=success,retry.scope=svc}":                       "1",
			"retry.client.retries{error.type=throttle,retry.outcome=failure,retry.scope=svc}":   "1",
			"retry.client.call.retries{retry.outcome=success,retry.scope=svc}":                  "1/2",
			"retry.client.retry.delay{error.type=transient,retry.scope=svc}":                    "1/0.01",
			"retry.client.retry.delay{error.type=throttle,retry.scope=svc}":                     "1/0.02",
			"retry.client.call.retry_delay{retry.outcome=success,retry.scope=svc}":              "1/0.03",
		})
	})
}

// TestGivesUp gives up once for each reason, and checks the give-up event,
// the counter by reason and the retries of calls that retried.
func TestGivesUp(t *testing.T) {
	transient := func(context.Context) error { return retry.Transient(errBoom) }
	cases := []struct {
		reason  string
		class   string
		s       retry.Strategy
		op      func(context.Context) error
		ctx     func(context.Context) (context.Context, context.CancelFunc)
		retries int // retries made before giving up
		opts    []retry.Option
	}{
		{reason: otelretry.ReasonAttempts, class: "transient", retries: 1,
			s: &retry.Simple{MaxAttempts: 2, Backoff: retry.Constant(time.Millisecond)}, op: transient},
		{reason: otelretry.ReasonQuota, class: "transient",
			s: retry.NewStandard(retry.StandardOptions{Bucket: retry.NewTokenBucket(10)}), op: transient},
		{reason: otelretry.ReasonBudget, class: "transient",
			s:  retry.NewStandard(retry.StandardOptions{Budget: retry.NewBudget(retry.BudgetOptions{Ratio: -1, MinPerSecond: -1})}),
			op: transient},
		{reason: otelretry.ReasonDeadline, class: "transient",
			s: &retry.Simple{Backoff: retry.Constant(time.Minute)}, op: transient,
			ctx: func(ctx context.Context) (context.Context, context.CancelFunc) {
				return context.WithTimeout(ctx, time.Second)
			}},
		{reason: otelretry.ReasonNotRetryable, class: "unclassified",
			s: &retry.Simple{}, op: func(context.Context) error { return errBoom }},
		{reason: otelretry.ReasonRetryAfter, class: "transient",
			s:  &retry.Simple{MaxRetryAfter: time.Second},
			op: func(context.Context) error { return retry.RetryAfter(retry.Transient(errBoom), time.Hour) }},
		{reason: otelretry.ReasonOuterLoop, class: "transient",
			s:  &retry.Simple{},
			op: transient,
			ctx: func(ctx context.Context) (context.Context, context.CancelFunc) {
				ctx, done := retry.WithCallerRetries(ctx)
				return ctx, done
			},
			opts: []retry.Option{retry.BeforeRetry(func(ctx context.Context, _ int, _ error) error {
				if retry.CallerRetries(ctx) {
					return retry.ErrOuterLoop // as an integration inside its caller's retries does
				}
				return nil
			})}},
		{reason: otelretry.ReasonCanceled, class: "canceled",
			s: &retry.Simple{},
			op: func(ctx context.Context) error {
				cancel := ctx.Value(cancelKey{}).(context.CancelFunc)
				cancel()
				return ctx.Err()
			},
			ctx: func(ctx context.Context) (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(ctx)
				return context.WithValue(ctx, cancelKey{}, cancel), cancel
			}},
	}
	for _, c := range cases {
		t.Run(c.reason, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t)
				inst := r.inst()
				ctx, span := r.caller(context.Background())
				if c.ctx != nil {
					var cancel context.CancelFunc
					ctx, cancel = c.ctx(ctx)
					defer cancel()
				}
				err := retry.Do(ctx, c.s, c.op, append([]retry.Option{retry.Scope("svc"), inst.Option()}, c.opts...)...)
				span.End()
				var re *retry.Error
				if !errors.As(err, &re) {
					t.Fatalf("err = %v, want a *retry.Error", err)
				}
				attempts := c.retries + 1
				evs := events(r.ended("caller")[0])
				want := "retry.give_up{error.type=" + c.class + ",retry.attempts=" + itoa(attempts) +
					",retry.error=" + re.Error() + ",retry.reason=" + c.reason + "}"
				if len(evs) == 0 || evs[len(evs)-1] != want {
					t.Errorf("events %q\nwant last %q", evs, want)
				}
				m := r.metrics(t)
				key := "retry.client.give_ups{error.type=" + c.class + ",retry.reason=" + c.reason + ",retry.scope=svc}"
				if m[key] != "1" {
					t.Errorf("%s = %q, want 1; metrics %v", key, m[key], m)
				}
				callRetries := "retry.client.call.retries{retry.outcome=give_up,retry.scope=svc}"
				switch {
				case c.retries == 0 && m[callRetries] != "":
					t.Errorf("%s = %s for a call without retries", callRetries, m[callRetries])
				case c.retries > 0 && m[callRetries] != "1/"+itoa(c.retries):
					t.Errorf("%s = %q, want 1/%d", callRetries, m[callRetries], c.retries)
				}
			})
		})
	}
}

type cancelKey struct{}

func itoa(n int) string { return string(rune('0' + n)) }

// TestScopesFold bounds the scopes: past the limit, calls count under
// OtherScope.
func TestScopesFold(t *testing.T) {
	r := newRig(t)
	inst := r.inst(otelretry.WithMaxScopes(2))
	for _, scope := range []string{"a", "b", "c", "d", "a"} {
		_ = retry.Do(context.Background(), &retry.Simple{}, func(context.Context) error { return nil },
			retry.Scope(scope), inst.Option())
	}
	wantMetrics(t, r.metrics(t), map[string]string{
		"retry.client.attempts{retry.outcome=success,retry.scope=a}":      "2",
		"retry.client.attempts{retry.outcome=success,retry.scope=b}":      "1",
		"retry.client.attempts{retry.outcome=success,retry.scope=_other}": "2",
	})
}

// TestNoCallerSpan: without a recording span in the context the
// instrumentation starts no trace, but still counts.
func TestNoCallerSpan(t *testing.T) {
	r := newRig(t)
	inst := r.inst()
	n := 0
	err := retry.Do(context.Background(), &retry.Simple{Backoff: retry.Constant(0)}, func(context.Context) error {
		if n++; n == 1 {
			return retry.Transient(errBoom)
		}
		return nil
	}, inst.Option())
	if err != nil {
		t.Fatal(err)
	}
	if s := r.spans.Ended(); len(s) != 0 {
		t.Errorf("%d spans without a caller's span, want none", len(s))
	}
	if m := r.metrics(t); m["retry.client.retries{retry.outcome=success,retry.scope=}"] != "1" {
		t.Errorf("metrics %v, want a retry counted", m)
	}
}

// TestNestedCalls: a call made inside a retry of another is traced under
// that retry's span, and its first attempt does not take the outer attempt's
// span for its own.
func TestNestedCalls(t *testing.T) {
	r := newRig(t)
	inst := r.inst()
	ctx, span := r.caller(context.Background())
	s := &retry.Simple{Backoff: retry.Constant(0)}
	outer := 0
	err := retry.Do(ctx, s, func(ctx context.Context) error {
		if outer++; outer == 1 {
			return retry.Transient(errBoom)
		}
		inner := 0
		return retry.Do(ctx, s, func(context.Context) error {
			if inner++; inner == 1 {
				return retry.Transient(errBoom)
			}
			return nil
		}, retry.Scope("inner"), inst.Option())
	}, retry.Scope("outer"), inst.Option())
	span.End()
	if err != nil {
		t.Fatal(err)
	}
	var outerSpan, innerSpan sdktrace.ReadOnlySpan
	for _, a := range r.ended(otelretry.SpanAttempt) {
		switch attr(a, "retry.scope") {
		case "outer":
			outerSpan = a
		case "inner":
			innerSpan = a
		}
	}
	if outerSpan == nil || innerSpan == nil {
		t.Fatalf("attempt spans: outer %v, inner %v", outerSpan, innerSpan)
	}
	if st := outerSpan.Status(); st.Code == codes.Error {
		t.Errorf("the outer retry's span has the inner first attempt's failure: %v", st)
	}
	if outerSpan.EndTime().Before(innerSpan.EndTime()) {
		t.Error("the outer retry's span ended before the inner call did")
	}
	if innerSpan.Parent().SpanID() != outerSpan.SpanContext().SpanID() {
		t.Error("the inner retry's span is not a child of the outer retry's")
	}
	wantEvents(t, outerSpan,
		"retry.attempt_failed{error.type=transient,retry.attempt=1,retry.error=boom}",
		"retry.wait{error.type=transient,retry.attempt=1,retry.delay=0}")
}
