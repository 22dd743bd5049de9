package runcmd

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/retrykit/retry/cmd/retry/internal/clitest"
)

// The tests in this file give retry a terminal, a pseudo-terminal made with
// the standard library alone, and type Ctrl-C into it or hang it up. They
// check that the command gets the terminal's signal once: retry does not send
// it again. They run on Linux only, whose ioctls they use to make the
// pseudo-terminal (the BSDs' and macOS's differ); foreground.go, which they
// test, is the same on all three.
//
// A duplicate signal could go unseen: two that come before the command
// takes the first are one (the kernel keeps one pending signal of a kind),
// and retry's would come less than a millisecond after the terminal's. So
// the command these tests run spins, to take a signal at once, and a
// regression is caught most of the time (under load, less) rather than every
// time; a correct retry passes every time. TestRunCtrlCIsNotSentTwice/in_turn
// sends the terminal's SIGINT to the command and then to retry, and sees a
// second SIGINT every time.

// openPTY opens a new pseudo-terminal and returns its master side, which the
// test types into, and the terminal. posix_openpt, unlockpt and ptsname are
// /dev/ptmx and two ioctls. The master is drained of what the terminal
// writes (the echo of ^C).
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	var n uint32
	rc, err := master.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		var unlock int32
		if _, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); errno == 0 {
			_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n)))
		}
	}); err != nil || errno != 0 {
		t.Skipf("no pseudo-terminal: %v %v", err, errno)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { tty.Close() })
	go io.Copy(io.Discard, master)
	return master, tty
}

// startInTerminal starts name with args as the leader of a new session whose
// controlling terminal is tty, its standard input; it is in the terminal's
// foreground process group. Its stderr goes to a file.
func startInTerminal(t *testing.T, tty *os.File, name string, args ...string) (*exec.Cmd, clitest.FileText) {
	t.Helper()
	errOut := clitest.FileText(filepath.Join(t.TempDir(), "stderr"))
	f, err := os.Create(string(errOut))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(name, args...)
	cmd.Stdin, cmd.Stderr = tty, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, errOut
}

// spinner is trapper's script, spinning rather than sleeping.
func spinner(t *testing.T, sig syscall.Signal, exit bool) (script, started, got string) {
	t.Helper()
	script, started, got = trapper(t, sig, exit)
	script = strings.ReplaceAll(script, "sleep 0.05", ":")
	t.Cleanup(func() { killStarted(t, started) })
	return script, started, got
}

// ctrlC types Ctrl-C into the terminal.
func ctrlC(t *testing.T, master *os.File) {
	t.Helper()
	if _, err := master.Write([]byte{3}); err != nil {
		t.Fatal(err)
	}
}

// modes are the ways retry runs a command: in a process group of its own,
// where the terminal's signals reach retry alone, which passes them on, and
// in retry's, the terminal's foreground group, where they reach both.
var modes = []struct {
	name  string
	flags []string
}{{"own group", nil}, {"--foreground", []string{"--foreground"}}}

