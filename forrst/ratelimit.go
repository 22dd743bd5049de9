package forrst

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
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

// RateLimit decodes and checks the rate-limit extension's data.
func (e Extension) RateLimit() (RateLimitData, error) {
	var d RateLimitData
	if err := decodeData(e.Data, &d); err != nil {
		return RateLimitData{}, fmt.Errorf("rate-limit extension: %w", err)
	}
	if d.Limit < 0 || d.Used < 0 || d.Remaining < 0 {
		return RateLimitData{}, fmt.Errorf("%w: rate-limit extension: negative count", ErrInvalid)
	}
	if _, err := d.Window.Duration(); err != nil {
		return RateLimitData{}, fmt.Errorf("%w: rate-limit extension: window: %v", ErrInvalid, err)
	}
	if _, err := d.ResetsIn.Duration(); err != nil {
		return RateLimitData{}, fmt.Errorf("%w: rate-limit extension: resets_in: %v", ErrInvalid, err)
	}
	return d, nil
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
