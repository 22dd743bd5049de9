package otelretry_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/otelretry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// TestPanicEndsTheAttemptSpan: a retry that panics ends its retry.attempt
// span with status Error and the semantic conventions' exception event, the
// call's metrics are recorded with outcome panic, and the panic goes on with
// its own value. The span used to stay open for ever: the loop told the
// Trace neither AttemptDone nor Done.
func TestPanicEndsTheAttemptSpan(t *testing.T) {
	r := newRig(t)
	inst := r.inst()
	ctx, span := r.caller(context.Background())
	n := 0
	var recovered any
	func() {
		defer func() { recovered = recover() }()
		_ = retry.Do(ctx, &retry.Simple{Backoff: retry.Constant(0)}, func(context.Context) error {
			if n++; n == 1 {
				return retry.Transient(errBoom)
			}
			panic(errBoom)
		}, retry.Scope("svc"), inst.Option())
	}()
	span.End()
	if recovered != errBoom {
		t.Fatalf("recovered %v, want the operation's own panic value", recovered)
	}
	if open := len(r.spans.Started()) - len(r.spans.Ended()); open != 0 {
		t.Fatalf("%d spans never ended", open)
	}
	attempts := r.ended(otelretry.SpanAttempt)
	if len(attempts) != 1 {
		t.Fatalf("%d attempt spans ended, want 1", len(attempts))
	}
	a := attempts[0]
	if st := a.Status(); st.Code != codes.Error || !strings.Contains(st.Description, "boom") {
		t.Errorf("the panicked attempt's status is %v, want Error with the panic", st)
	}
	if got := attr(a, "error.type"); got != otelretry.ClassPanic {
		t.Errorf("error.type = %q, want %q", got, otelretry.ClassPanic)
	}
	var exc map[attribute.Key]string
	for _, e := range a.Events() {
		if e.Name == "exception" {
			exc = map[attribute.Key]string{}
			for _, kv := range e.Attributes {
				exc[kv.Key] = kv.Value.Emit()
			}
		}
	}
	if exc == nil {
		t.Fatalf("no exception event on the attempt's span: %q", events(a))
	}
	if exc["exception.type"] != "*errors.errorString" || exc["exception.message"] != "boom" ||
		!strings.Contains(exc["exception.stacktrace"], "TestPanicEndsTheAttemptSpan") {
		t.Errorf("exception event %v, want the panic value's type and message, and the stack where it began", exc)
	}
	wantMetrics(t, r.metrics(t), map[string]string{
		"retry.client.attempts{error.type=transient,retry.outcome=failure,retry.scope=svc}": "1",
		"retry.client.attempts{error.type=panic,retry.outcome=failure,retry.scope=svc}":     "1",
		"retry.client.retries{error.type=panic,retry.outcome=failure,retry.scope=svc}":      "1",
		"retry.client.retry.delay{error.type=transient,retry.scope=svc}":                    "1/0",
		"retry.client.call.retries{retry.outcome=panic,retry.scope=svc}":                    "1/1",
		"retry.client.call.retry_delay{retry.outcome=panic,retry.scope=svc}":                "1/0",
	})
}

// TestMetricPanicEndsTheAttemptSpan: a meter that panics while an attempt's
// counters are recorded (the panic leaves through Do, as a hook's does)
// finds the attempt's span already ended, with its class when the attempt
// failed. The real SDK panics there through a view's attribute filter, which
// runs in the instrument's Add. attemptDone used to record the counters
// first, and the span stayed open for ever.
func TestMetricPanicEndsTheAttemptSpan(t *testing.T) {
	errMeter := errors.New("meter broke")
	for _, tc := range []struct {
		name   string
		second error // what the attempt whose counter panics returns
	}{
		{"success", nil},
		{"failure", errBoom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var armed atomic.Bool
			r := newRig(t, sdkmetric.WithView(sdkmetric.NewView(
				sdkmetric.Instrument{Name: "retry.client.attempts"},
				sdkmetric.Stream{AttributeFilter: func(attribute.KeyValue) bool {
					if armed.Load() {
						panic(errMeter)
					}
					return true
				}},
			)))
			inst := r.inst()
			ctx, span := r.caller(context.Background())
			n := 0
			var recovered any
			func() {
				defer func() { recovered = recover() }()
				_ = retry.Do(ctx, &retry.Simple{Backoff: retry.Constant(0)}, func(context.Context) error {
					if n++; n == 1 {
						return retry.Transient(errBoom)
					}
					armed.Store(true) // the second attempt's count panics
					return tc.second
				}, retry.Scope("svc"), inst.Option())
			}()
			armed.Store(false)
			span.End()
			if recovered != errMeter || n != 2 {
				t.Fatalf("recovered %v after %d attempts, want the meter's panic after 2", recovered, n)
			}
			attempts := r.ended(otelretry.SpanAttempt)
			if open := len(r.spans.Started()) - len(r.spans.Ended()); open != 0 || len(attempts) != 1 {
				t.Fatalf("%d spans never ended, %d attempt spans ended; want 0 and 1", open, len(attempts))
			}
			if tc.second != nil && attr(attempts[0], "error.type") == "" {
				t.Errorf("the failed attempt's span ended without error.type: %q", attempts[0].Attributes())
			}
		})
	}
}
