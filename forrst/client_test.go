package forrst_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/forrst"
)

// noWait is a client strategy that never waits on its own account and allows
// many attempts: whatever waits and limits a test sees are the server's.
func noWait(attempts int) retry.Strategy {
	return &retry.Simple{Backoff: retry.Constant(0), MaxAttempts: attempts}
}

// flaky registers name, failing with code for the first fails calls and then
// answering {"ok": true}.
func flaky(s *forrst.Server, name string, code forrst.Code, fails int32, runs *atomic.Int32, opts ...forrst.FunctionOption) {
	s.Register(name, func(ctx context.Context, args json.RawMessage) (any, error) {
		if runs.Add(1) <= fails {
			return nil, forrst.Fail(code, "not yet")
		}
		return map[string]bool{"ok": true}, nil
	}, opts...)
}

func wantCallError(t *testing.T, err error, code forrst.Code, status int) *forrst.CallError {
	t.Helper()
	var ce *forrst.CallError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a *forrst.CallError", err)
	}
	if ce.Err.Code != code || ce.StatusCode != status {
		t.Errorf("CallError code %q status %d, want %q %d", ce.Err.Code, ce.StatusCode, code, status)
	}
	var fe *forrst.Error
	if !errors.As(err, &fe) || fe.Code != code {
		t.Errorf("errors.As(*forrst.Error) = %v, want code %q", fe, code)
	}
	var re *retry.Error
	if !errors.As(err, &re) {
		t.Errorf("err = %T, want a *retry.Error", err)
	}
	return ce
}

func TestClientUnavailableTwiceThenSuccess(t *testing.T) {
	var runs atomic.Int32
	var s forrst.Server
	flaky(&s, "inventory.get", "UNAVAILABLE", 2, &runs)
	srv := newServer(t, &s)
	virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
		c := &forrst.Client{URL: srv.URL, HTTPClient: hc} // the default strategy: jitter below 1 s
		var out struct{ OK bool }
		if err := c.Call(context.Background(), "inventory.get", map[string]int{"sku": 1}, &out); err != nil {
			t.Fatal(err)
		}
		if !out.OK || runs.Load() != 3 || st.count() != 3 {
			t.Errorf("result %+v, runs %d, requests %d", out, runs.Load(), st.count())
		}
		// exponential from 1 s: 1 s before retry 1, 2 s before retry 2.
		wantWaits(t, st, time.Second, 2*time.Second)
	})
}

func TestClientRateLimitedWaitsSixtySeconds(t *testing.T) {
	var runs atomic.Int32
	var s forrst.Server
	flaky(&s, "search", "RATE_LIMITED", 1000, &runs)
	srv := newServer(t, &s)
	virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
		c := &forrst.Client{URL: srv.URL, HTTPClient: hc}
		err := c.Call(context.Background(), "search", nil, nil)
		ce := wantCallError(t, err, "RATE_LIMITED", 429)
		if !errors.Is(err, retry.ErrMaxAttempts) {
			t.Errorf("reason: %v, want the client's ErrMaxAttempts", err)
		}
		if !ce.RetryInfo().Throttle {
			t.Error("RATE_LIMITED is not classified as throttling")
		}
		// Standard's 3 attempts, fixed 60 s between them.
		wantWaits(t, st, 60*time.Second, 60*time.Second)
	})
}

// The server's rate limiter says the window resets sooner than the table's
// 60 s: the client waits for the reset. The loopback server keeps real time
// while the client's waits are virtual, so the window never ends for the
// server and each retry is limited again.
func TestClientRateLimitWaitsForTheWindowReset(t *testing.T) {
	var runs atomic.Int32
	s := &forrst.Server{RateLimit: &forrst.RateLimiter{Limit: 1, Window: 10 * time.Second}}
	flaky(s, "search", "", 0, &runs)
	srv := newServer(t, s)
	virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
		c := &forrst.Client{URL: srv.URL, HTTPClient: hc}
		if err := c.Call(context.Background(), "search", nil, nil); err != nil {
			t.Fatal(err)
		}
		err := c.Call(context.Background(), "search", nil, nil)
		wantCallError(t, err, "RATE_LIMITED", 429)
		waits := st.waits()
		if len(waits) != 3 || st.count() != 4 {
			t.Fatalf("requests %d, waits %v: want 1 + 3 attempts", st.count(), waits)
		}
		for i, w := range waits[1:] { // waits[0] is between the two calls
			// Each wait is the Retry-After (= resets_in) of the answer before it: 10 s, or
			// 9 s had a real second passed on the server.
			want := st.retryAfter[i+1] + "s"
			if w.String() != want || (want != "10s" && want != "9s") {
				t.Errorf("wait %d = %v, want the window's reset %s, not the table's 60 s", i+1, w, want)
			}
		}
		if runs.Load() != 1 {
			t.Errorf("the function ran %d times", runs.Load())
		}
	})
}

