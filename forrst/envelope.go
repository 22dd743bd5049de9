package forrst

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// The protocol this package speaks.
const (
	ProtocolName    = "forrst"
	ProtocolVersion = "0.1.0"
)

// Extension URNs, in the Forrst specification's form. The reference server
// (the PHP implementation of the specification) names the same extensions
// urn:cline:forrst:ext:…; this package reads those as aliases and writes the
// specification's form.
const (
	URNRetry       = "urn:forrst:ext:retry"
	URNRateLimit   = "urn:forrst:ext:rate-limit"
	URNIdempotency = "urn:forrst:ext:idempotency"
)

// The prefixes of extension URNs: the specification's, and the reference
// server's alias of it.
const (
	extPrefix       = "urn:forrst:ext:"
	referencePrefix = "urn:cline:forrst:ext:"
)

// canonicalURN returns urn in the specification's form: the reference
// server's urn:cline:forrst:ext:NAME becomes urn:forrst:ext:NAME; any other
// URN, another vendor's included, is left as it is.
func canonicalURN(urn string) string {
	if name, ok := strings.CutPrefix(urn, referencePrefix); ok {
		return extPrefix + name
	}
	return urn
}

// canonicalize rewrites the extension URNs of a decoded document in the
// specification's form, so that what is read is written back in that form.
func canonicalize(exts []Extension) {
	for i := range exts {
		exts[i].URN = canonicalURN(exts[i].URN)
	}
}

// Protocol names the protocol and version of a document.
type Protocol struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// current is the protocol this package speaks.
func current() Protocol { return Protocol{Name: ProtocolName, Version: ProtocolVersion} }

// Request is a Forrst request document: one call of one function. Its ID
// identifies one attempt; a retry sends a new ID with the same idempotency
// key.
type Request struct {
	Protocol   Protocol        `json:"protocol"`
	ID         string          `json:"id"`
	Call       Call            `json:"call"`
	Context    json.RawMessage `json:"context,omitempty"`
	Extensions []Extension     `json:"extensions,omitempty"`
	Meta       json.RawMessage `json:"meta,omitempty"`
}

// Call names the function a request calls and its arguments.
type Call struct {
	Function  string          `json:"function"`
	Version   string          `json:"version,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"` // a JSON object
}

// Response is a Forrst response document. A call succeeded when Errors is
// empty; then Result holds its value. A failed call has a null Result and at
// least one error.
type Response struct {
	Protocol   Protocol        `json:"protocol"`
	ID         string          `json:"id"` // empty when the request's id could not be read; sent as null
	Result     json.RawMessage `json:"result"`
	Errors     []Error         `json:"errors,omitempty"`
	Extensions []Extension     `json:"extensions,omitempty"`
	Meta       json.RawMessage `json:"meta,omitempty"`
}

// MarshalJSON writes an empty ID as null and a missing Result as null, as the
// protocol wants.
func (r Response) MarshalJSON() ([]byte, error) {
	out := struct {
		Protocol   Protocol        `json:"protocol"`
		ID         *string         `json:"id"`
		Result     json.RawMessage `json:"result"`
		Errors     []Error         `json:"errors,omitempty"`
		Extensions []Extension     `json:"extensions,omitempty"`
		Meta       json.RawMessage `json:"meta,omitempty"`
	}{r.Protocol, nil, r.Result, r.Errors, r.Extensions, r.Meta}
	if r.ID != "" {
		out.ID = &r.ID
	}
	if len(out.Result) == 0 {
		out.Result = json.RawMessage("null")
	}
	return json.Marshal(out)
}

// Error is one error of a failed call.
type Error struct {
	Code    Code            `json:"code"`
	Message string          `json:"message"`
	Source  *Source         `json:"source,omitempty"`
	Details json.RawMessage `json:"details,omitempty"` // a JSON object, or a list (as the reference server sends)

	guidance *RetryData // set by GuidanceFor; not sent as such
}

// Source points at the part of the request an error is about.
type Source struct {
	Pointer  string `json:"pointer,omitempty"`  // an RFC 6901 JSON Pointer into the request
	Position *int   `json:"position,omitempty"` // a byte offset, for parse errors
}

