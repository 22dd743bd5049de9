package main

import (
	"strings"
	"testing"
)

// The example runs against its own server and tells the story it promises:
// two retries of the unary call, the second after the server's 200 ms
// pushback, one of the stream before its messages, none of the call that
// cannot succeed.
func TestRun(t *testing.T) {
	var out strings.Builder
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"attempt 1 failed (Unavailable), retrying in 50ms",
		"attempt 2 failed (Unavailable), retrying in 200ms",
		`answered "order 42"`,
		`received "update 3"`,
		"InvalidArgument: retry: gave up after 1 attempt",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
	if n := strings.Count(out.String(), "retrying in"); n != 3 {
		t.Errorf("%d retries announced, want 3:\n%s", n, out.String())
	}
}