// The function itself answers RATE_LIMITED (table: 60 s) while the server's
// limiter reports that the caller's window, now used up, resets only in
// 2 minutes: the client waits for the later of the two.
func TestClientRateLimitWaitsForALaterWindowReset(t *testing.T) {
	var runs atomic.Int32
	s := &forrst.Server{RateLimit: &forrst.RateLimiter{Limit: 1, Window: 2 * time.Minute}}
	flaky(s, "search", "RATE_LIMITED", 1000, &runs)
	srv := newServer(t, s)
	virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
		c := &forrst.Client{URL: srv.URL, HTTPClient: hc}
		err := c.Call(context.Background(), "search", nil, nil)
		wantCallError(t, err, "RATE_LIMITED", 429)
		waits := st.waits()
		if len(waits) != 2 {
			t.Fatalf("waits %v, want 2", waits)
		}
		for i, w := range waits {
			if w != 2*time.Minute && w != 2*time.Minute-time.Second {
				t.Errorf("wait %d = %v, want the window's 2 minutes", i+1, w)
			}
		}
		if runs.Load() != 1 {
			t.Errorf("the function ran %d times, want 1", runs.Load())
		}
	})
}

// DEADLINE_EXCEEDED: immediate, max_attempts 1, which is one retry.
func TestClientDeadlineExceededRetriedOnceImmediately(t *testing.T) {
	var runs atomic.Int32
	var s forrst.Server
	flaky(&s, "report", "DEADLINE_EXCEEDED", 1000, &runs)
	srv := newServer(t, &s)
	virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
		c := &forrst.Client{URL: srv.URL, HTTPClient: hc, Strategy: noWait(10)}
		start := time.Now()
		err := c.Call(context.Background(), "report", nil, nil)
		wantCallError(t, err, "DEADLINE_EXCEEDED", 504)
		if !errors.Is(err, retry.ErrMaxAttempts) || !errors.Is(err, forrst.ErrServerLimit) {
			t.Errorf("reason: %v, want ErrServerLimit (an ErrMaxAttempts)", err)
		}
		if st.count() != 2 || runs.Load() != 2 || time.Since(start) != 0 {
			t.Errorf("requests %d, runs %d, elapsed %v; want 2, 2, 0", st.count(), runs.Load(), time.Since(start))
		}
	})
}

// max_attempts lowers the client's limit, and never raises it.
func TestClientMaxAttempts(t *testing.T) {
	var runs atomic.Int32
	var s forrst.Server
	flaky(&s, "f", "UNAVAILABLE", 1000, &runs,
		forrst.WithGuidance("UNAVAILABLE", forrst.RetryData{Allowed: true, Strategy: forrst.Immediate, MaxAttempts: 4}))
	srv := newServer(t, &s)
	virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
		c := &forrst.Client{URL: srv.URL, HTTPClient: hc, Strategy: noWait(100)}
		err := c.Call(context.Background(), "f", nil, nil)
		if !errors.Is(err, forrst.ErrServerLimit) || st.count() != 5 {
			t.Errorf("server allows 4 retries, client 99: %d requests, err %v; want 5 and ErrServerLimit", st.count(), err)
		}
		st2 := &stamps{base: st.base}
		c = &forrst.Client{URL: srv.URL, HTTPClient: &http.Client{Transport: st2}, Strategy: noWait(2)}
		err = c.Call(context.Background(), "f", nil, nil)
		if !errors.Is(err, retry.ErrMaxAttempts) || errors.Is(err, forrst.ErrServerLimit) || st2.count() != 2 {
			t.Errorf("server allows 4 retries, client 1: %d requests, err %v; want 2 and the client's ErrMaxAttempts", st2.count(), err)
		}
	})
}