// Extension is an extension entry: Options in requests, Data in responses.
type Extension struct {
	URN     string          `json:"urn"`
	Options json.RawMessage `json:"options,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Extension returns the first extension with the given URN, a reference
// server's alias (urn:cline:forrst:ext:…) matching its specification form.
func (r *Request) Extension(urn string) (Extension, bool) { return find(r.Extensions, urn) }

// Extension returns the first extension with the given URN, a reference
// server's alias (urn:cline:forrst:ext:…) matching its specification form.
func (r *Response) Extension(urn string) (Extension, bool) { return find(r.Extensions, urn) }

func find(exts []Extension, urn string) (Extension, bool) {
	if all := findAll(exts, urn); len(all) > 0 {
		return all[0], true
	}
	return Extension{}, false
}

// findAll returns every extension with the given URN, in either form.
func findAll(exts []Extension, urn string) []Extension {
	urn = canonicalURN(urn)
	var all []Extension
	for _, e := range exts {
		if canonicalURN(e.URN) == urn {
			all = append(all, e)
		}
	}
	return all
}

// Unit is the unit of a Duration.
type Unit string

// Units of durations.
const (
	Millisecond Unit = "millisecond"
	Second      Unit = "second"
	Minute      Unit = "minute"
	Hour        Unit = "hour"
	Day         Unit = "day"
)

func (u Unit) size() (time.Duration, bool) {
	switch u {
	case Millisecond:
		return time.Millisecond, true
	case Second:
		return time.Second, true
	case Minute:
		return time.Minute, true
	case Hour:
		return time.Hour, true
	case Day:
		return 24 * time.Hour, true
	}
	return 0, false
}

// Duration is a Forrst duration: {"value": 60, "unit": "second"}.
type Duration struct {
	Value int64 `json:"value"`
	Unit  Unit  `json:"unit"`
}

// ErrInvalidDuration is wrapped by the errors of durations that are
// negative, too long for a time.Duration, or in an unknown unit.
var ErrInvalidDuration = errors.New("forrst: invalid duration")

// Duration converts d, checking it: the value may not be negative, the unit
// must be known, and the result must fit a time.Duration.
func (d Duration) Duration() (time.Duration, error) {
	size, ok := d.Unit.size()
	switch {
	case !ok:
		return 0, fmt.Errorf("%w: unknown unit %q", ErrInvalidDuration, d.Unit)
	case d.Value < 0:
		return 0, fmt.Errorf("%w: negative value %d", ErrInvalidDuration, d.Value)
	case d.Value > math.MaxInt64/int64(size):
		return 0, fmt.Errorf("%w: %d %ss is too long", ErrInvalidDuration, d.Value, d.Unit)
	}
	return time.Duration(d.Value) * size, nil
}

// seconds expresses d in whole seconds, rounded up.
func seconds(d time.Duration) Duration {
	v := int64(d / time.Second)
	if d%time.Second > 0 {
		v++ // rounded up without adding first, which overflows near the longest Duration
	}
	return Duration{Value: v, Unit: Second}
}

// validate checks what every request must hold.
func (r *Request) validate() error {
	switch {
	case r.Protocol.Name != ProtocolName:
		return fmt.Errorf("protocol name %q, want %q", r.Protocol.Name, ProtocolName)
	case r.Protocol.Version == "":
		return errors.New("protocol version missing")
	case r.ID == "":
		return errors.New("id missing")
	case r.Call.Function == "":
		return errors.New("call.function missing")
	case !isObjectOrNull(r.Call.Arguments):
		return errors.New("call.arguments is not an object")
	case !isObjectOrNull(r.Context):
		return errors.New("context is not an object")
	}
	return validateExtensions(r.Extensions)
}

// validate checks what every response must hold.
func (r *Response) validate() error {
	switch {
	case r.Protocol.Name != ProtocolName:
		return fmt.Errorf("protocol name %q, want %q", r.Protocol.Name, ProtocolName)
	case len(r.Errors) > 0 && !isNull(r.Result):
		return errors.New("a failed response has a result")
	}
	for i, e := range r.Errors {
		if e.Code == "" {
			return fmt.Errorf("errors[%d].code missing", i)
		}
		// The specification shows details as an object; the reference
		// server also sends a list of objects.
		if !isObjectOrNull(e.Details) && !strings.HasPrefix(strings.TrimSpace(string(e.Details)), "[") {
			return fmt.Errorf("errors[%d].details is neither an object nor a list", i)
		}
	}
	return validateExtensions(r.Extensions)
}

func validateExtensions(exts []Extension) error {
	for i, e := range exts {
		if e.URN == "" {
			return fmt.Errorf("extensions[%d].urn missing", i)
		}
	}
	return nil
}

func isNull(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null"
}

func isObjectOrNull(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null" || strings.HasPrefix(s, "{")
}
