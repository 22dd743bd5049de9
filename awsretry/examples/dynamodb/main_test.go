package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestRun runs the example against its loopback service and checks each
// phase's outcome.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"a throttle, then a success:        ok after 2 requests",
		"a validation error:                failed after 1 requests",
		"500s under the caller's retry.Do:  3 requests for 3 outer attempts",
		"refused by the open circuit, 0 requests sent",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output has no %q:\n%s", want, out.String())
		}
	}
}
