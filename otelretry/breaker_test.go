package otelretry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/otelretry"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// circuit returns the three series of retry.client.breaker.status for a
// breaker in a scope, the one of state set to 1.
func circuit(scope, breaker, state string) map[string]string {
	out := map[string]string{}
	for _, st := range []string{otelretry.CircuitClosed, otelretry.CircuitOpen, otelretry.CircuitHalfOpen} {
		v := "0"
		if st == state {
			v = "1"
		}
		out[fmt.Sprintf("retry.client.breaker.status{retry.breaker.name=%s,retry.breaker.state=%s,retry.scope=%s}", breaker, st, scope)] = v
	}
	return out
}

// breakerMetrics keeps the metrics of the breaker: its status and refusals.
func breakerMetrics(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if strings.HasPrefix(k, "retry.client.breaker.") {
			out[k] = v
		}
	}
	return out
}

// refusals returns the series of retry.client.breaker.refusals for a scope:
// those of refused first attempts and refused retries, if any.
func refusals(scope string, first, retries int) map[string]string {
	out := map[string]string{}
	if first > 0 {
		out["retry.client.breaker.refusals{retry.first_attempt=true,retry.scope="+scope+"}"] = fmt.Sprint(first)
	}
	if retries > 0 {
		out["retry.client.breaker.refusals{retry.first_attempt=false,retry.scope="+scope+"}"] = fmt.Sprint(retries)
	}
	return out
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// wantRefused checks that err is the loop's refusal after attempts made.
func wantRefused(t *testing.T, err error, attempts int) {
	t.Helper()
	var e *retry.Error
	if !errors.As(err, &e) || e.Reason != retry.ErrCircuitOpen || e.Attempts != attempts {
		t.Fatalf("err = %v, want the breaker's refusal after %d attempts", err, attempts)
	}
}

// TestBreakerStatusAndRefusals drives a real breaker, in virtual time,
// through closed, open, half-open, open again after a failed probe,
// half-open and closed, reading the status and the refusals at each step,
// and the spans of the calls it refused.
func TestBreakerStatusAndRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 3, OpenFor: 5 * time.Second})
		s := retry.NewStandard(retry.StandardOptions{MaxAttempts: 2, Backoff: retry.Constant(100 * time.Millisecond)})
		inst := r.inst(otelretry.WithBreaker("api", b), otelretry.WithBreaker("nil", nil))
		defer inst.Close()
		calls := 0
		fail := func(context.Context) error { calls++; return retry.Transient(errBoom) }
		succeed := func(context.Context) error { calls++; return nil }
		do := func(ctx context.Context, op func(context.Context) error) error {
			return retry.Do(ctx, s, op, retry.Scope("api"), retry.WithBreaker(b), inst.Option())
		}
		// called runs a call in a caller's span, and returns its error and
		// the span once ended.
		called := func(op func(context.Context) error) (error, sdktrace.ReadOnlySpan) {
			ctx, span := r.caller(context.Background())
			err := do(ctx, op)
			span.End()
			ended := r.ended("caller")
			return err, ended[len(ended)-1]
		}

		// wantBreaker checks the status and the refusals in scope api.
		wantBreaker := func(state string, first, retries int) {
			t.Helper()
			wantMetrics(t, breakerMetrics(r.metrics(t)), merge(circuit("api", "api", state), refusals("api", first, retries)))
		}

		// No scope seen yet: nothing to observe.
		wantMetrics(t, breakerMetrics(r.metrics(t)), nil)

		// Two failed attempts: the window holds 2 of the 3 it needs.
		if err := do(context.Background(), fail); errors.Is(err, retry.ErrCircuitOpen) {
			t.Fatalf("first call refused: %v", err)
		}
		wantBreaker(otelretry.CircuitClosed, 0, 0)

		// The third failure opens the circuit, and the retry after it is
		// refused before its wait: no retry.wait event, no attempt span.
		err, span := called(fail)
		wantRefused(t, err, 1)
		if calls != 3 {
			t.Fatalf("%d attempts made, want 3", calls)
		}
		if span.Status().Code != codes.Error || !strings.Contains(span.Status().Description, "circuit open") {
			t.Errorf("refused retry: caller's status %v, want Error naming the open circuit", span.Status())
		}
		wantEvents(t, span,
			"retry.attempt_failed{error.type=transient,retry.attempt=1,retry.error=boom}",
			"retry.give_up{error.type=transient,retry.attempts=1,retry.error="+err.Error()+",retry.reason=circuit_open}")

		// Open: the next call's first attempt is refused, the operation not
		// called, and the caller's span says why.
		err, span = called(fail)
		wantRefused(t, err, 0)
		if calls != 3 {
			t.Fatalf("the operation was called through an open circuit")
		}
		if span.Status().Code != codes.Error || !strings.Contains(span.Status().Description, "circuit open") {
			t.Errorf("refused first attempt: caller's status %v, want Error naming the open circuit", span.Status())
		}
		wantEvents(t, span, "retry.give_up{retry.attempts=0,retry.error="+err.Error()+",retry.reason=circuit_open}")
		if n := len(r.ended(otelretry.SpanAttempt)); n != 0 {
			t.Errorf("%d attempt spans, want none: the only retry was refused", n)
		}

		wantMetrics(t, r.metrics(t), merge(circuit("api", "api", otelretry.CircuitOpen), refusals("api", 1, 1), map[string]string{
			"retry.client.attempts{error.type=transient,retry.outcome=failure,retry.scope=api}":     "3",
			"retry.client.retries{error.type=transient,retry.outcome=failure,retry.scope=api}":      "1",
			"retry.client.retry.delay{error.type=transient,retry.scope=api}":                        "1/0.1",
			"retry.client.call.retries{retry.outcome=give_up,retry.scope=api}":                      "1/1",
			"retry.client.call.retry_delay{retry.outcome=give_up,retry.scope=api}":                  "1/0.1",
			"retry.client.give_ups{error.type=transient,retry.reason=attempts,retry.scope=api}":     "1",
			"retry.client.give_ups{error.type=transient,retry.reason=circuit_open,retry.scope=api}": "1",
			"retry.client.give_ups{retry.reason=circuit_open,retry.scope=api}":                      "1",
		}))

		// After OpenFor the circuit is half-open: its next attempt is a probe.
		time.Sleep(5 * time.Second)
		wantBreaker(otelretry.CircuitHalfOpen, 1, 1)

		// The probe fails: open again, for twice as long, and the probe's
		// retry is refused.
		err, _ = called(fail)
		wantRefused(t, err, 1)
		time.Sleep(5 * time.Second)
		wantBreaker(otelretry.CircuitOpen, 1, 2)
		time.Sleep(5 * time.Second)
		wantBreaker(otelretry.CircuitHalfOpen, 1, 2)

		// A probe that succeeds closes it; a success leaves the caller's
		// status alone.
		err, span = called(succeed)
		if err != nil {
			t.Fatalf("probe: %v", err)
		}
		if span.Status().Code != codes.Unset {
			t.Errorf("successful call: caller's status %v, want it unset", span.Status())
		}
		wantBreaker(otelretry.CircuitClosed, 1, 2)
		if calls != 5 {
			t.Errorf("%d attempts made, want 5: 3, a failed probe and a successful one", calls)
		}
	})
}

