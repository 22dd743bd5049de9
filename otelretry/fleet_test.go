package otelretry_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/otelretry"
	"github.com/retrykit/retry/redisquota"
)

// redisServer starts a redis-server of the test's own on a free loopback
// port and returns its address. Without redis-server on PATH the test
// skips, unless RETRYKIT_REQUIRE_SERVERS is set, as CI sets it.
func redisServer(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("RETRYKIT_REQUIRE_SERVERS") != "" {
			t.Fatalf("redis-server: %v", err)
		}
		t.Skip("redis-server not found on PATH (apt-get install redis-server)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", t.TempDir(), "--protected-mode", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); c.Ping(t.Context()).Err() != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s did not answer", addr)
		}
	}
	return addr
}

// TestFleetBreakerStatus: a process observes the state of a circuit its
// fleet shares through Redis (redisquota.FleetBreaker), in each scope it
// has seen, as it does a local breaker's: open when another process's
// failures opened it, though this one never failed; half-open once the
// spell has passed; closed after its own probe succeeded. Real time: the
// fleet syncs over loopback sockets, which virtual time cannot wait on;
// the waits are bounded generously.
func TestFleetBreakerStatus(t *testing.T) {
	addr := redisServer(t)
	const spell = 300 * time.Millisecond
	opts := retry.BreakerOptions{MinAttempts: 3, OpenFor: spell}
	fleet := func() *redisquota.FleetBreaker {
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { c.Close() })
		f, err := redisquota.NewFleetBreaker(c, "otel", opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	other, this := fleet(), fleet()

	r := newRig(t)
	inst := r.inst(otelretry.WithBreaker("payments", this.Breaker()))
	defer inst.Close()
	s := retry.NewStandard(retry.StandardOptions{MaxAttempts: 1})
	call := func(b *retry.Breaker, op func(context.Context) error, opts ...retry.Option) error {
		return retry.Do(context.Background(), s, op, append(opts, retry.Scope("api"), retry.WithBreaker(b))...)
	}
	succeed := func(context.Context) error { return nil }
	fail := func(context.Context) error { return retry.Transient(errBoom) }
	status := func() map[string]string { return breakerMetrics(r.metrics(t)) }
	waitStatus := func(state string) {
		t.Helper()
		want := circuit("api", "payments", state)
		for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			got := status()
			delete(got, "retry.client.breaker.refusals{retry.first_attempt=true,retry.scope=api}")
			if equal(got, want) {
				return
			}
			if time.Now().After(deadline) {
				wantMetrics(t, got, want)
				t.FailNow()
			}
		}
	}

	if err := call(this.Breaker(), succeed, inst.Option()); err != nil {
		t.Fatal(err)
	}
	waitStatus(otelretry.CircuitClosed)

	// Another process's failures open the fleet's circuit: with this
	// one's success in the window, it takes seven (FailureRate's test).
	for range 7 {
		_ = call(other.Breaker(), fail)
	}
	waitStatus(otelretry.CircuitOpen)
	if err := call(this.Breaker(), succeed, inst.Option()); !errors.Is(err, retry.ErrCircuitOpen) {
		t.Fatalf("a call through the fleet's open circuit: %v, want refused", err)
	}

	waitStatus(otelretry.CircuitHalfOpen)
	// This process's attempt is the fleet's probe; its success closes the
	// circuit for the fleet.
	if err := call(this.Breaker(), succeed, inst.Option()); err != nil {
		t.Fatalf("the probe: %v", err)
	}
	waitStatus(otelretry.CircuitClosed)
	for deadline := time.Now().Add(3 * time.Second); other.Breaker().State("api") != retry.BreakerClosed; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the other process's circuit is %v; want closed by this one's probe", other.Breaker().State("api"))
		}
	}
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