func TestClientNonRetryableCodesAreTriedOnce(t *testing.T) {
	cases := []struct {
		code   forrst.Code
		status int
	}{
		{"INVALID_ARGUMENTS", 400}, {"NOT_FOUND", 404}, {"UNAUTHORIZED", 401}, {"FORBIDDEN", 403},
		{"CANCELLED", 499}, {"VALIDATION_ERROR", 400}, {"IDEMPOTENCY_CONFLICT", 409}, {"ORDERS_SOLD_OUT", 400},
	}
	runs := map[forrst.Code]*atomic.Int32{}
	var s forrst.Server
	for _, c := range cases {
		runs[c.code] = new(atomic.Int32)
		flaky(&s, "f."+string(c.code), c.code, 1000, runs[c.code])
	}
	srv := newServer(t, &s)
	for _, c := range cases {
		t.Run(string(c.code), func(t *testing.T) {
			virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
				client := &forrst.Client{URL: srv.URL, HTTPClient: hc, Strategy: noWait(10)}
				err := client.Call(context.Background(), "f."+string(c.code), nil, nil)
				ce := wantCallError(t, err, c.code, c.status)
				if !errors.Is(err, retry.ErrNotRetryable) {
					t.Errorf("reason: %v, want ErrNotRetryable", err)
				}
				if !reflect.DeepEqual(ce.Guidance, forrst.RetryData{}) || !ce.FromServer || ce.Function != "f."+string(c.code) {
					t.Errorf("CallError %+v", ce)
				}
				if ce.Err.Message != "not yet" {
					t.Errorf("message %q", ce.Err.Message)
				}
				if st.count() != 1 || runs[c.code].Load() != 1 {
					t.Errorf("requests %d, runs %d; want 1", st.count(), runs[c.code].Load())
				}
			})
		})
	}
	t.Run("FUNCTION_NOT_FOUND", func(t *testing.T) {
		virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
			client := &forrst.Client{URL: srv.URL, HTTPClient: hc, Strategy: noWait(10)}
			err := client.Call(context.Background(), "no.such.function", nil, nil)
			wantCallError(t, err, "FUNCTION_NOT_FOUND", 404)
			if st.count() != 1 {
				t.Errorf("requests %d, want 1", st.count())
			}
		})
	})
}

// A payment's answer is lost twice after the charge was made: the client
// retries with the same key, the server replays the stored result, and the
// customer is charged once.
func TestClientPaymentRunsOnceWhenAnswersAreLost(t *testing.T) {
	var charges atomic.Int32
	var s forrst.Server
	s.Register("payments.charge", func(ctx context.Context, args json.RawMessage) (any, error) {
		var in struct{ Amount int }
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, forrst.Fail("INVALID_ARGUMENTS", err.Error())
		}
		return map[string]any{"charge": charges.Add(1), "amount": in.Amount}, nil
	})
	srv, requests := lossy(t, &s, 2)
	virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
		c := &forrst.Client{URL: srv.URL, HTTPClient: hc}
		var out struct{ Charge, Amount int }
		if err := c.Call(context.Background(), "payments.charge", map[string]int{"amount": 1200}, &out); err != nil {
			t.Fatalf("Call: %v", err)
		}
		if out.Charge != 1 || out.Amount != 1200 {
			t.Errorf("result %+v, want the first charge", out)
		}
		if requests.Load() != 3 || charges.Load() != 1 {
			t.Errorf("requests %d, charges %d; want 3 requests and 1 charge", requests.Load(), charges.Load())
		}
	})
}

