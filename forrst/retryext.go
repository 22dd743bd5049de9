package forrst

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
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

// Retry decodes and checks the retry extension's data. The extension gives
// after in seconds or minutes; an after in hours or days, units a Forrst
// duration has, is the wait it says, read in minutes (2 hours as 120
// minutes), never as broken guidance that a client would replace with a
// shorter wait. An after too long for a time.Duration (about 292 years) is
// valid guidance too: it reads as the longest after its unit can express, a
// wait longer than any cap a client sets, so that a client stops retrying
// instead of falling back to the default table (a longer hint never yields a
// sooner retry). A member given twice (in the data or in after), or named
// in another letter case ("Allowed"), is invalid: which one a reader would
// take is not defined, and the extension's names are its lowercase ones.
//
// What Retry refuses (an unknown unit or strategy, a value that is not a
// non-negative integer) is no valid guidance; the Client still never retries
// sooner than such guidance's after would ask, read as well as it can be (an
// unknown unit as a wait longer than any cap), nor at all if it says
// "allowed": false.
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
		unit := w.After.Unit
		switch unit {
		case Hour, Day:
			// The extension's units are seconds and minutes: a longer unit
			// is read in minutes, exactly, and saturates as minutes do.
			per, _ := unit.size()
			per /= time.Minute
			n, unit = min(n, math.MaxInt64/int64(per))*int64(per), Minute
		}
		if size, ok := unit.size(); ok {
			n = min(n, math.MaxInt64/int64(size))
		}
		d.After = &Duration{Value: n, Unit: unit}
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

// guidanceFloor reads retry data the client cannot follow (Retry refused
// it, or the answer carries other retry guidance too) for what it still asks
// for, so that the client never retries sooner than it says: the longest
// wait any after member asks for (wait), and whether any allowed member is
// false (refused). Member names match in any letter case, as encoding/json
// matches them, so that a member Retry refuses for its case is still
// heeded. An after is read as well as it can be: a non-negative JSON number
// of any form (1.5, 1e3) in a known unit, rounded up to the nanosecond; 0,
// null, or a negative number as no wait; anything else (an unknown or
// missing unit, a value that is not a number, an after that is not an
// object) as a wait longer than any cap, the longest Duration. Data that is
// not a JSON object asks for nothing.
func guidanceFloor(raw json.RawMessage) (wait time.Duration, refused bool) {
	members(raw, func(name string, v json.RawMessage) {
		switch {
		case strings.EqualFold(name, "allowed"):
			refused = refused || string(bytes.TrimSpace(v)) == "false"
		case strings.EqualFold(name, "after"):
			wait = max(wait, afterFloor(v))
		}
	})
	return wait, refused
}

// afterFloor reads an after for guidanceFloor.
func afterFloor(raw json.RawMessage) time.Duration {
	t := bytes.TrimSpace(raw)
	if string(t) == "null" {
		return 0
	}
	if len(t) == 0 || t[0] != '{' {
		return math.MaxInt64 // an after, but not one the client can read
	}
	var values, units []json.RawMessage
	members(t, func(name string, v json.RawMessage) {
		switch {
		case strings.EqualFold(name, "value"):
			values = append(values, v)
		case strings.EqualFold(name, "unit"):
			units = append(units, v)
		}
	})
	if len(values) == 0 {
		values = append(values, json.RawMessage("0")) // as a Duration reads it
	}
	if len(units) == 0 {
		units = append(units, json.RawMessage(`""`))
	}
	var wait time.Duration
	for _, v := range values {
		for _, u := range units {
			wait = max(wait, floorOf(v, u))
		}
	}
	return wait
}

// floorOf reads one value in one unit for afterFloor.
func floorOf(value, unit json.RawMessage) time.Duration {
	v := string(bytes.TrimSpace(value))
	if v == "null" {
		return 0
	}
	positive, ok := positiveNumber(v)
	switch {
	case !ok:
		return math.MaxInt64 // a value, but not a number
	case !positive:
		return 0 // 0 in any unit, or a negative wait: none
	}
	var u Unit
	if json.Unmarshal(unit, &u) != nil {
		return math.MaxInt64
	}
	size, known := u.size()
	if !known {
		return math.MaxInt64
	}
	return ceilDuration(v, size)
}

// positiveNumber reports whether s is a JSON number (ok), and whether it is
// greater than 0.
func positiveNumber(s string) (positive, ok bool) {
	neg := strings.HasPrefix(s, "-")
	mant, _, ok := splitNumber(strings.TrimPrefix(s, "-"))
	if !ok {
		return false, false
	}
	return !neg && strings.Trim(mant, "0.") != "", true
}

// splitNumber splits an unsigned JSON number into its digits and fraction
// (mant, "12.5") and its exponent (exp, "-3" or ""), checking its grammar.
func splitNumber(s string) (mant, exp string, ok bool) {
	mant = s
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant, exp = s[:i], s[i+1:]
		digits := strings.TrimLeft(exp, "+-")
		if len(exp)-len(digits) > 1 || !allDigits(digits) {
			return "", "", false
		}
	}
	intPart, frac, dot := strings.Cut(mant, ".")
	if !allDigits(intPart) || (dot && !allDigits(frac)) || (len(intPart) > 1 && intPart[0] == '0') {
		return "", "", false
	}
	return mant, exp, true
}

func allDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// ceilDuration is the positive JSON number s times size, rounded up to the
// nanosecond, exactly, saturating at the longest Duration. It reads no more
// than 60 significant digits (rounding up what it drops), so that no input
// costs more than that.
func ceilDuration(s string, size time.Duration) time.Duration {
	mant, exp, _ := splitNumber(s)
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	e, err := strconv.ParseInt(exp, 10, 64)
	switch {
	case exp == "":
		e = 0
	case err != nil && strings.HasPrefix(exp, "-"):
		return 1 // far below a nanosecond, but more than nothing
	case err != nil:
		return math.MaxInt64
	}
	e = max(min(e, 1<<40), -1<<40) - int64(len(frac)) // value = digits × 10^e
	mag := int64(len(digits)) + e                     // 10^(mag-1) <= value < 10^mag
	switch {
	case mag > 20: // at least 10^19 units of a millisecond or more
		return math.MaxInt64
	case mag < -30: // less than 10^-30 units of a day or less
		return 1
	}
	up := false
	if len(digits) > 60 {
		up = strings.Trim(digits[60:], "0") != ""
		e += int64(len(digits) - 60)
		digits = digits[:60]
	}
	n, _ := new(big.Int).SetString(digits, 10)
	if up {
		n.Add(n, big.NewInt(1))
	}
	n.Mul(n, big.NewInt(int64(size)))
	pow := new(big.Int).Exp(big.NewInt(10), big.NewInt(max(e, -e)), nil)
	if e >= 0 {
		n.Mul(n, pow)
	} else if _, r := n.QuoRem(n, pow, new(big.Int)); r.Sign() != 0 {
		n.Add(n, big.NewInt(1))
	}
	if !n.IsInt64() {
		return math.MaxInt64
	}
	return time.Duration(n.Int64())
}

// members calls f with each member of the JSON object raw, in order,
// duplicates included. It stops at anything malformed; raw that is not an
// object has no members.
func members(raw json.RawMessage, f func(name string, v json.RawMessage)) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return
		}
		name, _ := key.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return
		}
		f(name, v)
	}
}
