package forrst_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/retrykit/retry/internal/retrytest"
)

// The URNs, spelled out from the seed rather than taken from the package.
const (
	urnRetry       = "urn:forrst:ext:retry"
	urnRateLimit   = "urn:forrst:ext:rate-limit"
	urnIdempotency = "urn:forrst:ext:idempotency"
)

const protocolJSON = `{"name":"forrst","version":"0.1.0"}`

// requestDoc builds a raw request document calling function with args (a
// JSON object; "" for {}) and the given extension entries.
func requestDoc(id, function, args string, extensions ...string) string {
	if args == "" {
		args = "{}"
	}
	doc := `{"protocol":` + protocolJSON + `,"id":` + strconv.Quote(id) +
		`,"call":{"function":` + strconv.Quote(function) + `,"arguments":` + args + `}`
	if len(extensions) > 0 {
		doc += `,"extensions":[` + strings.Join(extensions, ",") + `]`
	}
	return doc + "}"
}

// keyExt is an idempotency extension entry with the given key.
func keyExt(key string) string {
	return `{"urn":"urn:forrst:ext:idempotency","options":{"key":` + strconv.Quote(key) + `}}`
}

// reply is one answer of a server, read as plain JSON: the package's own
// decoder is under test as well, so the wire is read without it.
type reply struct {
	Status  int
	Header  http.Header
	Body    []byte
	Members map[string]json.RawMessage // the top-level members
	Errors  []wireError
	Ext     map[string]json.RawMessage // extension data by URN
}

type wireError struct {
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Details json.RawMessage `json:"details"`
}

// code is the first error's code, or "" for a success.
func (r reply) code() string {
	if len(r.Errors) == 0 {
		return ""
	}
	return r.Errors[0].Code
}

func readReply(t *testing.T, resp *http.Response) reply {
	t.Helper()
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	r := reply{Status: resp.StatusCode, Header: resp.Header, Body: body, Ext: map[string]json.RawMessage{}}
	if err := json.Unmarshal(body, &r.Members); err != nil {
		t.Fatalf("the answer is not a JSON object: %v\n%s", err, body)
	}
	if raw, ok := r.Members["errors"]; ok {
		if err := json.Unmarshal(raw, &r.Errors); err != nil {
			t.Fatalf("errors: %v\n%s", err, body)
		}
	}
	var exts []struct {
		URN  string          `json:"urn"`
		Data json.RawMessage `json:"data"`
	}
	if raw, ok := r.Members["extensions"]; ok {
		if err := json.Unmarshal(raw, &exts); err != nil {
			t.Fatalf("extensions: %v\n%s", err, body)
		}
	}
	for _, e := range exts {
		if _, dup := r.Ext[e.URN]; dup {
			t.Errorf("extension %s appears twice:\n%s", e.URN, body)
		}
		r.Ext[e.URN] = e.Data
	}
	return r
}

// post sends body to url as a Forrst request, with extra header pairs.
func post(t *testing.T, url, body string, header ...string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return readReply(t, resp)
}

// serveDirect hands body to h in-process. It is used only where the server's
// clock must be the synctest bubble's (rate-limit windows, idempotency TTLs):
// a loopback server's goroutines live outside the bubble, in real time.
func serveDirect(t *testing.T, h http.Handler, body string, header ...string) reply {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return readReply(t, w.Result())
}

// sameJSON reports whether a and b hold the same JSON value; numbers are
// compared as written, so 60 and 60.0 differ.
func sameJSON(a, b []byte) bool {
	var x, y any
	da := json.NewDecoder(bytes.NewReader(a))
	da.UseNumber()
	db := json.NewDecoder(bytes.NewReader(b))
	db.UseNumber()
	if da.Decode(&x) != nil || db.Decode(&y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func wantJSON(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	if !sameJSON(got, []byte(want)) {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}

// newServer serves h on loopback for the rest of the test. It must be called
// outside any synctest bubble.
func newServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// hostile serves raw answers: f gets the request's number, from 1. The
// answers are JSON unless f says otherwise, and answer the request: the
// placeholder "id":"req_x" of what f writes becomes the request's id (the
// client rejects an answer to another request).
func hostile(t *testing.T, f func(n int, w http.ResponseWriter, r *http.Request)) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct{ ID string }
		_ = json.Unmarshal(body, &req)
		w.Header().Set("Content-Type", "application/json")
		f(int(n.Add(1)), &answering{w, []byte(`"id":` + strconv.Quote(req.ID))}, r)
	}))
	return srv, &n
}

