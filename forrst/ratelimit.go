package forrst

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// RateLimitData is the data of the rate-limit extension
// (urn:forrst:ext:rate-limit): the caller's quota in the current window.
type RateLimitData struct {
	Limit     int64    `json:"limit"`
	Used      int64    `json:"used"`
	Remaining int64    `json:"remaining"`
	Window    Duration `json:"window"`
	ResetsIn  Duration `json:"resets_in"`
	Scope     string   `json:"scope,omitempty"`
	Warning   string   `json:"warning,omitempty"`
}

// RateLimit decodes and checks the rate-limit extension's data in its
// one-window form. Data in the multi-scope form is refused: read it with
// RateLimits.
func (e Extension) RateLimit() (RateLimitData, error) {
	if multiScope(e.Data) {
		return RateLimitData{}, fmt.Errorf("%w: rate-limit extension: the multi-scope form holds several windows; read it with RateLimits", ErrInvalid)
	}
	return rateLimitWindow(e.Data)
}

// RateLimits decodes and checks the rate-limit extension's data in either
// form: the one window of the usual form, or, in the multi-scope form the
// Forrst specification gives for when several limits apply
// ({"scopes": {"global": {…}, "function": {…}}}), every scope's window, its
// Scope set to its name, in the order of the names.
func (e Extension) RateLimits() ([]RateLimitData, error) {
	if !multiScope(e.Data) {
		d, err := rateLimitWindow(e.Data)
		if err != nil {
			return nil, err
		}
		return []RateLimitData{d}, nil
	}
	var multi struct {
		Scopes map[string]json.RawMessage `json:"scopes"`
	}
	if err := decodeData(e.Data, &multi); err != nil {
		return nil, fmt.Errorf("rate-limit extension: %w", err)
	}
	if len(multi.Scopes) == 0 {
		return nil, fmt.Errorf("%w: rate-limit extension: scopes is empty", ErrInvalid)
	}
	windows := make([]RateLimitData, 0, len(multi.Scopes))
	for name, raw := range multi.Scopes {
		if name == "" {
			return nil, fmt.Errorf("%w: rate-limit extension: a scope without a name", ErrInvalid)
		}
		if multiScope(raw) {
			return nil, fmt.Errorf("%w: rate-limit extension: scope %q nests scopes", ErrInvalid, name)
		}
		d, err := rateLimitWindow(raw)
		if err != nil {
			return nil, fmt.Errorf("scope %q: %w", name, err)
		}
		d.Scope = name
		windows = append(windows, d)
	}
	slices.SortFunc(windows, func(a, b RateLimitData) int { return strings.Compare(a.Scope, b.Scope) })
	return windows, nil
}

// NewRateLimitExtension builds a response's rate-limit extension from the
// windows that apply to the call: one window in the usual form, several in
// the multi-scope form, keyed by their Scope, which must then be set and
// distinct. Every window must be valid: counts not negative, durations that
// Duration accepts.
func NewRateLimitExtension(windows ...RateLimitData) (Extension, error) {
	for _, d := range windows {
		if err := d.validate(); err != nil {
			return Extension{}, err
		}
	}
	switch len(windows) {
	case 0:
		return Extension{}, fmt.Errorf("%w: rate-limit extension: no window", ErrInvalid)
	case 1:
		return windows[0].extension(), nil
	}
	scopes := make(map[string]RateLimitData, len(windows))
	for _, d := range windows {
		if _, dup := scopes[d.Scope]; dup || d.Scope == "" {
			return Extension{}, fmt.Errorf("%w: rate-limit extension: scope %q is empty or repeated", ErrInvalid, d.Scope)
		}
		name := d.Scope
		d.Scope = "" // the key names it
		scopes[name] = d
	}
	data, err := json.Marshal(map[string]any{"scopes": scopes})
	if err != nil {
		return Extension{}, fmt.Errorf("%w: rate-limit extension: %v", ErrInvalid, err)
	}
	return Extension{URN: URNRateLimit, Data: data}, nil
}

// multiScope reports whether raw is rate-limit data in the multi-scope form:
// an object with a scopes member.
func multiScope(raw json.RawMessage) bool {
	var probe map[string]json.RawMessage
	if json.Unmarshal(raw, &probe) != nil {
		return false
	}
	_, ok := probe["scopes"]
	return ok
}

