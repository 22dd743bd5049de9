package httpretry

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/retrykit/retry"
)

// relay is a service that answers each request with what a call to next
// through a retrying Transport got: a middle tier.
func relay(t *testing.T, next string) http.Handler {
	client := &http.Client{Transport: &Transport{Strategy: noWait()}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), "GET", next, nil)
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		w.WriteHeader(resp.StatusCode)
	})
}

// Across services: a front end's retries reach a middle tier behind Handler
// marked as retries, and the middle tier's own calls leave their retries to
// the front end. Against a back end that always fails, the back end sees 3
// requests for the front end's first attempt (unmarked: the middle tier
// retries it) and 1 for each of its 2 retries: 5, where the same tiers
// without Handler send 9.
func TestHandlerPropagatesTheCallersRetries(t *testing.T) {
	for _, tc := range []struct {
		name    string
		wrap    func(http.Handler) http.Handler
		backend int
	}{
		{"with Handler", Handler, 5},
		{"without", func(h http.Handler) http.Handler { return h }, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			back := newServer(t, failFirst(100, 503))
			middle := newServer(t, func(_ int, w http.ResponseWriter, r *http.Request) {
				tc.wrap(relay(t, back.URL)).ServeHTTP(w, r)
			})
			front := &http.Client{Transport: &Transport{Strategy: noWait()}}
			resp, _ := get(t, front, middle.URL)
			if resp.StatusCode != 503 || len(middle.Requests()) != 3 || len(back.Requests()) != tc.backend {
				t.Fatalf("status %d; middle saw %d requests, back end %d, want 3 and %d",
					resp.StatusCode, len(middle.Requests()), len(back.Requests()), tc.backend)
			}
			if got := middle.Requests()[2].Header.Get(RetryAttemptHeader); got != "3" {
				t.Fatalf("the third request to the middle tier says Retry-Attempt %q", got)
			}
		})
	}
}

// A caller's claim reaches only its own request, and can only make it retry
// less: a huge attempt number marks the request like any retry, garbage and
// first attempts mark nothing, and the mark is gone for work the handler
// leaves running after it returns.
func TestHandlerTrustsNoMoreThanTheRequest(t *testing.T) {
	for value, want := range map[string]bool{
		"2": true, "3": true, "1000000": true, "9999999999": true,
		"": false, "1": false, "0": false, "-5": false, "+3": false, " 3": false, "3.0": false,
		"abc": false, "99999999999": false, "2, 3": false,
	} {
		r, _ := http.NewRequest("GET", "http://example.invalid/", nil)
		if value != "" {
			r.Header.Set(RetryAttemptHeader, value)
		}
		if got := Resent(r); got != want {
			t.Errorf("Resent with Retry-Attempt %q = %v, want %v", value, got, want)
		}
	}
	r, _ := http.NewRequest("GET", "http://example.invalid/", nil)
	r.Header.Add(RetryAttemptHeader, "2")
	r.Header.Add(RetryAttemptHeader, "3")
	if Resent(r) {
		t.Error("two Retry-Attempt lines read as a retry")
	}

	var during, after bool
	left := make(chan context.Context, 1)
	h := Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		during = retry.CallerRetries(r.Context())
		left <- context.WithoutCancel(r.Context()) // a background task's
	}))
	req, _ := http.NewRequest("GET", "http://example.invalid/", nil)
	req.Header.Set(RetryAttemptHeader, "1000000")
	h.ServeHTTP(discardWriter{}, req)
	after = retry.CallerRetries(<-left)
	if !during || after {
		t.Fatalf("marked during the request: %v; after it, in a background task: %v", during, after)
	}
	if retry.CallerRetries(req.Context()) {
		t.Fatal("the caller's own request context was marked")
	}
}

type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (discardWriter) WriteHeader(int)             {}
