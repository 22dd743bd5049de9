package forrst

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Strategy is how the retry extension spaces retries.
type Strategy string

// Retry strategies.
const (
	Immediate   Strategy = "immediate"   // retry without waiting
	Fixed       Strategy = "fixed"       // wait After before every retry
	Exponential Strategy = "exponential" // wait After × 2^(n-1) before retry n
)

// maxGuidedAttempts bounds max_attempts on decoding. Larger values are not
// representable intents; the client's own limit wins long before anyway.
const maxGuidedAttempts = math.MaxInt32

// RetryData is the data of the retry extension (urn:forrst:ext:retry): the
// server's guidance for retrying a failed call.
//
// MaxAttempts is read as a number of retries, not of attempts: the
// extension's table gives DEADLINE_EXCEEDED "immediate, 1", which its own
// "Immediate Retry Allowed" example shows as one retry allowed, whereas
// counting the first attempt would allow none. 0 means the server suggests no
// limit of its own.
type RetryData struct {
	Allowed     bool      `json:"allowed"`
	Strategy    Strategy  `json:"strategy,omitempty"`
	After       *Duration `json:"after,omitempty"`
	MaxAttempts int       `json:"max_attempts,omitempty"`
}

// Retry decodes and checks the retry extension's data. An after too long
// for a time.Duration (about 292 years) is valid guidance, not broken: it
// reads as the longest after its unit can express, a wait longer than any
// cap a client sets, so that a client stops retrying instead of falling back
// to the default table (a longer hint never yields a sooner retry).
func (e Extension) Retry() (RetryData, error) {
	var w struct {
		Allowed     bool          `json:"allowed"`
		Strategy    Strategy      `json:"strategy,omitempty"`
		After       *wireDuration `json:"after,omitempty"`
		MaxAttempts int           `json:"max_attempts,omitempty"`
	}
	if err := decodeData(e.Data, &w); err != nil {
		return RetryData{}, fmt.Errorf("retry extension: %w", err)
	}
	d := RetryData{Allowed: w.Allowed, Strategy: w.Strategy, MaxAttempts: w.MaxAttempts}
	if w.After != nil {
		n, ok := w.After.value()
		if !ok {
			return RetryData{}, fmt.Errorf("%w: retry extension: after: the value %s is not a non-negative integer", ErrInvalid, w.After.Value)
		}
		if size, ok := w.After.Unit.size(); ok {
			n = min(n, math.MaxInt64/int64(size))
		}
		d.After = &Duration{Value: n, Unit: w.After.Unit}
	}
	if err := d.Validate(); err != nil {
		return RetryData{}, err
	}
	return d, nil
}

// wireDuration is a duration as sent, its value kept as the JSON number it
// is, so that a wait too long for an int64 or a time.Duration can be told
// from an invalid one.
type wireDuration struct {
	Value json.RawMessage `json:"value"`
	Unit  Unit            `json:"unit"`
}

// value reads the value: a non-negative integer, saturating at
// math.MaxInt64. An absent or null value is 0, as for a Duration.
func (w wireDuration) value() (int64, bool) {
	v := string(w.Value)
	if v == "" || v == "null" {
		return 0, true
	}
	if strings.TrimLeft(v, "0123456789") != "" {
		return 0, false // a sign, a fraction, an exponent, a string
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil { // all digits: only too large
		return math.MaxInt64, true
	}
	return n, true
}

// wait converts w as Duration.Duration does, except that a wait too long for
// a time.Duration saturates to the longest one instead of being invalid.
func (w wireDuration) wait() (time.Duration, bool) {
	size, ok := w.Unit.size()
	n, valid := w.value()
	if !ok || !valid {
		return 0, false
	}
	if n > math.MaxInt64/int64(size) {
		return math.MaxInt64, true
	}
	return time.Duration(n) * size, true
}

// Validate checks d: a known strategy, an after in seconds or minutes that a
// time.Duration can hold, and a non-negative max_attempts.
func (d RetryData) Validate() error {
	switch d.Strategy {
	case "", Immediate, Fixed, Exponential:
	default:
		return fmt.Errorf("%w: retry extension: unknown strategy %q", ErrInvalid, d.Strategy)
	}
	if d.After != nil {
		if d.After.Unit != Second && d.After.Unit != Minute {
			return fmt.Errorf("%w: retry extension: after must be in seconds or minutes, not %q", ErrInvalid, d.After.Unit)
		}
		if _, err := d.After.Duration(); err != nil {
			return fmt.Errorf("%w: retry extension: after: %v", ErrInvalid, err)
		}
	}
	if d.MaxAttempts < 0 || d.MaxAttempts > maxGuidedAttempts {
		return fmt.Errorf("%w: retry extension: max_attempts %d out of range", ErrInvalid, d.MaxAttempts)
	}
	return nil
}

// Wait returns the wait the guidance asks for before retry n (n = 1 for the
// first retry): nothing for immediate, After for fixed, After × 2^(n-1) for
// exponential, saturating rather than overflowing. A guidance without After
// waits nothing. d must be valid.
func (d RetryData) Wait(n int) time.Duration {
	if d.After == nil || d.Strategy == Immediate {
		return 0
	}
	after, err := d.After.Duration()
	if err != nil {
		return 0
	}
	if d.Strategy != Exponential || after == 0 {
		return after
	}
	shift := max(n, 1) - 1
	if shift >= 63 || after > math.MaxInt64>>shift {
		return math.MaxInt64
	}
	return after << shift
}

// extension wraps d as a response extension.
func (d RetryData) extension() Extension {
	data, _ := json.Marshal(d) // cannot fail: plain fields
	return Extension{URN: URNRetry, Data: data}
}
