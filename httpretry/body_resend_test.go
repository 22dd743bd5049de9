package httpretry

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/retrykit/retry"
)

// TestNetHTTPsOwnResend: on every path of RoundTrip (the loop, Retries <
// 0 with and without Options), a PUT whose reused connection dies after the
// request was sent is resent by net/http itself with a body from GetBody:
// a body that fails there is the caller's failure, and one that reads well
// arrives whole.
func TestNetHTTPsOwnResend(t *testing.T) {
	var mu sync.Mutex
	served := map[string]bool{}
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		reused := served[r.RemoteAddr]
		served[r.RemoteAddr] = true
		mu.Unlock()
		if r.Method == http.MethodPut && reused {
			if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
				_ = c.Close()
			}
			return
		}
		if r.Method == http.MethodPut {
			mu.Lock()
			got = append(got, string(b))
			mu.Unlock()
		}
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name string
		tr   *Transport
	}{
		{"loop", &Transport{Strategy: noWait()}},
		{"Retries < 0", &Transport{Retries: -1}},
		{"Retries < 0 with Options", &Transport{Retries: -1, Options: []retry.Option{retry.Scope("s")}}},
	} {
		for _, broken := range []bool{true, false} {
			base := &http.Transport{}
			tc.tr.Base = base
			warm, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			resp, err := base.RoundTrip(warm)
			if err != nil {
				t.Fatal(err)
			}
			discard(resp)
			want := strings.Repeat("y", 100)
			req, _ := http.NewRequest(http.MethodPut, srv.URL, &streamBody{strings.NewReader(want)})
			req.ContentLength = 100
			req.Header.Set(IdempotencyKeyHeader, "k") // net/http resends a PUT only with one
			req.GetBody = func() (io.ReadCloser, error) {
				if broken {
					return io.NopCloser(&brokenBody{n: 10, err: io.ErrUnexpectedEOF}), nil
				}
				return io.NopCloser(&streamBody{strings.NewReader(want)}), nil
			}
			mu.Lock()
			got = nil
			mu.Unlock()
			resp, err = tc.tr.RoundTrip(req)
			discard(resp)
			mu.Lock()
			n := len(got)
			whole := n == 1 && got[0] == want
			mu.Unlock()
			switch {
			case broken && (!errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "request body failed")):
				t.Errorf("%s, broken GetBody: err = %v, want the request body's failure", tc.name, err)
			case !broken && (err != nil || !whole):
				t.Errorf("%s: err = %v, %d bodies, whole %v; want the body once, whole", tc.name, err, n, whole)
			}
			base.CloseIdleConnections()
		}
	}
}