// TestRunCtrlCIsNotSentTwice: retry runs in the foreground of a terminal, and
// a Ctrl-C reaches the command once: from retry, or with --foreground from
// the terminal.
func TestRunCtrlCIsNotSentTwice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		flags []string
		typed bool
	}{
		{"typed", nil, true},
		{"typed, --foreground", []string{"--foreground"}, true},
		// The terminal's SIGINT to the foreground group, sent to the command
		// first and to retry once the command has run its trap: a SIGINT
		// from retry would then be seen, every time. Only with --foreground
		// is the command in the group the terminal signals.
		{"in turn, --foreground", []string{"--foreground"}, false},
	} {
		typed := tc.typed
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			master, tty := openPTY(t)
			script, started, got := spinner(t, syscall.SIGINT, true)
			cmd, errOut := startInTerminal(t, tty, clitest.Bin(), runArgs(append(tc.flags, "--attempts", "5"), "sh", "-c", script)...)
			clitest.WaitFor(t, "the command to start", func() bool { return len(lines(t, started)) > 0 })
			if typed {
				ctrlC(t, master)
			} else {
				pid, _ := strconv.Atoi(lines(t, started)[0])
				if err := syscall.Kill(pid, syscall.SIGINT); err != nil {
					t.Fatal(err)
				}
				clitest.WaitFor(t, "the command to catch SIGINT", func() bool { return len(lines(t, got)) > 0 })
				if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
					t.Fatal(err)
				}
			}
			if code := clitest.WaitExit(t, cmd); code != 130 {
				t.Errorf("exit status %d, want 130; stderr:\n%s", code, errOut)
			}
			if n := len(lines(t, got)); n != 1 {
				t.Errorf("the command caught SIGINT %d times, want once", n)
			}
			if n := len(lines(t, started)); n != 1 {
				t.Errorf("%d attempts, want 1", n)
			}
			if want := "retry: stopped by SIGINT during attempt 1: exit status 130"; !strings.Contains(errOut.String(), want) {
				t.Errorf("stderr %q does not say %q", errOut, want)
			}
		})
	}
}

// TestRunCtrlCThenKillAfter: a command that stays after a Ctrl-C is not sent
// SIGINT again but killed after --kill-after.
func TestRunCtrlCThenKillAfter(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			testCtrlCThenKillAfter(t, mode.flags)
		})
	}
}

func testCtrlCThenKillAfter(t *testing.T, flags []string) {
	master, tty := openPTY(t)
	script, started, got := spinner(t, syscall.SIGINT, false)
	cmd, errOut := startInTerminal(t, tty, clitest.Bin(), runArgs(append(flags, "--kill-after", "500ms"), "sh", "-c", script)...)
	clitest.WaitFor(t, "the command to start", func() bool { return len(lines(t, started)) > 0 })
	start := time.Now()
	ctrlC(t, master)
	code := clitest.WaitExit(t, cmd)
	if elapsed := time.Since(start); elapsed < 500*time.Millisecond || elapsed > 10*time.Second {
		t.Errorf("took %s, want --kill-after, 500ms, and not much more", elapsed)
	}
	if code != 128+int(syscall.SIGKILL) {
		t.Errorf("exit status %d, want %d; stderr:\n%s", code, 128+int(syscall.SIGKILL), errOut)
	}
	if n := len(lines(t, got)); n != 1 {
		t.Errorf("the command caught SIGINT %d times, want once", n)
	}
	if want := "retry: stopped by SIGINT during attempt 1: killed by SIGKILL (status 137)"; !strings.Contains(errOut.String(), want) {
		t.Errorf("stderr %q does not say %q", errOut, want)
	}
}

// TestRunSecondCtrlC: a second Ctrl-C ends retry at once, and the command
// with it, killed.
func TestRunSecondCtrlC(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			testSecondCtrlC(t, mode.flags)
		})
	}
}

func testSecondCtrlC(t *testing.T, flags []string) {
	master, tty := openPTY(t)
	script, started, got := spinner(t, syscall.SIGINT, false)
	// The kernel sends SIGHUP to the foreground group when retry, the
	// session leader, exits: the command ignores it, and only retry's
	// SIGKILL ends it.
	script = `trap "" HUP; ` + script
	cmd, errOut := startInTerminal(t, tty, clitest.Bin(), runArgs(append(flags, "--kill-after", "30s"), "sh", "-c", script)...)
	clitest.WaitFor(t, "the command to start", func() bool { return len(lines(t, started)) > 0 })
	ctrlC(t, master)
	clitest.WaitFor(t, "the command to catch the first SIGINT", func() bool { return len(lines(t, got)) > 0 })
	// Past the window in which the same signal is the first's copy: a real
	// wait, as the window runs on retry's clock, in another process. retry
	// stamps the first signal before the command can catch it, but on a
	// goroutine of its own that shows no sign of it: the 300 ms are for that
	// goroutine to have run.
	time.Sleep(copyWindow + 300*time.Millisecond)
	// Not cmd.ProcessState, which only cmd.Wait sets.
	if exitedUnwaited(cmd.Process.Pid) {
		t.Fatal("retry exited on the first Ctrl-C, though the command runs on")
	}
	ctrlC(t, master)
	clitest.WaitExit(t, cmd)
	if s := signalledBy(cmd); s != syscall.SIGINT {
		t.Errorf("retry ended with %v, want to be killed by SIGINT; stderr:\n%s", cmd.ProcessState, errOut)
	}
	checkGone(t, started)
}