// answering writes the request's id in place of the placeholder req_x.
type answering struct {
	http.ResponseWriter
	id []byte
}

func (a *answering) Write(p []byte) (int, error) {
	if _, err := a.ResponseWriter.Write(bytes.ReplaceAll(p, []byte(`"id":"req_x"`), a.id)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// failDoc is a failed response document with the given retry data (a JSON
// object; "" for no retry extension) and extra extension entries.
func failDoc(code, retryData string, extra ...string) string {
	exts := extra
	if retryData != "" {
		exts = append([]string{`{"urn":"urn:forrst:ext:retry","data":` + retryData + `}`}, extra...)
	}
	doc := `{"protocol":` + protocolJSON + `,"id":"req_x","result":null,"errors":[{"code":` + strconv.Quote(code) + `,"message":"hostile"}]`
	if len(exts) > 0 {
		doc += `,"extensions":[` + strings.Join(exts, ",") + `]`
	}
	return doc + "}"
}

// lossy serves s on loopback but loses the answers to the first drops
// requests: s handles each of them in full, then the connection is reset
// before a byte of the answer is sent. It counts the requests.
func lossy(t *testing.T, s http.Handler, drops int) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	return losing(t, s, drops, false)
}

// cutShort is lossy, but the answers it loses stop halfway through the
// document: the status line, the headers (with the whole document's
// Content-Length) and half the body are sent before the reset.
func cutShort(t *testing.T, s http.Handler, cuts int) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	return losing(t, s, cuts, true)
}

func losing(t *testing.T, s http.Handler, losses int, half bool) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		body := rec.Body.Bytes()
		if int(n.Add(1)) > losses {
			w.WriteHeader(rec.Code)
			_, _ = w.Write(body)
			return
		}
		if half {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(rec.Code)
			_, _ = w.Write(body[:len(body)/2])
		}
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		_ = buf.Flush()
		_ = conn.(*net.TCPConn).SetLinger(0) // close with RST
		_ = conn.Close()
	}))
	return srv, &n
}

// stamps is the client side's view of attempts: an http.RoundTripper around
// a real transport that records, in the bubble's virtual time, when each
// request left and the Retry-After of each answer.
type stamps struct {
	base http.RoundTripper

	mu         sync.Mutex
	at         []time.Time
	retryAfter []string
}

func (s *stamps) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	s.at = append(s.at, time.Now())
	s.mu.Unlock()
	resp, err := s.base.RoundTrip(r)
	if err == nil {
		s.mu.Lock()
		s.retryAfter = append(s.retryAfter, resp.Header.Get("Retry-After"))
		s.mu.Unlock()
	}
	return resp, err
}

// count is the number of requests sent.
func (s *stamps) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.at)
}

// waits are the times between consecutive requests.
func (s *stamps) waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var w []time.Duration
	for i := 1; i < len(s.at); i++ {
		w = append(w, s.at[i].Sub(s.at[i-1]))
	}
	return w
}

// virtual runs f in a synctest bubble with an HTTP client that keeps no idle
// connections (a goroutine waiting on a real socket is not durably blocked,
// so an idle connection would stop the bubble's clock).
func virtual(t *testing.T, f func(t *testing.T, hc *http.Client, st *stamps)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		base := &http.Transport{DisableKeepAlives: true}
		st := &stamps{base: base}
		f(t, &http.Client{Transport: st}, st)
		base.CloseIdleConnections()
	})
}

func wantWaits(t *testing.T, st *stamps, want ...time.Duration) {
	t.Helper()
	if got := st.waits(); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Errorf("waits between attempts = %v, want %v", got, want)
	}
}

// refusingDials returns a transport whose dials are refused (by a loopback
// port nothing listens on) when refuse says so of the dial's number, from
// 1, and the count of its dials.
func refusingDials(t *testing.T, refuse func(n int32) bool) (*http.Transport, *atomic.Int32) {
	t.Helper()
	dead := retrytest.DeadAddr(t)
	dials := new(atomic.Int32)
	base := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if refuse(dials.Add(1)) {
			addr = dead
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	t.Cleanup(base.CloseIdleConnections)
	return base, dials
}