// Without a key, a request that reached the server is not repeated, whether
// its answer was lost before its first byte or halfway through.
func TestClientWithoutKeyDoesNotRepeatALostAnswer(t *testing.T) {
	for name, lose := range map[string]func(*testing.T, http.Handler, int) (*httptest.Server, *atomic.Int32){
		"before its first byte": lossy,
		"mid-document":          cutShort,
	} {
		t.Run(name, func(t *testing.T) {
			var charges atomic.Int32
			var s forrst.Server
			charging(&s, &charges)
			srv, requests := lose(t, &s, 2)
			virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
				c := &forrst.Client{URL: srv.URL, HTTPClient: hc, NoIdempotencyKey: true}
				err := c.Call(context.Background(), "payments.charge", map[string]int{"amount": 1200}, nil)
				if err == nil || !errors.Is(err, retry.ErrNotRetryable) {
					t.Errorf("err = %v, want a refusal to repeat", err)
				}
				if requests.Load() != 1 || charges.Load() != 1 {
					t.Errorf("requests %d, charges %d; want 1 and 1", requests.Load(), charges.Load())
				}
			})
		})
	}
}

// An answer cut off halfway through its document (the status line and
// headers arrive, then the connection is reset) is lost like one lost before
// its first byte, not malformed: the keyed call is retried, the server
// replays the stored result, and the cause stays in the error's chain.
func TestClientAnswerCutMidDocumentIsRetriedWithItsKey(t *testing.T) {
	var charges atomic.Int32
	var s forrst.Server
	charging(&s, &charges)
	srv, requests := cutShort(t, &s, 1)
	virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
		c := &forrst.Client{URL: srv.URL, HTTPClient: hc, Strategy: noWait(3)}
		var out struct{ Charge int }
		if err := c.Call(context.Background(), "payments.charge", map[string]int{"amount": 1200}, &out); err != nil {
			t.Fatalf("Call: %v", err)
		}
		if requests.Load() != 2 || charges.Load() != 1 || out.Charge != 1 {
			t.Errorf("requests %d, charges %d, result %+v; want 2 requests, 1 charge, the first charge", requests.Load(), charges.Load(), out)
		}
	})

	srv, requests = cutShort(t, &s, 5)
	virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
		c := &forrst.Client{URL: srv.URL, HTTPClient: hc, Strategy: noWait(2)}
		err := c.Call(context.Background(), "payments.charge", nil, nil)
		if !errors.Is(err, syscall.ECONNRESET) || errors.Is(err, forrst.ErrMalformed) || !errors.Is(err, retry.ErrMaxAttempts) {
			t.Errorf("err = %v; want the reset in its chain, not ErrMalformed, and both attempts made", err)
		}
		if requests.Load() != 2 {
			t.Errorf("requests %d, want 2", requests.Load())
		}
	})
}

// A failed status whose document is cut keeps what its headers ask: a 503's
// Retry-After is still the least wait before the keyed retry.
func TestClientCutAnswerKeepsTheStatusWait(t *testing.T) {
	srv, requests := cutShort(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, failDoc("UNAVAILABLE", `{"allowed":true,"strategy":"immediate"}`))
	}), 5)
	virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
		c := &forrst.Client{URL: srv.URL, HTTPClient: hc, Strategy: noWait(2)}
		err := c.Call(context.Background(), "f", nil, nil)
		if !errors.Is(err, syscall.ECONNRESET) || requests.Load() != 2 {
			t.Errorf("err = %v after %d requests; want the reset, after 2", err, requests.Load())
		}
		wantWaits(t, st, 7*time.Second)
	})
}

func TestClientWithoutKey(t *testing.T) {
	cases := []struct {
		code     forrst.Code
		requests int // with 2 failures before a success
	}{
		{"INTERNAL_ERROR", 1},   // the function may have run
		{"DEPENDENCY_ERROR", 1}, // likewise
		{"DEADLINE_EXCEEDED", 1},
		{"UNAVAILABLE", 3}, // nothing ran
		{"RATE_LIMITED", 3},
	}
	for _, c := range cases {
		t.Run(string(c.code), func(t *testing.T) {
			var runs atomic.Int32
			var s forrst.Server
			flaky(&s, "f", c.code, 2, &runs)
			srv := newServer(t, &s)
			virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
				cl := &forrst.Client{URL: srv.URL, HTTPClient: hc, NoIdempotencyKey: true, Strategy: noWait(5)}
				err := cl.Call(context.Background(), "f", nil, nil)
				if st.count() != c.requests {
					t.Errorf("requests %d, want %d (err %v)", st.count(), c.requests, err)
				}
				if (err == nil) != (c.requests == 3) {
					t.Errorf("err = %v", err)
				}
			})
		})
	}
}

