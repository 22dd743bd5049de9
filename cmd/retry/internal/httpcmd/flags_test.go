package httpcmd

import (
	"strings"
	"testing"

	"github.com/retrykit/retry/cmd/retry/internal/clitest"
)

func TestHTTPFlagsAfterTheURL(t *testing.T) {
	t.Parallel()
	s := newServer(t, "ok\n", 503, 503, 200)
	out, errOut, code := clitest.Run(t, "", "http", s.URL, "-v", "--attempts", "2", "-H", "X-After: yes")
	if code != 1 || out != "Service Unavailable\n" {
		t.Errorf("exit status %d, stdout %q: --attempts 2 after the URL was ignored", code, out)
	}
	if !strings.Contains(errOut, "retry: attempt 1: 503") {
		t.Errorf("stderr %q: -v after the URL was ignored", errOut)
	}
	reqs := s.requests()
	if len(reqs) != 2 || reqs[0].header.Get("X-After") != "yes" {
		t.Errorf("the server saw %d requests, X-After %q", len(reqs), reqs[0].header.Get("X-After"))
	}
}

func TestHTTPUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"http"}, "no URL"},
		{[]string{"http", "http://a/", "http://b/"}, "one URL at a time"},
		{[]string{"http", "ftp://example.com/"}, "only http and https"},
		{[]string{"http", "--attempts", "0", "http://a/"}, "--attempts must be at least 1"},
		{[]string{"http", "--timeout", "-1s", "http://a/"}, "--timeout must not be negative"},
		{[]string{"http", "--delay", "-1s", "http://a/"}, "--delay must not be negative"},
		{[]string{"http", "http://a:99999/"}, "the port must be a number from 1 to 65535"},
		{[]string{"http", "http://a:0/"}, "the port must be a number from 1 to 65535"},
		{[]string{"http", "-H", "X(: y", "http://a/"}, "want a header as 'Name: value'"},
		{[]string{"http", "-H", "X: a\r\nInjected: yes", "http://a/"}, "may not hold control characters"},
		{[]string{"http", "--max-delay", "-1s", "http://a/"}, "--max-delay must not be negative"},
		{[]string{"http", "--attempt-timeout", "-1s", "http://a/"}, "--attempt-timeout must not be negative"},
		{[]string{"http", "-H", "no colon", "http://a/"}, "want a header as 'Name: value'"},
		{[]string{"http", "--retry", "2", "--attempts", "3", "http://a/"}, "--retry N and --attempts N+1 say the same"},
		{[]string{"http", "--retry", "-1", "http://a/"}, "--retry must not be negative"},
		{[]string{"http", "-m", "1", "--attempt-timeout", "2", "http://a/"}, "say the same: give one"},
		{[]string{"http", "-I", "-d", "x", "http://a/"}, "HEAD request, which has no body"},
		{[]string{"http", "-fsZ", "http://a/"}, "unknown flag -fsZ"},
		{[]string{"http", "-d", "@/no/such/file", "http://a/"}, "no such file"},
		{[]string{"http", "-X", "BAD METHOD", "http://a/"}, "invalid method"},
		{[]string{"http", "--bogus", "http://a/"}, "unknown flag --bogus"},
	} {
		out, errOut, code := clitest.Run(t, "", tc.args...)
		if code != 2 {
			t.Errorf("%q: exit status %d, want 2", tc.args, code)
		}
		// One line says what is wrong, one points to -h: no Go error dump.
		// (A flag used wrongly also gets the usage line between them.)
		lines := 2
		if strings.Contains(tc.want, "unknown flag") {
			lines = 3
		}
		if strings.Count(errOut, "\n") != lines || !strings.Contains(errOut, "retry http: ") || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, `"retry http -h"`) {
			t.Errorf("%q: stderr %q, want the message %q and a pointer to -h", tc.args, errOut, tc.want)
		}
		if out != "" {
			t.Errorf("%q: stdout %q, want nothing", tc.args, out)
		}
	}
}

func TestHTTPHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"http", "-h"}, {"http", "http://a/", "--help"}} {
		out, _, code := clitest.Run(t, "", args...)
		if code != 0 {
			t.Errorf("%q: exit status %d, want 0", args, code)
		}
		for _, want := range []string{"usage: retry http", "--idempotency-key", "Exit status", "Examples:"} {
			if !strings.Contains(out, want) {
				t.Errorf("%q: the usage does not mention %q", args, want)
			}
		}
	}
}

// The help names every flag as it is spelled, --name or -x, never -name.
func TestHTTPHelpSpellsFlags(t *testing.T) {
	var c httpConfig
	clitest.CheckHelp(t, usage, c.flagSet())
}

// An unknown flag is named as it was typed, with the nearest flag http
// has: a curl flag retry does not have gets the one it begins with.
func TestHTTPUnknownFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--retry-delay", "2", "http://a/"}, "unknown flag --retry-delay; did you mean --retry?"},
		{[]string{"http://a/", "--retyr", "2"}, "unknown flag --retyr; did you mean --retry?"},
		{[]string{"--idempotency-kye", "http://a/"}, "unknown flag --idempotency-kye; did you mean --idempotency-key?"},
		{[]string{"--no-such-flag", "http://a/"}, "unknown flag --no-such-flag"},
		{[]string{"-fsZ", "http://a/"}, "unknown flag -fsZ"},
	} {
		clitest.CheckMisuse(t, Run, "http", "usage: retry http [flags] URL", tc.args, tc.want)
	}
}
