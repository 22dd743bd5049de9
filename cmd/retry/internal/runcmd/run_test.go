//go:build unix

package runcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retrykit/retry/cmd/retry/internal/cli"

	"github.com/retrykit/retry/cmd/retry/internal/clitest"
)

// TestMain builds the retry command, which the tests run as a user would.
func TestMain(m *testing.M) {
	os.Exit(clitest.Main(m))
}

// fast keeps the waits between attempts tiny.
var fast = []string{"--delay", "1ms", "--max-delay", "5ms"}

// runArgs is "run", the fast flags, extra flags, "--" and the command.
func runArgs(flags []string, command ...string) []string {
	args := append([]string{"run"}, fast...)
	args = append(args, flags...)
	return append(append(args, "--"), command...)
}

// counter returns a shell script that counts its runs in a file in dir,
// prints "attempt N" on stdout and "warning N" on stderr, and exits with
// the status status(N) says, as shell arithmetic on $n. It also returns
// a function that reads the count.
func counter(t *testing.T, status string) (script string, count func() int) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "count")
	script = fmt.Sprintf(`n=$(cat '%[1]s' 2>/dev/null || echo 0); n=$((n+1)); echo $n > '%[1]s'; `+
		`echo "attempt $n"; echo "warning $n" >&2; exit $((%[2]s))`, file, status)
	count = func() int {
		data, err := os.ReadFile(file)
		if errors.Is(err, os.ErrNotExist) {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(bytes.TrimSpace(data)) == 0 {
			return 0 // being written
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			t.Fatalf("count file: %v", err)
		}
		return n
	}
	return script, count
}

// lines returns the lines of the file at path, none if it does not exist.
func lines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(data))
}

func TestRunSucceedsAfterFailures(t *testing.T) {
	t.Parallel()
	script, count := counter(t, "n < 3 ? 1 : 0") // fails twice, then succeeds
	out, errOut, code := clitest.Run(t, "", runArgs(nil, "sh", "-c", script)...)
	if code != 0 {
		t.Fatalf("exit status %d, want 0; stderr:\n%s", code, errOut)
	}
	if n := count(); n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}
	if want := "attempt 1\nattempt 2\nattempt 3\n"; out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
	// The command's own stderr, and a line from retry for each retried
	// failure; the delay is jittered.
	want := regexp.MustCompile(`^warning 1\nretry: attempt 1/3 failed: exit status 1; next in [0-9.]+(µs|ms|s)\n` +
		`warning 2\nretry: attempt 2/3 failed: exit status 1; next in [0-9.]+(µs|ms|s)\nwarning 3\n$`)
	if !want.MatchString(errOut) {
		t.Errorf("stderr %q, want it to match %s", errOut, want)
	}
}

// --quiet leaves the command's stderr alone, without lines from retry.
func TestRunQuietLeavesTheCommandsStderr(t *testing.T) {
	t.Parallel()
	script, _ := counter(t, "n < 3 ? 1 : 0")
	_, errOut, code := clitest.Run(t, "", runArgs([]string{"-q"}, "sh", "-c", script)...)
	if want := "warning 1\nwarning 2\nwarning 3\n"; code != 0 || errOut != want {
		t.Errorf("exit status %d, stderr %q; want 0 and the command's own %q", code, errOut, want)
	}
}

func TestRunAttempts(t *testing.T) {
	t.Parallel()
	for _, attempts := range []int{1, 2, 5} {
		t.Run(strconv.Itoa(attempts), func(t *testing.T) {
			t.Parallel()
			script, count := counter(t, "1")
			_, errOut, code := clitest.Run(t, "", runArgs([]string{"--attempts", strconv.Itoa(attempts)}, "sh", "-c", script)...)
			if code != 1 {
				t.Errorf("exit status %d, want 1", code)
			}
			if n := count(); n != attempts {
				t.Errorf("%d attempts, want %d", n, attempts)
			}
			want := fmt.Sprintf("retry: giving up after %d attempts: exit status 1\n", attempts)
			if attempts == 1 {
				want = "retry: giving up after 1 attempt: exit status 1\n"
			}
			if !strings.HasSuffix(errOut, want) {
				t.Errorf("stderr %q, want it to end with %q", errOut, want)
			}
		})
	}
}