// capture wraps h, keeping the body of every request.
type capture struct {
	h      http.Handler
	mu     sync.Mutex
	bodies [][]byte
}

func (c *capture) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	c.bodies = append(c.bodies, body)
	c.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	c.h.ServeHTTP(w, r)
}

type sentRequest struct {
	Protocol forrst.Protocol `json:"protocol"`
	ID       string          `json:"id"`
	Call     struct {
		Function  string          `json:"function"`
		Version   string          `json:"version"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"call"`
	Extensions []struct {
		URN     string `json:"urn"`
		Options struct {
			Key string `json:"key"`
		} `json:"options"`
	} `json:"extensions"`
}

func (c *capture) sent(t *testing.T) []sentRequest {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []sentRequest
	for _, b := range c.bodies {
		var r sentRequest
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("request %s: %v", b, err)
		}
		out = append(out, r)
	}
	c.bodies = nil
	return out
}

func TestClientRequests(t *testing.T) {
	var runs atomic.Int32
	var s forrst.Server
	flaky(&s, "f", "UNAVAILABLE", 2, &runs,
		forrst.WithGuidance("UNAVAILABLE", forrst.RetryData{Allowed: true, Strategy: forrst.Immediate}))
	s.Register("g", func(ctx context.Context, args json.RawMessage) (any, error) { return nil, nil })
	spy := &capture{h: &s}
	srv := newServer(t, spy)
	virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
		c := &forrst.Client{URL: srv.URL, HTTPClient: hc, Strategy: noWait(5)}
		if err := c.Call(context.Background(), "f", map[string]any{"sku": "W-1"}, nil); err != nil {
			t.Fatal(err)
		}
		sent := spy.sent(t)
		if len(sent) != 3 {
			t.Fatalf("%d requests, want 3", len(sent))
		}
		ids := map[string]bool{}
		for i, r := range sent {
			if r.Protocol != (forrst.Protocol{Name: "forrst", Version: "0.1.0"}) || r.Call.Function != "f" {
				t.Errorf("request %d: %+v", i, r)
			}
			wantJSON(t, "arguments", r.Call.Arguments, `{"sku":"W-1"}`)
			if r.ID == "" || ids[r.ID] {
				t.Errorf("request %d: id %q is empty or reused", i, r.ID)
			}
			ids[r.ID] = true
			if len(r.Extensions) != 1 || r.Extensions[0].URN != urnIdempotency || r.Extensions[0].Options.Key == "" {
				t.Fatalf("request %d: extensions %+v, want one idempotency key", i, r.Extensions)
			}
			if key := r.Extensions[0].Options.Key; key != sent[0].Extensions[0].Options.Key {
				t.Errorf("request %d: key %q differs from the first attempt's %q", i, key, sent[0].Extensions[0].Options.Key)
			}
		}
		// A second call gets a key of its own.
		_ = c.Call(context.Background(), "g", nil, nil)
		if second := spy.sent(t); second[0].Extensions[0].Options.Key == sent[0].Extensions[0].Options.Key {
			t.Error("two calls share a generated key")
		}

		// A given key and version are sent as they are.
		if err := c.Call(context.Background(), "g", nil, nil, forrst.IdempotencyKey("order_123"), forrst.Version("2")); err != nil {
			t.Fatal(err)
		}
		r := spy.sent(t)[0]
		if r.Extensions[0].Options.Key != "order_123" || r.Call.Version != "2" {
			t.Errorf("key %q, version %q", r.Extensions[0].Options.Key, r.Call.Version)
		}

		// NoIdempotencyKey sends none.
		c2 := &forrst.Client{URL: srv.URL, HTTPClient: hc, NoIdempotencyKey: true}
		if err := c2.Call(context.Background(), "g", nil, nil); err != nil {
			t.Fatal(err)
		}
		if r := spy.sent(t)[0]; len(r.Extensions) != 0 {
			t.Errorf("NoIdempotencyKey sent %+v", r.Extensions)
		}

		// Mistakes of the caller are reported without a request.
		if err := c.Call(context.Background(), "g", nil, nil, forrst.IdempotencyKey("no spaces allowed")); !errors.Is(err, forrst.ErrInvalid) {
			t.Errorf("an invalid key: err = %v, want ErrInvalid", err)
		}
		if err := c.Call(context.Background(), "g", []int{1, 2}, nil); err == nil {
			t.Error("arguments that are not an object were sent")
		}
		if err := c.Call(context.Background(), "g", map[string]any{"c": make(chan int)}, nil); err == nil {
			t.Error("arguments that cannot be encoded were sent")
		}
		if n := len(spy.sent(t)); n != 0 {
			t.Errorf("%d requests for calls that should not have been sent", n)
		}
	})
}

