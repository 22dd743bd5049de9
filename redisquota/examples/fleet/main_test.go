package main

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/retrykit/retry/redisquota/internal/fleet"
)

// TestMain runs main instead of the tests when TestUnreachableRedis starts
// this binary as the command, or when run starts it as a worker (as it
// would, were the address not checked): a worker must not run the tests.
func TestMain(m *testing.M) {
	if os.Getenv("FLEET_EXAMPLE_TEST_MAIN") == "1" || fleet.IsWorker() {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestUnreachableRedis: -redis with an address where nothing answers is an
// error that names the address and says it cannot be reached, with no
// result printed and a non-zero exit, not a "fleet quota" line made of the
// processes' local fallback quotas.
func TestUnreachableRedis(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // a loopback port nothing listens on

	var out strings.Builder
	err = run(t.Context(), []string{"-redis", addr}, &out)
	if err == nil || !strings.Contains(err.Error(), "cannot reach Redis at "+addr) {
		t.Errorf("run = %v, want an error saying Redis at %s cannot be reached", err, addr)
	}
	if out.Len() != 0 {
		t.Errorf("run printed %q", out.String())
	}

	cmd := exec.Command(os.Args[0], "-redis", addr)
	cmd.Env = append(os.Environ(), "FLEET_EXAMPLE_TEST_MAIN=1")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if exit, ok := err.(*exec.ExitError); !ok || exit.ExitCode() == 0 {
		t.Errorf("the command ended with %v, want a non-zero exit", err)
	}
	if !strings.Contains(stderr.String(), "cannot reach Redis at "+addr) {
		t.Errorf("stderr %q does not say that Redis at %s cannot be reached", stderr.String(), addr)
	}
	if strings.Contains(stdout.String(), "fleet") {
		t.Errorf("a result was printed: %q", stdout.String())
	}
}