func TestRunOnExit(t *testing.T) {
	t.Parallel()
	t.Run("retried", func(t *testing.T) {
		t.Parallel()
		script, count := counter(t, "3")
		_, errOut, code := clitest.Run(t, "", runArgs([]string{"--on-exit", "3"}, "sh", "-c", script)...)
		if code != 3 || count() != 3 {
			t.Errorf("exit status %d after %d attempts, want 3 after 3; stderr:\n%s", code, count(), errOut)
		}
	})
	t.Run("not retried", func(t *testing.T) {
		t.Parallel()
		script, count := counter(t, "4")
		_, errOut, code := clitest.Run(t, "", runArgs([]string{"--on-exit", "3", "--on-exit", "5,6"}, "sh", "-c", script)...)
		if code != 4 || count() != 1 {
			t.Errorf("exit status %d after %d attempts, want 4 after 1", code, count())
		}
		if want := "retry: exit status 4 is not retried (--on-exit 3,5,6)\n"; !strings.HasSuffix(errOut, want) {
			t.Errorf("stderr %q, want it to end with %q", errOut, want)
		}
	})
	t.Run("success after a retried status", func(t *testing.T) {
		t.Parallel()
		script, count := counter(t, "n == 1 ? 75 : 0")
		_, errOut, code := clitest.Run(t, "", runArgs([]string{"--on-exit", "75"}, "sh", "-c", script)...)
		if code != 0 || count() != 2 {
			t.Errorf("exit status %d after %d attempts, want 0 after 2; stderr:\n%s", code, count(), errOut)
		}
	})
}

func TestRunPassesStdinThrough(t *testing.T) {
	t.Parallel()
	out, errOut, code := clitest.Run(t, "hello\n", "run", "--", "cat")
	if code != 0 || out != "hello\n" {
		t.Errorf("echo hello | retry run -- cat: exit status %d, stdout %q; stderr:\n%s", code, out, errOut)
	}
}

func TestRunSharesStdinBetweenAttempts(t *testing.T) {
	t.Parallel()
	// Each attempt reads one line; the second finds the line the first left.
	script := `read line; echo "got $line"; [ "$line" = two ]`
	out, errOut, code := clitest.Run(t, "one\ntwo\nthree\n", runArgs(nil, "sh", "-c", script)...)
	if code != 0 || out != "got one\ngot two\n" {
		t.Errorf("exit status %d, stdout %q, want 0 and two attempts; stderr:\n%s", code, out, errOut)
	}
}

func TestRunVerboseAndQuiet(t *testing.T) {
	t.Parallel()
	t.Run("verbose", func(t *testing.T) {
		t.Parallel()
		script, _ := counter(t, "n < 2 ? 1 : 0")
		_, errOut, code := clitest.Run(t, "", runArgs([]string{"-v"}, "sh", "-c", script)...)
		if code != 0 {
			t.Fatalf("exit status %d", code)
		}
		for _, want := range []string{"retry: attempt 1/3 failed: exit status 1; next in ", "retry: attempt 2: succeeded"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("stderr %q does not contain %q", errOut, want)
			}
		}
	})
	t.Run("quiet", func(t *testing.T) {
		t.Parallel()
		_, errOut, code := clitest.Run(t, "", runArgs([]string{"--quiet"}, "sh", "-c", "exit 7")...)
		if code != 7 || errOut != "" {
			t.Errorf("exit status %d, stderr %q; want 7 and nothing", code, errOut)
		}
	})
}

func TestRunJitter(t *testing.T) {
	t.Parallel()
	for _, j := range []string{"none", "full", "equal", "decorrelated"} {
		script, count := counter(t, "n < 3 ? 1 : 0")
		_, errOut, code := clitest.Run(t, "", runArgs([]string{"--jitter", j}, "sh", "-c", script)...)
		if code != 0 || count() != 3 {
			t.Errorf("--jitter %s: exit status %d after %d attempts; stderr:\n%s", j, code, count(), errOut)
		}
	}
}

func TestRunUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run"}, "no command to run"},
		{[]string{"run", "--"}, "no command to run"},
		{[]string{"run", "--attempts", "0", "--", "true"}, "--attempts 0 (no limit) needs --max-time"},
		{[]string{"run", "--attempts", "-1", "--max-time", "1s", "--", "true"}, "--attempts must not be negative"},
		{[]string{"run", "--max-time", "-1s", "--", "true"}, "--max-time must not be negative"},
		{[]string{"run", "--attempts", "many", "--", "true"}, `invalid value "many" for --attempts`},
		{[]string{"run", "--delay", "-1s", "--", "true"}, "--delay must not be negative"},
		{[]string{"run", "--delay", "soon", "--", "true"}, "want a duration such as 250ms"},
		{[]string{"run", "--max-delay", "-1", "--", "true"}, "--max-delay must not be negative"},
		{[]string{"run", "--timeout", "-5s", "--", "true"}, "--timeout must not be negative"},
		{[]string{"run", "--kill-after", "-5s", "--", "true"}, "--kill-after must not be negative"},
		{[]string{"run", "-k", "-5s", "--", "true"}, "--kill-after must not be negative"}, // timeout(1)'s -k
		{[]string{"run", "--jitter", "lots", "--", "true"}, "want none, full, equal or decorrelated"},
		{[]string{"run", "--on-exit", "0", "--", "true"}, "want exit statuses from 1 to 255"},
		{[]string{"run", "--on-exit", "1,x", "--", "true"}, "want exit statuses from 1 to 255"},
		{[]string{"run", "-v", "-q", "--", "true"}, "cannot be used together"},
		{[]string{"run", "--bogus", "--", "true"}, "unknown flag --bogus"},
	} {
		out, errOut, code := clitest.Run(t, "", tc.args...)
		if code != 2 {
			t.Errorf("%q: exit status %d, want 2", tc.args, code)
		}
		if !strings.Contains(errOut, "retry run: ") || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, `"retry run -h"`) {
			t.Errorf("%q: stderr %q, want the message %q and a pointer to -h", tc.args, errOut, tc.want)
		}
		if out != "" {
			t.Errorf("%q: stdout %q, want nothing", tc.args, out)
		}
	}
}

func TestRunHelp(t *testing.T) {
	t.Parallel()
	for _, flag := range []string{"-h", "--help"} {
		out, _, code := clitest.Run(t, "", "run", flag)
		if code != 0 {
			t.Errorf("retry run %s: exit status %d, want 0", flag, code)
		}
		for _, want := range []string{"usage: retry run", "--attempts", "--on-exit", "--kill-after", "shared",
			"foreground process group", "--foreground", "group of its own", "SIGHUP", "126", "Examples:"} {
			if !strings.Contains(out, want) {
				t.Errorf("retry run %s: the usage does not mention %q", flag, want)
			}
		}
	}
}

func TestRunSecondsAsDurations(t *testing.T) {
	t.Parallel()
	script, count := counter(t, "n < 2 ? 1 : 0")
	_, errOut, code := clitest.Run(t, "", "run", "--delay", "0.001", "--max-delay", "1", "--", "sh", "-c", script)
	if code != 0 || count() != 2 {
		t.Errorf("exit status %d after %d attempts; stderr:\n%s", code, count(), errOut)
	}
}

// Each attempt learns its number and the limit from its environment, and
// a variable of the same name in retry's own environment does not leak in.
func TestRunAttemptEnvironment(t *testing.T) {
	t.Setenv("RETRY_ATTEMPT", "stale")
	out, errOut, code := clitest.Run(t, "", runArgs([]string{"--attempts", "3"},
		"sh", "-c", `echo "$RETRY_ATTEMPT/$RETRY_MAX_ATTEMPTS"; exit 1`)...)
	if code != 1 {
		t.Fatalf("exit status %d, want 1; stderr:\n%s", code, errOut)
	}
	if want := "1/3\n2/3\n3/3\n"; out != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
}

