package retry

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestMarkNil(t *testing.T) {
	tests := []struct {
		name string
		mark func(error) error
	}{
		{"Permanent", Permanent},
		{"Transient", Transient},
		{"Throttled", Throttled},
		{"RetryAfter", func(e error) error { return RetryAfter(e, time.Second) }},
		{"WithInfo", func(e error) error { return WithInfo(e, Info{Safety: Safe}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.mark(nil); got != nil {
				t.Errorf("%s(nil) = %#v, want nil", tt.name, got)
			}
		})
	}
}

var errCtSentinel = errors.New("the inner failure")

func TestMarkKeepsInnerError(t *testing.T) {
	inner := fmt.Errorf("call: %w", errCtSentinel)
	tests := []struct {
		name string
		err  error
		want Info
	}{
		{"Permanent", Permanent(inner), Info{Safety: Unsafe}},
		{"Transient", Transient(inner), Info{Safety: Safe}},
		{"Throttled", Throttled(inner), Info{Safety: Safe, Throttle: true}},
		{"RetryAfter", RetryAfter(inner, 2*time.Second), Info{Safety: Safe, RetryAfter: 2 * time.Second}},
		{"WithInfo", WithInfo(inner, Info{Timeout: true, Fault: FaultServer}), Info{Timeout: true, Fault: FaultServer}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, errCtSentinel) {
				t.Errorf("errors.Is(%s(inner), sentinel) = false", tt.name)
			}
			if got, want := tt.err.Error(), "call: the inner failure"; got != want {
				t.Errorf("Error() = %q, want %q", got, want)
			}
			if got := Classify(tt.err); got != tt.want {
				t.Errorf("Classify = %+v, want %+v", got, tt.want)
			}
			// Still reachable behind further wrapping.
			outer := fmt.Errorf("outer: %w", tt.err)
			if !errors.Is(outer, errCtSentinel) {
				t.Error("sentinel not reachable behind an outer wrapper")
			}
			if got := Classify(outer); got != tt.want {
				t.Errorf("Classify(wrapped) = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestMarkKeepsInnerClassification(t *testing.T) {
	e := errors.New("e")
	timeoutServer := WithInfo(e, Info{Timeout: true, Fault: FaultServer, RetryAfter: time.Minute})
	tests := []struct {
		name string
		err  error
		want Info
	}{
		{"RetryAfter(Throttled)", RetryAfter(Throttled(e), 2*time.Second), Info{Safety: Safe, Throttle: true, RetryAfter: 2 * time.Second}},
		{"Permanent(Throttled)", Permanent(Throttled(e)), Info{Safety: Unsafe, Throttle: true}},
		{"Throttled(RetryAfter)", Throttled(RetryAfter(e, 3*time.Second)), Info{Safety: Safe, Throttle: true, RetryAfter: 3 * time.Second}},
		{"Transient(Permanent(Throttled))", Transient(Permanent(Throttled(e))), Info{Safety: Safe, Throttle: true}},
		{"Permanent keeps Timeout, Fault, RetryAfter", Permanent(timeoutServer), Info{Safety: Unsafe, Timeout: true, Fault: FaultServer, RetryAfter: time.Minute}},
		{"Transient keeps Timeout, Fault, RetryAfter", Transient(timeoutServer), Info{Safety: Safe, Timeout: true, Fault: FaultServer, RetryAfter: time.Minute}},
		{"Throttled keeps Timeout, Fault", Throttled(timeoutServer), Info{Safety: Safe, Throttle: true, Timeout: true, Fault: FaultServer, RetryAfter: time.Minute}},
		{"RetryAfter replaces the hint", RetryAfter(timeoutServer, time.Second), Info{Safety: Safe, Timeout: true, Fault: FaultServer, RetryAfter: time.Second}},
		{"RetryAfter over Permanent", RetryAfter(Permanent(e), time.Second), Info{Safety: Safe, RetryAfter: time.Second}},
		{"RetryAfter negative", RetryAfter(e, -5*time.Second), Info{Safety: Safe}},
		{"RetryAfter zero", RetryAfter(e, 0), Info{Safety: Safe}},
		{"RetryAfter negative clears the hint", RetryAfter(RetryAfter(e, time.Hour), -time.Nanosecond), Info{Safety: Safe}},
		{"RetryAfter min int64", RetryAfter(e, time.Duration(-1<<63)), Info{Safety: Safe}},
		{"WithInfo replaces everything", WithInfo(Throttled(RetryAfter(e, time.Hour)), Info{Safety: Unsafe}), Info{Safety: Unsafe}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.err); got != tt.want {
				t.Errorf("Classify = %+v, want %+v", got, tt.want)
			}
		})
	}
}
