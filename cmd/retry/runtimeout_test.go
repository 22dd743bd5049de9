//go:build unix

package main

import (
	"strings"
	"testing"
)

// TestRunTimedOutExitStatus: when a time limit stopped the last attempt,
// retry exits 124, as timeout(1) does, so that a script can tell a command
// that hung from one that failed; --preserve-status gives the attempt's own
// status, 128+15 here, as timeout --preserve-status does.
func TestRunTimedOutExitStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		flags []string
		want  int
		says  string
	}{
		{[]string{"--attempts", "2", "--timeout", "200ms"}, 124, "timed out after 200ms"},
		{[]string{"--attempts", "2", "--timeout", "200ms", "--preserve-status"}, 143, "timed out after 200ms"},
		{[]string{"--max-time", "200ms"}, 124, "--max-time 200ms reached"},
		{[]string{"--max-time", "200ms", "--preserve-status"}, 143, "--max-time 200ms reached"},
	} {
		t.Run(strings.Join(tc.flags, " "), func(t *testing.T) {
			t.Parallel()
			_, errOut, code := runRetry(t, "", runArgs(tc.flags, "sleep", "30")...)
			if code != tc.want || !strings.Contains(errOut, tc.says) {
				t.Errorf("exit status %d, stderr %q; want %d and %q", code, errOut, tc.want, tc.says)
			}
		})
	}
	// A last attempt that failed by itself keeps its status, though an
	// earlier one timed out.
	_, errOut, code := runRetry(t, "", runArgs([]string{"--attempts", "2", "--timeout", "500ms"},
		"sh", "-c", `[ "$RETRY_ATTEMPT" = 1 ] && exec sleep 30; exit 3`)...)
	if code != 3 {
		t.Errorf("a timed-out attempt, then one that exits 3: exit status %d, want 3; stderr:\n%s", code, errOut)
	}
}

// TestRunTimeLimitMessages: no "context deadline exceeded" without the
// limit it was: the run's messages name --timeout or --max-time.
func TestRunTimeLimitMessages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		flags []string
		want  string
	}{
		// So short that every attempt's time is up as it begins.
		{[]string{"--timeout", "1ns"}, "--timeout 1ns ran out as the attempt began"},
		// Waits of about 400ms: the second attempt would begin too late.
		{[]string{"--max-time", "200ms", "--delay", "400ms", "--jitter", "none"}, "--max-time 200ms would pass before the next attempt"},
	} {
		_, errOut, _ := runRetry(t, "", append(append([]string{"run"}, tc.flags...), "--", "sh", "-c", "exit 1")...)
		if strings.Contains(errOut, "deadline") || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: stderr %q, want %q and no bare deadline", tc.flags, errOut, tc.want)
		}
	}
}
