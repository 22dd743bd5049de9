package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/retrykit/retry"
)

// TestRun runs the example without its waits and checks that it prints the
// spans and metrics the README shows.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out, "0", &retry.Simple{Backoff: retry.Constant(0)}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"Name": "GET /orders"`, `"Name": "retry.attempt"`, `"Key": "http.request.resend_count"`,
		`"Name": "retry.attempt_failed"`, `"Name": "retry.wait"`, `"Name": "retry.give_up"`,
		`"Name": "retry.client.attempts"`, `"Name": "retry.client.retries"`, `"Name": "retry.client.give_ups"`,
		`"Name": "retry.client.call.retries"`, `"Name": "retry.client.retry.delay"`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output has no %s", want)
		}
	}
}