// TestRunCtrlCInTheBackground: retry has a terminal but runs in the
// background (a shell's "retry ... &" with job control); a SIGINT sent to
// it is passed on.
func TestRunCtrlCInTheBackground(t *testing.T) {
	t.Parallel()
	_, tty := openPTY(t)
	script, started, got := spinner(t, syscall.SIGINT, true)
	dir := t.TempDir()
	pid, status := filepath.Join(dir, "pid"), filepath.Join(dir, "status")
	args := strings.Join(quoteAll(append([]string{clitest.Bin()}, runArgs(nil, "sh", "-c", script)...)), " ")
	shell, _ := startInTerminal(t, tty, "sh", "-c",
		fmt.Sprintf(`set -m; %s & echo $! > '%s'; wait $!; echo $? > '%s'`, args, pid, status))
	clitest.WaitFor(t, "the command to start", func() bool { return len(lines(t, started)) > 0 && len(lines(t, pid)) > 0 })
	retryPid, _ := strconv.Atoi(lines(t, pid)[0])
	if pgid, err := syscall.Getpgid(retryPid); err != nil || pgid == shell.Process.Pid {
		t.Skipf("sh -c 'set -m' gave no job control: retry is in the shell's process group %d (%v)", pgid, err)
	}
	if err := syscall.Kill(retryPid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := clitest.WaitExit(t, shell); code != 0 {
		t.Fatalf("the shell exited %d", code)
	}
	if got := lines(t, status); len(got) != 1 || got[0] != "130" {
		t.Errorf("retry's exit status %q, want 130", got)
	}
	if n := len(lines(t, got)); n != 1 {
		t.Errorf("the command caught SIGINT %d times, want once", n)
	}
}

// TestRunTerminalHangsUp: when the terminal hangs up, the command gets
// SIGHUP once: with --foreground from the kernel, which sends it to the
// foreground process group when the session leader (the shell) exits, or
// from retry, if it is the session leader, to which alone the kernel sends
// it, or if the command is in a process group of its own.
func TestRunTerminalHangsUp(t *testing.T) {
	t.Parallel()
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			testTerminalHangsUp(t, mode.flags)
		})
	}
}

func testTerminalHangsUp(t *testing.T, flags []string) {
	t.Run("under a shell", func(t *testing.T) {
		t.Parallel()
		master, tty := openPTY(t)
		script, started, got := spinner(t, syscall.SIGHUP, true)
		errFile := filepath.Join(t.TempDir(), "stderr")
		args := strings.Join(quoteAll(append([]string{clitest.Bin()}, runArgs(flags, "sh", "-c", script)...)), " ")
		shell, _ := startInTerminal(t, tty, "sh", "-c", fmt.Sprintf(`%s 2> '%s'; exit 0`, args, errFile))
		clitest.WaitFor(t, "the command to start", func() bool { return len(lines(t, started)) > 0 })
		master.Close()
		clitest.WaitExit(t, shell)
		clitest.WaitFor(t, "retry to finish", func() bool { return strings.Contains(clitest.FileText(errFile).String(), "retry: stopped by") })
		if want := "retry: stopped by SIGHUP during attempt 1: exit status 129"; !strings.Contains(clitest.FileText(errFile).String(), want) {
			t.Errorf("stderr %q does not say %q", clitest.FileText(errFile), want)
		}
		if n := len(lines(t, got)); n != 1 {
			t.Errorf("the command caught SIGHUP %d times, want once", n)
		}
	})
	t.Run("as the session leader", func(t *testing.T) {
		t.Parallel()
		master, tty := openPTY(t)
		script, started, got := spinner(t, syscall.SIGHUP, true)
		cmd, errOut := startInTerminal(t, tty, clitest.Bin(), runArgs(flags, "sh", "-c", script)...)
		clitest.WaitFor(t, "the command to start", func() bool { return len(lines(t, started)) > 0 })
		master.Close()
		if code := clitest.WaitExit(t, cmd); code != 129 {
			t.Errorf("exit status %d, want 129; stderr:\n%s", code, errOut)
		}
		if n := len(lines(t, got)); n != 1 {
			t.Errorf("the command caught SIGHUP %d times, want once", n)
		}
	})
}

