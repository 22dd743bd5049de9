package httpretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/retrykit/retry"
)

// Inside work whose caller retries, a failed response is returned after one
// attempt for the caller to judge (the Report says it was left to the
// caller), while a reset the caller could not see is still retried here; an
// Independent Transport retries as if alone.
func TestCallerRetriesLeavesResponsesToTheCaller(t *testing.T) {
	ctx, done := retry.WithCallerRetries(context.Background())
	defer done()

	srv := newServer(t, failFirst(100, 503))
	resp, err, rep := send(t, &Transport{Strategy: noWait()}, ctx, "GET", srv.URL, nil)
	discard(resp)
	if err != nil || resp.StatusCode != 503 || len(srv.requests()) != 1 || rep.Reason != retry.ErrOuterLoop {
		t.Fatalf("err %v, %d requests, report %+v", err, len(srv.requests()), rep)
	}

	srv = newServer(t, failFirst(100, 503))
	resp, err, rep = send(t, &Transport{Strategy: noWait(), Independent: true}, ctx, "GET", srv.URL, nil)
	discard(resp)
	if err != nil || resp.StatusCode != 503 || len(srv.requests()) != 3 {
		t.Fatalf("independent: err %v, %d requests, report %+v", err, len(srv.requests()), rep)
	}

	reset := resetServer(t, 1)
	resp, err, rep = send(t, &Transport{Strategy: noWait()}, ctx, "GET", reset.URL, nil)
	discard(resp)
	if err != nil || resp.StatusCode != 200 || rep.Attempts != 2 {
		t.Fatalf("reset: err %v, report %+v", err, rep)
	}
}

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
			if resp.StatusCode != 503 || len(middle.requests()) != 3 || len(back.requests()) != tc.backend {
				t.Fatalf("status %d; middle saw %d requests, back end %d, want 3 and %d",
					resp.StatusCode, len(middle.requests()), len(back.requests()), tc.backend)
			}
			if got := middle.requests()[2].header.Get(RetryAttemptHeader); got != "3" {
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

// An application's own loop around a client whose Transport retries, as a
// new user writes it: the loop marks its attempts, so a service that always
// answers 503 gets one request per attempt of the loop, 3 and not 3 × 3,
// even though the operation turns the 503 into an error of its own that says
// nothing about retrying; a reset that the Transport alone can fix is still
// fixed inside one attempt of the loop. Told Unmarked, or with an
// Independent Transport, the layers multiply.
func TestApplicationLoopAroundATransportDoesNotMultiply(t *testing.T) {
	get := func(client *http.Client, url string, wrap func(error) error) func(context.Context) error {
		return func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			discard(resp)
			if resp.StatusCode != http.StatusOK {
				return wrap(fmt.Errorf("GET %s: %s", url, resp.Status))
			}
			return nil
		}
	}
	plain := func(err error) error { return err }
	loop := &retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)}
	ctx := context.Background()

	srv := newServer(t, failFirst(100, 503))
	err := retry.Do(ctx, loop, get(&http.Client{Transport: &Transport{}}, srv.URL, plain))
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 3 || len(srv.requests()) != 3 {
		t.Fatalf("defaults: %v, %d requests, want 3 attempts and 3 requests", err, len(srv.requests()))
	}

	srv = newServer(t, failFirst(100, 503))
	err = retry.Do(ctx, loop, get(&http.Client{Transport: &Transport{Strategy: noWait()}}, srv.URL, retry.Transient), retry.Unmarked())
	if !errors.As(err, &re) || re.Attempts != 3 || len(srv.requests()) != 9 {
		t.Fatalf("unmarked: %v, %d requests, want 9", err, len(srv.requests()))
	}

	srv = newServer(t, failFirst(100, 503))
	err = retry.Do(ctx, loop, get(&http.Client{Transport: &Transport{Strategy: noWait(), Independent: true}}, srv.URL, retry.Transient))
	if !errors.As(err, &re) || re.Attempts != 3 || len(srv.requests()) != 9 {
		t.Fatalf("independent: %v, %d requests, want 9", err, len(srv.requests()))
	}

	reset := resetServer(t, 1)
	attempts := 0
	err = retry.Do(ctx, loop, func(ctx context.Context) error {
		attempts++
		return get(&http.Client{Transport: &Transport{Strategy: noWait()}}, reset.URL, plain)(ctx)
	})
	if err != nil || attempts != 1 || len(reset.requests()) != 2 {
		t.Fatalf("reset: %v after %d attempts of the loop, %d requests; want the Transport to fix it", err, attempts, len(reset.requests()))
	}
}
