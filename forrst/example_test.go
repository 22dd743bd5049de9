package forrst_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/forrst"
)

// A server attaches the retry extension's default guidance to a failure:
// UNAVAILABLE is retried with exponential backoff from 1 s, up to 5 times,
// and the 503 carries the first wait as Retry-After.
func ExampleServer() {
	var server forrst.Server
	server.Register("orders.create", func(ctx context.Context, args json.RawMessage) (any, error) {
		return nil, forrst.Fail(forrst.CodeUnavailable, "Service temporarily unavailable")
	})
	srv := httptest.NewServer(&server)
	defer srv.Close()

	request := `{
		"protocol": {"name": "forrst", "version": "0.1.0"},
		"id": "req_123",
		"call": {"function": "orders.create", "arguments": {"sku": "W-1", "quantity": 2}}
	}`
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(request))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	doc, err := forrst.DecodeResponse(resp.Body, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.StatusCode, "Retry-After:", resp.Header.Get("Retry-After"))
	fmt.Println(doc.ID, doc.Errors[0].Code, doc.Errors[0].Message)
	ext, _ := doc.Extension(forrst.URNRetry)
	fmt.Println(string(ext.Data))
	guidance, _ := ext.Retry()
	fmt.Println(guidance.Wait(1), guidance.Wait(2), guidance.Wait(3))
	// Output:
	// 503 Retry-After: 1
	// req_123 UNAVAILABLE Service temporarily unavailable
	// {"allowed":true,"strategy":"exponential","after":{"value":1,"unit":"second"},"max_attempts":5}
	// 1s 2s 4s
}

// A client retries a flaky function until it succeeds. Here the server's
// guidance says "retry immediately" and the client's own backoff is zero, so
// the example does not wait; with the default guidance and strategy the
// client would wait 1 s, then 2 s.
func ExampleClient() {
	var calls atomic.Int32
	var server forrst.Server
	server.Register("inventory.get", func(ctx context.Context, args json.RawMessage) (any, error) {
		if calls.Add(1) <= 2 {
			return nil, forrst.Fail(forrst.CodeUnavailable, "warehouse database is restarting")
		}
		return map[string]int{"widgets": 42}, nil
	}, forrst.WithGuidance(forrst.CodeUnavailable, forrst.RetryData{Allowed: true, Strategy: forrst.Immediate, MaxAttempts: 3}))
	srv := httptest.NewServer(&server)
	defer srv.Close()

	client := &forrst.Client{
		URL:      srv.URL,
		Strategy: &retry.Simple{Backoff: retry.Constant(0), MaxAttempts: 5},
	}
	var stock struct {
		Widgets int `json:"widgets"`
	}
	err := client.Call(context.Background(), "inventory.get", map[string]string{"sku": "W-1"}, &stock)
	fmt.Println(stock.Widgets, err, "after", calls.Load(), "calls")
	// Output: 42 <nil> after 3 calls
}

// A failure the server will not let the client retry stops at once; the
// error gives the code.
func ExampleCallError() {
	var server forrst.Server
	server.Register("users.get", func(ctx context.Context, args json.RawMessage) (any, error) {
		return nil, forrst.Fail(forrst.CodeNotFound, "no such user")
	})
	srv := httptest.NewServer(&server)
	defer srv.Close()

	client := &forrst.Client{URL: srv.URL}
	err := client.Call(context.Background(), "users.get", map[string]int{"id": 7}, nil)
	var callErr *forrst.CallError
	if errors.As(err, &callErr) {
		fmt.Println(callErr.Err.Code, callErr.StatusCode, callErr.Guidance.Allowed, callErr.Err.Message)
	}
	fmt.Println(errors.Is(err, retry.ErrNotRetryable))
	// Output:
	// NOT_FOUND 404 false no such user
	// true
}