// The client's own limits win over the server's guidance: a guidance of
// exponential 1 s asks for 1 s, then 2 s; a client that accepts at most
// 1.5 s waits once and then gives up.
func TestClientMaxRetryAfterWins(t *testing.T) {
	var runs atomic.Int32
	var s forrst.Server
	flaky(&s, "f", "UNAVAILABLE", 1000, &runs)
	srv := newServer(t, &s)
	virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
		c := &forrst.Client{URL: srv.URL, HTTPClient: hc,
			Strategy: retry.NewStandard(retry.StandardOptions{MaxRetryAfter: 1500 * time.Millisecond, MaxAttempts: 5})}
		start := time.Now()
		err := c.Call(context.Background(), "f", nil, nil)
		if !errors.Is(err, retry.ErrRetryAfterTooLong) {
			t.Fatalf("err = %v, want ErrRetryAfterTooLong", err)
		}
		var rae *retry.RetryAfterError
		if !errors.As(err, &rae) || rae.RetryAfter != 2*time.Second || rae.Max != 1500*time.Millisecond {
			t.Errorf("RetryAfterError %+v, want 2s asked, 1.5s allowed", rae)
		}
		wantWaits(t, st, time.Second)
		if time.Since(start) != time.Second {
			t.Errorf("elapsed %v, want 1s", time.Since(start))
		}
	})
}

// No wait starts that would end after the caller's deadline.
func TestClientDeadlineShorterThanTheWait(t *testing.T) {
	var runs atomic.Int32
	var s forrst.Server
	flaky(&s, "f", "RATE_LIMITED", 1000, &runs)
	srv := newServer(t, &s)
	virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
		c := &forrst.Client{URL: srv.URL, HTTPClient: hc}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		err := c.Call(ctx, "f", nil, nil)
		if !errors.Is(err, retry.ErrDeadline) || time.Since(start) != 0 || st.count() != 1 {
			t.Errorf("err %v after %v and %d requests; want ErrDeadline at once", err, time.Since(start), st.count())
		}
	})
}

// A server that never answers cannot hold the client past its deadline. A
// goroutine waiting on a socket stops a synctest bubble's clock, so this
// test runs in real time, with a short deadline.
func TestClientServerNeverAnswers(t *testing.T) {
	release := make(chan struct{})
	srv, _ := hostile(t, func(n int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release) // before the server's Close, which waits for handlers
	c := &forrst.Client{URL: srv.URL}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.Call(ctx, "f", nil, nil)
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("returned after %v, deadline 200ms", elapsed)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want context.DeadlineExceeded", err)
	}
}