// TestRunForegroundReadsTheTerminal: with --foreground, a command can read
// the terminal in whose foreground retry runs. (In a group of its own, the
// kernel would stop it with SIGTTIN until --timeout.)
func TestRunForegroundReadsTheTerminal(t *testing.T) {
	t.Parallel()
	master, tty := openPTY(t)
	out := filepath.Join(t.TempDir(), "out")
	cmd, errOut := startInTerminal(t, tty, clitest.Bin(), runArgs([]string{"--foreground", "--attempts", "1", "--timeout", "5s"},
		"sh", "-c", fmt.Sprintf(`read line; echo "$line" > '%s'`, out))...)
	if _, err := master.Write([]byte("typed\n")); err != nil {
		t.Fatal(err)
	}
	if code := clitest.WaitExit(t, cmd); code != 0 {
		t.Errorf("exit status %d, want 0; stderr:\n%s", code, errOut)
	}
	if got := lines(t, out); len(got) != 1 || got[0] != "typed" {
		t.Errorf("the command read %q from the terminal, want \"typed\"", got)
	}
}

// procState returns the state of the process pid, as /proc/PID/stat has it:
// "T" when it is stopped, "" when it is gone.
func procState(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	_, after, _ := strings.Cut(string(data), ") ")
	state, _, _ := strings.Cut(after, " ")
	return state
}