// --attempts 0 with --max-time retries until the time is up, and starts no
// attempt after it.
func TestRunMaxTimeBoundsUnlimitedAttempts(t *testing.T) {
	t.Parallel()
	begin := time.Now()
	// 2s leave time for more than 3 attempts even when the machine is busy
	// (an attempt forks a shell).
	_, errOut, code := clitest.Run(t, "", runArgs([]string{"--attempts", "0", "--max-time", "2s"}, "sh", "-c", "exit 1")...)
	took := time.Since(begin)
	// The time may run out between attempts (the last one's status, 1) or
	// during one (stopped, 124 as timeout(1)).
	if code != 1 && code != 124 {
		t.Errorf("exit status %d, want 1 or 124; stderr:\n%s", code, errOut)
	}
	if n := strings.Count(errOut, " failed: "); n <= 3 {
		t.Errorf("%d retried attempts in 2s with waits of at most 5ms, want more than the default 3; stderr:\n%s", n, errOut)
	}
	if took > 10*time.Second {
		t.Errorf("the run took %v, want about 2s", took)
	}
	if !strings.Contains(errOut, "retry: attempt 1 failed: ") || strings.Contains(errOut, "attempt 1/") {
		t.Errorf("stderr %q, want attempts numbered without a limit", errOut)
	}
	// The message names the limit: reached during an attempt, or one that
	// would pass before the next.
	if !strings.Contains(errOut, "--max-time 2s reached") && !strings.Contains(errOut, "--max-time 2s would pass") {
		t.Errorf("stderr %q does not say that --max-time ran out", errOut)
	}
}

// An attempt still running when --max-time is up is stopped, and the run
// ends saying why.
func TestRunMaxTimeStopsARunningAttempt(t *testing.T) {
	t.Parallel()
	begin := time.Now()
	_, errOut, code := clitest.Run(t, "", runArgs([]string{"--max-time", "500ms"}, "sleep", "30")...)
	if took := time.Since(begin); took > 10*time.Second {
		t.Errorf("the run took %v, want about 500ms", took)
	}
	if code != 124 {
		t.Errorf("exit status %d, want 124 (timed out)", code)
	}
	if want := "retry: --max-time 500ms reached after 1 attempt: "; !strings.Contains(errOut, want) {
		t.Errorf("stderr %q does not say %q", errOut, want)
	}
}

// An attempt whose time ran out (--max-time, --timeout) just as it began is
// not a command that cannot run: it ends with the time's error, uncounted,
// where it ended the run with "cannot run" and status 126.
func TestAttemptBegunOutOfTimeIsNotAStartError(t *testing.T) {
	var out, errOut strings.Builder
	r := &runner{c: runConfig{argv: []string{"true"}, attempts: 3}, std: cli.Stdio{In: strings.NewReader(""), Out: &out, Err: &errOut}}
	actx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	err := r.attempt(context.Background(), actx)
	var se *startError
	if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &se) || r.attempts != 0 {
		t.Fatalf("err %v (a start error: %v), %d attempts counted; want the deadline and none", err, errors.As(err, &se), r.attempts)
	}
}

// The help names every flag as it is spelled, --name or -x, never -name.
func TestRunHelpSpellsFlags(t *testing.T) {
	var c runConfig
	clitest.CheckHelp(t, usage, c.flagSet())
}

// An unknown flag is named as it was typed, with the nearest flag run has.
func TestRunUnknownFlag(t *testing.T) {
	for _, tc := range []struct{ flag, want string }{
		{"--atempts", "unknown flag --atempts; did you mean --attempts?"},
		{"-kill-afer", "unknown flag -kill-afer; did you mean --kill-after?"},
		{"--preserve", "unknown flag --preserve; did you mean --preserve-status?"},
		{"--no-such-flag", "unknown flag --no-such-flag"},
		{"--signal", "unknown flag --signal"},
	} {
		clitest.CheckMisuse(t, Run, "run", "usage: retry run [flags] -- COMMAND [ARGS...]", []string{tc.flag, "1", "--", "true"}, tc.want)
	}
}