// TestBreakerRefusedAfterWait: a retry granted while the circuit was closed,
// refused when its wait ends because other calls opened the circuit
// meanwhile, has its wait on the caller's span and no attempt span, and
// counts as a refused retry.
func TestBreakerRefusedAfterWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		// Open for longer than the wait.
		b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 3, OpenFor: 5 * time.Second})
		s := retry.NewStandard(retry.StandardOptions{MaxAttempts: 2, Backoff: retry.Constant(time.Second)})
		inst := r.inst(otelretry.WithBreaker("api", b))
		defer inst.Close()
		fail := func(context.Context) error { return retry.Transient(errBoom) }

		ctx, span := r.caller(context.Background())
		done := make(chan error)
		go func() { done <- retry.Do(ctx, s, fail, retry.WithBreaker(b), inst.Option()) }()
		synctest.Wait() // its first attempt failed, and it waits a second
		for range 2 {
			_ = retry.Do(context.Background(), &retry.No{}, fail, retry.WithBreaker(b), inst.Option())
		}
		if st := b.State(""); st != retry.BreakerOpen {
			t.Fatalf("state %v after three failures, want open", st)
		}
		err := <-done
		span.End()
		wantRefused(t, err, 1)
		wantEvents(t, r.ended("caller")[0],
			"retry.attempt_failed{error.type=transient,retry.attempt=1,retry.error=boom}",
			"retry.wait{error.type=transient,retry.attempt=1,retry.delay=1}",
			"retry.give_up{error.type=transient,retry.attempts=1,retry.error="+err.Error()+",retry.reason=circuit_open}")
		if r.ended("caller")[0].Status().Code != codes.Error {
			t.Errorf("caller's status %v, want Error", r.ended("caller")[0].Status())
		}
		if n := len(r.ended(otelretry.SpanAttempt)); n != 0 {
			t.Errorf("%d attempt spans for an attempt not made", n)
		}
		wantMetrics(t, breakerMetrics(r.metrics(t)), merge(circuit("", "api", otelretry.CircuitOpen), refusals("", 0, 1)))
	})
}