// TestRunCtrlZStopsTheCommandToo: retry is a job of a shell with job
// control; a SIGTSTP to retry, the terminal's Ctrl-Z, stops the command in
// its own process group too, and continuing retry continues it.
func TestRunCtrlZStopsTheCommandToo(t *testing.T) {
	t.Parallel()
	_, tty := openPTY(t)
	dir := t.TempDir()
	pidFile, started := filepath.Join(dir, "pid"), filepath.Join(dir, "started")
	// The command spins rather than sleeps: a shell that forks sleep with
	// vfork waits for it in state D, not T, when the group stops before the
	// exec, though the job is stopped all the same.
	script := fmt.Sprintf(`echo $$ >> '%s'; while :; do :; done`, started)
	t.Cleanup(func() { killStarted(t, started); killStarted(t, pidFile) })
	args := strings.Join(quoteAll(append([]string{clitest.Bin()}, runArgs(nil, "sh", "-c", script)...)), " ")
	// The shell stays until retry exits: if it left while retry is stopped,
	// the kernel would send retry's group, orphaned, SIGHUP.
	shell, errOut := startInTerminal(t, tty, "sh", "-c",
		fmt.Sprintf(`set -m; %s & echo $! > '%s'; while kill -0 $! 2>/dev/null; do wait $!; sleep 0.05; done`, args, pidFile))
	clitest.WaitFor(t, "the command to start", func() bool { return len(lines(t, started)) > 0 && len(lines(t, pidFile)) > 0 })
	retryPid, _ := strconv.Atoi(lines(t, pidFile)[0])
	child, _ := strconv.Atoi(lines(t, started)[0])
	if pgid, err := syscall.Getpgid(retryPid); err != nil || pgid == shell.Process.Pid {
		t.Skipf("sh -c 'set -m' gave no job control: retry is in the shell's process group %d (%v)", pgid, err)
	}
	if err := syscall.Kill(retryPid, syscall.SIGTSTP); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); procState(retryPid) != "T" || procState(child) != "T"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after SIGTSTP retry (pid %d) is in state %q, the command (pid %d) in %q; want both stopped (T); stderr:\n%s",
				retryPid, procState(retryPid), child, procState(child), errOut)
		}
	}
	if err := syscall.Kill(retryPid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	clitest.WaitFor(t, "the command to continue", func() bool { s := procState(child); return s != "T" && s != "" })
	if err := syscall.Kill(retryPid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	clitest.WaitExit(t, shell)
	clitest.WaitFor(t, "the command to end", func() bool { s := procState(child); return s == "" || s == "Z" })
}

// TestRunCtrlZWithoutJobControl: retry leads its session, where no shell
// would continue it: a Ctrl-Z stops neither retry nor its command, as the
// kernel discards it for a process group with no shell, and a Ctrl-C still
// ends the run.
func TestRunCtrlZWithoutJobControl(t *testing.T) {
	t.Parallel()
	master, tty := openPTY(t)
	script, started, _ := spinner(t, syscall.SIGINT, true)
	cmd, errOut := startInTerminal(t, tty, clitest.Bin(), runArgs(nil, "sh", "-c", script)...)
	clitest.WaitFor(t, "the command to start", func() bool { return len(lines(t, started)) > 0 })
	child, _ := strconv.Atoi(lines(t, started)[0])
	if _, err := master.Write([]byte{26}); err != nil { // Ctrl-Z
		t.Fatal(err)
	}
	// Nothing is to happen, and no event says that nothing did: retry
	// handles SIGTSTP on a goroutine and, with no shell to continue it,
	// leaves it. A passing verdict does not depend on the wait; a stop that
	// came later than it would go unseen here, but not the Ctrl-C after it,
	// which a stopped retry would not answer.
	time.Sleep(300 * time.Millisecond)
	if s, c := procState(cmd.Process.Pid), procState(child); s == "T" || c == "T" {
		t.Errorf("after a Ctrl-Z retry is in state %q and the command in %q, want neither stopped", s, c)
	}
	ctrlC(t, master)
	if code := clitest.WaitExit(t, cmd); code != 130 {
		t.Errorf("exit status %d, want 130; stderr:\n%s", code, errOut)
	}
}

// TestRunCtrlCEndsACommandStoppedByTheTerminal: in a group of its own, a
// command that reads the terminal is stopped by the kernel (SIGTTIN); retry
// says so, and points to --foreground, and a Ctrl-C still ends it at once,
// as retry follows the SIGINT it passes on with SIGCONT.
func TestRunCtrlCEndsACommandStoppedByTheTerminal(t *testing.T) {
	t.Parallel()
	master, tty := openPTY(t)
	started := filepath.Join(t.TempDir(), "started")
	t.Cleanup(func() { killStarted(t, started) })
	cmd, errOut := startInTerminal(t, tty, clitest.Bin(), runArgs([]string{"--kill-after", "30s"},
		"sh", "-c", fmt.Sprintf(`echo $$ > '%s'; read line`, started))...)
	clitest.WaitFor(t, "the command to start", func() bool { return len(lines(t, started)) > 0 })
	child, _ := strconv.Atoi(lines(t, started)[0])
	clitest.WaitFor(t, "the command to be stopped for reading the terminal", func() bool { return procState(child) == "T" })
	clitest.WaitFor(t, "retry to say why the command is stopped", func() bool {
		return strings.Contains(errOut.String(), fmt.Sprintf("retry: sh (pid %d) is stopped", child)) &&
			strings.Contains(errOut.String(), "retry run --foreground")
	})
	start := time.Now()
	ctrlC(t, master)
	if code := clitest.WaitExit(t, cmd); code != 130 {
		t.Errorf("exit status %d, want 130; stderr:\n%s", code, errOut)
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("took %s after the Ctrl-C", elapsed)
	}
}

// quoteAll quotes args for sh.
func quoteAll(args []string) []string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return q
}
