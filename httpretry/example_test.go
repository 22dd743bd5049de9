package httpretry_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/httpretry"
)

// flaky answers 503 to the first n requests, then 200.
func flaky(n int32) *httptest.Server {
	var calls atomic.Int32
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= n {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "%s %s after %d attempts", r.Method, r.URL.Path, calls.Load())
	}))
}

// The zero Transport retries idempotent requests with the Standard
// strategy: 3 attempts, jittered exponential backoff, a retry quota per host.
func Example() {
	srv := flaky(2)
	defer srv.Close()

	client := &http.Client{Transport: &httpretry.Transport{}}
	resp, err := client.Get(srv.URL + "/users")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))
	// Output: 200 GET /users after 3 attempts
}

// A POST is repeated only when it carries an Idempotency-Key, which the
// Transport can add, the same on every attempt. The server must honour it.
func Example_idempotencyKey() {
	srv := flaky(1)
	defer srv.Close()

	client := &http.Client{Transport: &httpretry.Transport{
		IdempotencyKey: true,
		Strategy:       &retry.Simple{Backoff: retry.Constant(10 * time.Millisecond)},
	}}
	resp, err := client.Post(srv.URL+"/payments", "application/json", strings.NewReader(`{"amount": 10}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))
	// Output: 200 POST /payments after 2 attempts
}

// Limiters add HTTP-aware limits beside the strategy's: here at most three
// retries in all, of which at most one after a 502 or 503 response, and a
// header that tells the server why it sees the request again.
func Example_limiter() {
	srv := flaky(5)
	defer srv.Close()

	var attempts int
	client := &http.Client{Transport: &httpretry.Transport{
		Strategy: &retry.Simple{MaxAttempts: 10, Backoff: retry.Constant(0)},
		Limiter: httpretry.All(
			httpretry.MaxErrors(3),
			httpretry.MaxErrorResponses(1, 502, 503),
			httpretry.LimiterFunc(func(failures []httpretry.Failure, next *http.Request) bool {
				next.Header.Set("X-Retry-Reason", failures[len(failures)-1].Kind.String())
				return true
			}),
		),
		OnAttempt: func(httpretry.Attempt) { attempts++ },
	}}
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "after", attempts, "attempts")
	// Output: 503 after 2 attempts
}

// A Schedule lists the waits as an iterator; it is a retry.Backoff, so it
// goes to the strategy.
func Example_schedule() {
	schedule := httpretry.ExponentialBackoff(100 * time.Millisecond).Cap(time.Second)
	var waits []string
	for n := 1; n <= 6; n++ {
		waits = append(waits, schedule.Delay(n, 0).String())
	}
	fmt.Println(strings.Join(waits, " "))

	strategy := retry.NewStandard(retry.StandardOptions{Backoff: httpretry.WaitFor(time.Millisecond)})
	client := &http.Client{Transport: &httpretry.Transport{Strategy: strategy}}
	srv := flaky(1)
	defer srv.Close()
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output:
	// 0s 100ms 200ms 400ms 800ms 1s
	// 200
}
