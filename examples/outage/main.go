// Command outage shows the request loop against a real HTTP server on
// loopback: first one request that recovers after a 503 and a 429 with
// Retry-After, then a fleet of requests during an outage, where the Standard
// strategy's retry quota stops the retries that a plain retry loop would keep
// sending to a server that is down.
//
//	go run ./examples/outage
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry"
)

// statusError is a failed HTTP response, classified for the strategies.
type statusError struct {
	code       int
	retryAfter time.Duration
}

func (e *statusError) Error() string { return "HTTP " + strconv.Itoa(e.code) }

func (e *statusError) RetryInfo() retry.Info {
	switch {
	case e.code == http.StatusTooManyRequests:
		return retry.Info{Safety: retry.Safe, Throttle: true, RetryAfter: e.retryAfter, Fault: retry.FaultClient}
	case e.code >= 500:
		return retry.Info{Fault: retry.FaultServer} // MaybeSafe: retried because the server is at fault
	}
	return retry.Info{Safety: retry.Unsafe, Fault: retry.FaultClient}
}

// get fetches url once, turning a non-2xx status into a *statusError.
func get(ctx context.Context, client *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", retry.Permanent(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err // Classify recognises timeouts and refused dials
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode/100 != 2 {
		secs, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return "", &statusError{code: resp.StatusCode, retryAfter: time.Duration(secs) * time.Second}
	}
	return string(body), nil
}

func main() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var (
		served atomic.Int64
		down   atomic.Bool
	)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := served.Add(1)
		switch {
		case down.Load():
			http.Error(w, "down", http.StatusServiceUnavailable)
		case n == 1:
			http.Error(w, "overloaded", http.StatusServiceUnavailable)
		case n == 2:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "slow down", http.StatusTooManyRequests)
		default:
			fmt.Fprint(w, "hello")
		}
	})}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String()
	client := &http.Client{Timeout: 5 * time.Second}
	ctx := context.Background()

	fmt.Println("1. One request: a 503, then a 429 asking for 1s, then success.")
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // keep the output short
			}
			return a
		},
	}))
	standard := retry.NewStandard(retry.StandardOptions{})
	start := time.Now()
	body, err := retry.DoValue(ctx, standard, func(ctx context.Context) (string, error) {
		return get(ctx, client, url)
	}, retry.Log(logger))
	fmt.Printf("   got %q, err %v, after %v\n\n", body, err, time.Since(start).Round(100*time.Millisecond))

	fmt.Println("2. The server goes down. 200 requests, each allowed 3 attempts:")
	down.Store(true)
	fleet := func(name string, s retry.Strategy) (retries int64) {
		before := served.Load()
		stopped := map[string]int{}
		for range 200 {
			_, err := retry.DoValue(ctx, s, func(ctx context.Context) (string, error) {
				return get(ctx, client, url)
			})
			switch {
			case errors.Is(err, retry.ErrQuotaExhausted):
				stopped["quota"]++
			case errors.Is(err, retry.ErrMaxAttempts):
				stopped["attempts"]++
			}
		}
		sent := served.Load() - before
		fmt.Printf("   %-34s %4d attempts (%.2fx the requests); stopped by attempts %d, by quota %d\n",
			name, sent, float64(sent)/200, stopped["attempts"], stopped["quota"])
		return sent - 200
	}
	noWait := retry.Constant(0) // no waiting, to keep the demonstration quick
	fleet("Simple (3 attempts, no quota)", &retry.Simple{Backoff: noWait})
	paid := fleet("Standard (3 attempts, quota 500)", retry.NewStandard(retry.StandardOptions{Backoff: noWait}))
	fmt.Printf("\n   The quota paid for %d retries (14 tokens each) and then let each request fail once:\n", paid)
	fmt.Println("   a server that is down sees the load of its clients, not three times it.")
}