// rateLimitWindow decodes and checks one window of rate-limit data.
func rateLimitWindow(raw json.RawMessage) (RateLimitData, error) {
	var d RateLimitData
	if err := decodeData(raw, &d); err != nil {
		return RateLimitData{}, fmt.Errorf("rate-limit extension: %w", err)
	}
	if err := d.validate(); err != nil {
		return RateLimitData{}, err
	}
	return d, nil
}

// resetWait is how long the windows ask a caller to wait: until the latest
// reset of a window with no calls left, or nothing. Windows with calls left
// do not hold a caller back.
func resetWait(windows []RateLimitData) time.Duration {
	var wait time.Duration
	for _, d := range windows {
		if d.Remaining == 0 {
			if r, err := d.ResetsIn.Duration(); err == nil {
				wait = max(wait, r)
			}
		}
	}
	return wait
}

// validate checks one window: counts not negative, valid durations.
func (d RateLimitData) validate() error {
	if d.Limit < 0 || d.Used < 0 || d.Remaining < 0 {
		return fmt.Errorf("%w: rate-limit extension: negative count", ErrInvalid)
	}
	if _, err := d.Window.Duration(); err != nil {
		return fmt.Errorf("%w: rate-limit extension: window: %v", ErrInvalid, err)
	}
	if _, err := d.ResetsIn.Duration(); err != nil {
		return fmt.Errorf("%w: rate-limit extension: resets_in: %v", ErrInvalid, err)
	}
	return nil
}

func (d RateLimitData) extension() Extension {
	data, _ := json.Marshal(d) // cannot fail: plain fields
	return Extension{URN: URNRateLimit, Data: data}
}

// RateLimiter limits each caller to Limit calls per fixed Window. A Server
// with one reports the caller's window on every response and rejects calls
// beyond the limit with RATE_LIMITED, whose retry guidance waits until the
// window resets. It is safe for concurrent use; it must not be copied after
// first use.
type RateLimiter struct {
	Limit      int                        // calls per window; 0 or less rejects every call
	Window     time.Duration              // length of a window; 0 or less means one second
	Caller     func(*http.Request) string // who is calling; nil = the remote IP address
	MaxCallers int                        // callers tracked at once; 0 = 10000

	mu      sync.Mutex
	windows map[string]*window
}

type window struct {
	start time.Time
	used  int64
}

// take counts a call by the caller of r, and reports the caller's window
// after it and whether the call is allowed.
func (l *RateLimiter) take(r *http.Request, now time.Time) (RateLimitData, bool) {
	caller := l.caller(r)
	length := l.Window
	if length <= 0 {
		length = time.Second
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.windows[caller]
	if !ok {
		if l.windows == nil {
			l.windows = make(map[string]*window)
		}
		l.makeRoom(now, length)
		w = &window{start: now}
		l.windows[caller] = w
	}
	if now.Sub(w.start) >= length {
		w.start, w.used = now, 0
	}
	allowed := w.used < int64(l.Limit)
	if allowed {
		w.used++
	}
	limit := int64(max(l.Limit, 0))
	d := RateLimitData{
		Limit:     limit,
		Used:      w.used,
		Remaining: max(limit-w.used, 0),
		Window:    seconds(length),
		ResetsIn:  seconds(w.start.Add(length).Sub(now)),
		Scope:     "user",
	}
	if d.Remaining*10 <= d.Limit {
		d.Warning = "rate limit nearly exhausted"
	}
	return d, allowed
}

// makeRoom keeps the number of tracked callers bounded: windows that have
// ended go first, then the oldest. Callers hold mu.
func (l *RateLimiter) makeRoom(now time.Time, length time.Duration) {
	limit := l.MaxCallers
	if limit <= 0 {
		limit = 10000
	}
	if len(l.windows) < limit {
		return
	}
	var oldest string
	var oldestStart time.Time
	for k, w := range l.windows {
		if now.Sub(w.start) >= length {
			delete(l.windows, k)
			continue
		}
		if oldest == "" || w.start.Before(oldestStart) {
			oldest, oldestStart = k, w.start
		}
	}
	if len(l.windows) >= limit {
		delete(l.windows, oldest)
	}
}

func (l *RateLimiter) caller(r *http.Request) string {
	if l.Caller != nil {
		return l.Caller(r)
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