// A hostile server's answers, each alone against a zero-config client in
// virtual time: the client's own limits hold whatever the answer says.
func TestClientHostileServer(t *testing.T) {
	unavailable := func(data string, extra ...string) func(int, http.ResponseWriter, *http.Request) {
		return func(n int, w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(503)
			_, _ = io.WriteString(w, failDoc("UNAVAILABLE", data, extra...))
		}
	}
	// call is what a case's call came to.
	type call struct {
		err      error
		requests int32
		took     time.Duration
		st       *stamps
	}
	type hostileCase struct {
		name    string
		handler func(int, http.ResponseWriter, *http.Request)
		noKey   bool
		out     any // what the result is decoded into; nil = none
		check   func(t *testing.T, c call)
	}
	cases := []hostileCase{
		{name: "max_attempts 1000000", handler: unavailable(`{"allowed":true,"strategy":"immediate","max_attempts":1000000}`),
			check: func(t *testing.T, c call) { // Standard: 3 attempts
				if !errors.Is(c.err, retry.ErrMaxAttempts) || errors.Is(c.err, forrst.ErrServerLimit) || c.requests != 3 {
					t.Errorf("%d requests, err %v; want the client's 3", c.requests, c.err)
				}
				for _, w := range c.st.waits() {
					if w >= time.Second {
						t.Errorf("wait %v: immediate guidance leaves only the client's own backoff", w)
					}
				}
			}},
	}

	// Waits beyond the client's MaxRetryAfter (5 min by default), whichever
	// part of the answer asks for them: the call fails at once.
	tooLong := func(name string, handler func(int, http.ResponseWriter, *http.Request)) hostileCase {
		return hostileCase{name: name, handler: handler, check: func(t *testing.T, c call) {
			if !errors.Is(c.err, retry.ErrRetryAfterTooLong) || c.requests != 1 || c.took != 0 {
				t.Errorf("%d requests in %v, err %v; want one, no wait, ErrRetryAfterTooLong", c.requests, c.took, c.err)
			}
		}}
	}
	cases = append(cases,
		tooLong("after 1000000 minutes", unavailable(`{"allowed":true,"strategy":"fixed","after":{"value":1000000,"unit":"minute"},"max_attempts":3}`)),
		tooLong("after at the overflow edge", unavailable(`{"allowed":true,"strategy":"exponential","after":{"value":153722867,"unit":"minute"}}`)),
		tooLong("rate-limit reset", unavailable(`{"allowed":true,"strategy":"immediate"}`,
			`{"urn":"urn:forrst:ext:rate-limit","data":{"limit":1,"used":1,"remaining":0,"window":{"value":1,"unit":"day"},"resets_in":{"value":86400,"unit":"second"}}}`)),
		tooLong("Retry-After header", func(n int, w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "999999999")
			unavailable(`{"allowed":true,"strategy":"immediate"}`)(n, w, r)
		}),
		tooLong("details retry_after", func(n int, w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(503)
			_, _ = io.WriteString(w, `{"protocol":`+protocolJSON+`,"id":"req_x","result":null,"errors":[{"code":"UNAVAILABLE","message":"m","details":{"retry_after":{"value":30,"unit":"day"}}}],"extensions":[{"urn":"urn:forrst:ext:retry","data":{"allowed":true}}]}`)
		}),
	)

	// Guidance the client cannot read counts as none: the table decides.
	for _, data := range []string{
		`{"allowed":true,"strategy":"linear","after":{"value":1,"unit":"second"}}`,
		`{"allowed":true,"strategy":"fixed","after":{"value":-5,"unit":"second"}}`,
		`{"allowed":true,"max_attempts":-1}`,
		`{"allowed":"yes"}`,
		`[]`,
		`null`,
	} {
		cases = append(cases, hostileCase{name: "unreadable " + data, handler: unavailable(data), check: func(t *testing.T, c call) {
			ce := wantCallError(t, c.err, "UNAVAILABLE", 503)
			if ce.FromServer || !reflect.DeepEqual(ce.Guidance, forrst.DefaultGuidance("UNAVAILABLE")) {
				t.Errorf("guidance %+v (from server %v), want the table's", ce.Guidance, ce.FromServer)
			}
			if c.requests != 3 {
				t.Errorf("%d requests, want 3", c.requests)
			}
			wantWaits(t, c.st, time.Second, 2*time.Second) // the table: exponential 1 s
		}})
	}

	var out string
	var wrongType int
	cases = append(cases,
		hostileCase{name: "unreadable guidance on a final code",
			handler: func(_ int, w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(404)
				_, _ = io.WriteString(w, failDoc("NOT_FOUND", `{"allowed":true,"strategy":"linear"}`))
			},
			check: func(t *testing.T, c call) {
				wantCallError(t, c.err, "NOT_FOUND", 404)
				if c.requests != 1 {
					t.Errorf("%d requests, want 1", c.requests)
				}
			}},
		hostileCase{name: "no guidance at all",
			handler: func(_ int, w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(502)
				_, _ = io.WriteString(w, failDoc("DEPENDENCY_ERROR", ""))
			},
			check: func(t *testing.T, c call) {
				wantCallError(t, c.err, "DEPENDENCY_ERROR", 502)
				if c.requests != 3 {
					t.Errorf("%d requests, want 3", c.requests)
				}
				wantWaits(t, c.st, 2*time.Second, 4*time.Second) // the table: exponential 2 s
			}},
		hostileCase{name: "garbage with 200",
			handler: func(_ int, w http.ResponseWriter, _ *http.Request) {
				_, _ = io.WriteString(w, `{"protocol": {"name": "forrst", "version": "0.1.0"}, "id": "x", "result": {"ok": tru`)
			},
			check: func(t *testing.T, c call) {
				var he *forrst.HTTPError
				if !errors.As(c.err, &he) || he.StatusCode != 200 || !errors.Is(c.err, forrst.ErrMalformed) {
					t.Errorf("err = %v, want an HTTPError 200 wrapping ErrMalformed", c.err)
				}
				if c.requests != 1 {
					t.Errorf("%d requests, want 1", c.requests)
				}
			}},
		hostileCase{name: "garbage with 503",
			handler: func(_ int, w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Retry-After", "2")
				w.WriteHeader(503)
				_, _ = io.WriteString(w, `<html><body>Service Unavailable</body></html>`)
			},
			check: func(t *testing.T, c call) {
				var he *forrst.HTTPError
				if !errors.As(c.err, &he) || he.StatusCode != 503 || !errors.Is(c.err, retry.ErrMaxAttempts) {
					t.Errorf("err = %v, want an HTTPError 503 after all attempts", c.err)
				}
				if c.requests != 3 {
					t.Errorf("%d requests, want 3", c.requests)
				}
				wantWaits(t, c.st, 2*time.Second, 2*time.Second)
			}},
		hostileCase{name: "garbage with 503 without a key", noKey: true,
			handler: func(_ int, w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(503)
				_, _ = io.WriteString(w, `upstream connect error`)
			},
			check: func(t *testing.T, c call) {
				if c.err == nil || c.requests != 1 {
					t.Errorf("%d requests, err %v; a request that reached the server is not repeated without a key", c.requests, c.err)
				}
			}},
		hostileCase{name: "document over the limit", out: &out,
			handler: func(_ int, w http.ResponseWriter, _ *http.Request) {
				_, _ = io.WriteString(w, `{"protocol":`+protocolJSON+`,"id":"x","result":"`)
				chunk := strings.Repeat("a", 64<<10)
				for range 40 { // 2.5 MiB
					if _, err := io.WriteString(w, chunk); err != nil {
						return
					}
				}
				_, _ = io.WriteString(w, `"}`)
			},
			check: func(t *testing.T, c call) {
				if !errors.Is(c.err, forrst.ErrTooLarge) || c.requests != 1 || out != "" {
					t.Errorf("%d requests, err %v; want one and ErrTooLarge", c.requests, c.err)
				}
			}},
		hostileCase{name: "result of the wrong type", out: &wrongType,
			handler: func(_ int, w http.ResponseWriter, _ *http.Request) {
				_, _ = io.WriteString(w, `{"protocol":`+protocolJSON+`,"id":"x","result":"not a number"}`)
			},
			check: func(t *testing.T, c call) {
				if c.err == nil || c.requests != 1 {
					t.Errorf("%d requests, err %v; want one and an error", c.requests, c.err)
				}
			}},
	)

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, n := hostile(t, tc.handler)
			virtual(t, func(t *testing.T, hc *http.Client, st *stamps) {
				cl := &forrst.Client{URL: srv.URL, HTTPClient: hc, NoIdempotencyKey: tc.noKey}
				start := time.Now()
				err := cl.Call(context.Background(), "f", nil, tc.out)
				tc.check(t, call{err, n.Load(), time.Since(start), st})
			})
		})
	}
}