// TestBreakerStatusPerScope: each scope's circuit is observed on its own,
// every breaker in every scope seen, and scopes folded into OtherScope not
// at all.
func TestBreakerStatusPerScope(t *testing.T) {
	r := newRig(t)
	b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 1})
	other := retry.NewBreaker(retry.BreakerOptions{})
	inst := r.inst(otelretry.WithBreaker("api", b), otelretry.WithBreaker("db", other), otelretry.WithMaxScopes(2))
	defer inst.Close()
	run := func(scope string, err error) {
		_ = retry.Do(context.Background(), &retry.No{}, func(context.Context) error { return err },
			retry.Scope(scope), retry.WithBreaker(b), inst.Option())
	}
	run("down", retry.Transient(errBoom)) // one failure of one: open
	run("up", nil)
	run("folded", retry.Transient(errBoom)) // past WithMaxScopes: opens, not observed
	run("folded", nil)                      // refused
	if b.State("folded") != retry.BreakerOpen {
		t.Fatalf("scope folded is %v, want open", b.State("folded"))
	}
	wantMetrics(t, breakerMetrics(r.metrics(t)), merge(
		circuit("down", "api", otelretry.CircuitOpen),
		circuit("up", "api", otelretry.CircuitClosed),
		circuit("down", "db", otelretry.CircuitClosed),
		circuit("up", "db", otelretry.CircuitClosed),
		refusals(otelretry.OtherScope, 1, 0),
	))
}

// TestBreakerRefusalsConcurrent: callers racing an opening circuit and a
// reader collecting meanwhile; the refusals counted are exactly the calls
// that came back refused, first attempts and retries apart.
func TestBreakerRefusalsConcurrent(t *testing.T) {
	r := newRig(t)
	b := retry.NewBreaker(retry.BreakerOptions{MinAttempts: 20, OpenFor: time.Hour})
	s := retry.NewStandard(retry.StandardOptions{MaxAttempts: 3, Backoff: retry.Constant(0)})
	inst := r.inst(otelretry.WithBreaker("api", b))
	defer inst.Close()
	const workers, each = 8, 50
	var (
		mu             sync.Mutex
		first, retries int
		wg             sync.WaitGroup
	)
	stop := make(chan struct{})
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for {
			select {
			case <-stop:
				return
			default:
				// Not r.metrics: only the test's goroutine may fail it.
				var rm metricdata.ResourceMetrics
				_ = r.reader.Collect(context.Background(), &rm)
			}
		}
	}()
	for range workers {
		wg.Go(func() {
			for range each {
				err := retry.Do(context.Background(), s, func(context.Context) error { return retry.Transient(errBoom) },
					retry.Scope("api"), retry.WithBreaker(b), inst.Option())
				var e *retry.Error
				if errors.As(err, &e) && e.Reason == retry.ErrCircuitOpen {
					mu.Lock()
					if e.Attempts == 0 {
						first++
					} else {
						retries++
					}
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	<-collected
	if first == 0 {
		t.Fatal("no call was refused: the circuit never opened")
	}
	wantMetrics(t, breakerMetrics(r.metrics(t)), merge(circuit("api", "api", otelretry.CircuitOpen), refusals("api", first, retries)))
}
