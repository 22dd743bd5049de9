// Command forrst runs a small Forrst server with a flaky function and a
// payment function, and a client that calls them through the retry engine,
// following the server's retry guidance. Run it with
//
//	go run ./examples/forrst
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/forrst"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "forrst example:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		inventoryCalls atomic.Int32
		charges        atomic.Int32
	)
	server := &forrst.Server{}
	// inventory.get is down for its first two calls. The server attaches the
	// default guidance for UNAVAILABLE: exponential from 1 s, 5 retries.
	server.Register("inventory.get", func(ctx context.Context, args json.RawMessage) (any, error) {
		if inventoryCalls.Add(1) <= 2 {
			return nil, forrst.Fail(forrst.CodeUnavailable, "warehouse database is restarting")
		}
		return map[string]int{"widgets": 42}, nil
	})
	// payments.charge charges, then fails before answering the first time:
	// the caller cannot know whether the charge happened.
	server.Register("payments.charge", func(ctx context.Context, args json.RawMessage) (any, error) {
		n := charges.Add(1)
		return map[string]any{"charge": n, "status": "captured"}, nil
	})
	server.Register("users.get", func(ctx context.Context, args json.RawMessage) (any, error) {
		return nil, forrst.Fail(forrst.CodeNotFound, "no such user")
	})

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var dropped atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recorder{header: http.Header{}}
		server.ServeHTTP(rec, r)
		if r.URL.Path == "/lossy" && dropped.Add(1) == 1 {
			// The answer is lost on the way back: the connection dies.
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.(*net.TCPConn).SetLinger(0)
				conn.Close()
			}
			return
		}
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.status)
		w.Write(rec.body)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String()

	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	client := &forrst.Client{URL: url, Options: []retry.Option{retry.Log(logger)}}
	ctx := context.Background()

	fmt.Println("1. inventory.get fails twice with UNAVAILABLE; the server's guidance says exponential from 1 s:")
	start := time.Now()
	var stock map[string]int
	err = client.Call(ctx, "inventory.get", nil, &stock)
	fmt.Printf("   result %v, err %v, after %d calls and %v\n\n", stock, err, inventoryCalls.Load(), time.Since(start).Round(10*time.Millisecond))

	fmt.Println("2. payments.charge: the first answer is lost after the charge; the retry carries the same")
	fmt.Println("   idempotency key, so the server replays the stored result instead of charging again:")
	lossy := &forrst.Client{URL: url + "/lossy", Strategy: &retry.Simple{Backoff: retry.Constant(100 * time.Millisecond)}}
	var receipt map[string]any
	err = lossy.Call(ctx, "payments.charge", map[string]int{"cents": 1000}, &receipt)
	fmt.Printf("   result %v, err %v; the card was charged %d time(s)\n\n", receipt, err, charges.Load())

	fmt.Println("3. users.get fails with NOT_FOUND; the guidance says {\"allowed\": false}, so no retry:")
	err = client.Call(ctx, "users.get", map[string]string{"id": "u_1"}, nil)
	var ce *forrst.CallError
	if errors.As(err, &ce) {
		fmt.Printf("   %s (HTTP %d), retry allowed: %v\n", ce.Err.Code, ce.StatusCode, ce.Guidance.Allowed)
	}
	return nil
}

// recorder holds a response so that the example can decide to lose it.
type recorder struct {
	header http.Header
	status int
	body   []byte
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) WriteHeader(status int)      { r.status = status }
func (r *recorder) Write(b []byte) (int, error) { r.body = append(r.body, b...); return len(b), nil }
