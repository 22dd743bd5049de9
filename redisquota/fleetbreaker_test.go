package redisquota_test

import (
	"context"
	crand "crypto/rand"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/redisquota"
)

// serverFault is a failure the breakers count: the service's fault.
type serverFault struct{}

func (serverFault) Error() string         { return "503" }
func (serverFault) RetryInfo() retry.Info { return retry.Info{Fault: retry.FaultServer} }

// processes returns n FleetBreakers named name on addr, standing for n
// processes (see ownClients).
func processes(t testing.TB, addr, name string, n int, opts retry.BreakerOptions, o redisquota.FleetOptions) []*redisquota.FleetBreaker {
	t.Helper()
	return ownClients(t, addr, n, func(c redis.UniversalClient) (*redisquota.FleetBreaker, error) {
		return redisquota.NewFleetBreakerWith(c, name, opts, o)
	})
}

// ownClients returns n values that mk makes, each on a Redis client of its own
// on addr (its own connections), standing for n processes; they and their
// clients are closed when t ends.
func ownClients[T interface{ Close() error }](t testing.TB, addr string, n int, mk func(redis.UniversalClient) (T, error)) []T {
	t.Helper()
	fs := make([]T, n)
	for i := range fs {
		c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 2, MaxRetries: -1})
		t.Cleanup(func() { c.Close() })
		f, err := mk(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		fs[i] = f
	}
	return fs
}

// uniqueName is a fleet's name no earlier run (go test -count) used.
func uniqueName(prefix string) string { return prefix + "-" + crand.Text()[:8] }

// states counts the processes whose circuit in scope is in each state.
func states(fs []*redisquota.FleetBreaker, scope string) (closed, open, halfOpen int) {
	for _, f := range fs {
		switch f.Breaker().State(scope) {
		case retry.BreakerClosed:
			closed++
		case retry.BreakerOpen:
			open++
		default:
			halfOpen++
		}
	}
	return closed, open, halfOpen
}

// waitFor polls cond every 5 ms until it holds or within has passed, and
// returns how long it took.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// fail reports n counted failures through b in scope.
func fail(t testing.TB, b *retry.Breaker, scope string, n int) {
	t.Helper()
	for range n {
		tk, err := b.Allow(scope)
		if err != nil {
			t.Fatalf("Allow: %v", err)
		}
		tk.Done(context.Background(), serverFault{})
	}
}

// TestFleetBreakerOpensFleetWide: 1,000 processes (200 under -race or
// -short), each calling once a second, none of which sees MinAttempts (20)
// of its own in its window: the fleet's counted failures open one circuit,
// in Redis within 1 s of the 20th failure, and every process sees it open.
// Then, while the service stays down, the fleet sends at most half the
// offered load (probes only: far less).
func TestFleetBreakerOpensFleetWide(t *testing.T) {
	needRedis(t)
	n := 1000
	if raceEnabled || testing.Short() {
		n = 200
	}
	name := uniqueName("opens")
	fs := processes(t, sharedRedis, name, n, retry.BreakerOptions{}, redisquota.FleetOptions{Timeout: upTimeout})
	const scope = "payments"
	for _, f := range fs { // each process has its scope: State reports scopes seen
		tk, _ := f.Breaker().Allow(scope)
		tk.Release()
	}
	var (
		counted, made atomic.Int64
		tripped       atomic.Int64 // when the 20th failure was counted, ns since start
		wg            sync.WaitGroup
	)
	start := time.Now()
	stop := make(chan struct{})
	for i, f := range fs {
		wg.Go(func() {
			next := start.Add(time.Duration(i) * time.Second / time.Duration(n))
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Until(next)):
				}
				next = next.Add(time.Second)
				tk, err := f.Breaker().Allow(scope)
				if err != nil {
					continue
				}
				made.Add(1)
				tk.Done(context.Background(), serverFault{})
				if !tk.Probe() && counted.Add(1) == retry.DefaultBreakerMinAttempts {
					tripped.Store(int64(time.Since(start)))
				}
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	waitFor(t, 5*time.Second, "20 failures counted", func() bool { return tripped.Load() != 0 })
	admin := client(t)
	waitFor(t, 5*time.Second, "the circuit opens in Redis", func() bool {
		return admin.HGet(t.Context(), redisquota.CircuitKey(name, scope), "st").Val() == "1"
	})
	inRedis := time.Since(start) - time.Duration(tripped.Load())
	waitFor(t, 5*time.Second, "every process sees the circuit open", func() bool {
		closed, _, _ := states(fs, scope)
		return closed == 0
	})
	lag := time.Since(start) - time.Duration(tripped.Load())
	// The fleet's circuit opens in Redis within 1 s; each process sees it
	// at its next sync, FlushInterval later, which a loaded 2-core machine
	// running a thousand processes' loops stretches: generous there.
	if inRedis > time.Second {
		t.Errorf("the fleet's circuit opened %v after the 20th failure; want within 1 s", inRedis)
	}
	if lag > 2*time.Second {
		t.Errorf("the circuit opened in every process %v after the 20th failure; want within 1 s and a sync", lag)
	}
	// The outage goes on: the fleet's attempts are probes now.
	before := made.Load()
	time.Sleep(2 * time.Second)
	load := float64(made.Load()-before) / (2 * float64(n))
	t.Logf("%d processes: open in Redis %v and in every process %v after the rule was met; load while open %.2fx the offered",
		n, inRedis.Round(time.Millisecond), lag.Round(time.Millisecond), load)
	if load > 0.5 {
		t.Errorf("while open the fleet sent %.2fx the offered load; want at most 0.5x", load)
	}
}

// TestFleetBreakerProbesFleetWide: with Probes 2, an open circuit whose
// spell has ended lets two attempts through in the whole fleet of 40
// processes, however many ask; a failed probe reopens it everywhere for
// twice the spell (OpenFor is set), and two successes close it everywhere.
func TestFleetBreakerProbesFleetWide(t *testing.T) {
	needRedis(t)
	name := uniqueName("probes")
	const spell = 300 * time.Millisecond
	opts := retry.BreakerOptions{MinAttempts: 5, OpenFor: spell, Probes: 2}
	fs := processes(t, sharedRedis, name, 40, opts, redisquota.FleetOptions{Timeout: upTimeout})
	const scope = "s"
	for _, f := range fs {
		tk, _ := f.Breaker().Allow(scope)
		tk.Release()
	}
	fail(t, fs[0].Breaker(), scope, 5) // one process's failures, the fleet's circuit
	waitFor(t, 2*time.Second, "open everywhere", func() bool { c, _, _ := states(fs, scope); return c == 0 })

	// probe has every process ask, again and again for 300 ms, and returns
	// the probes' tickets.
	probe := func() []retry.BreakerTicket {
		var (
			mu      sync.Mutex
			tickets []retry.BreakerTicket
			wg      sync.WaitGroup
		)
		for _, f := range fs {
			wg.Go(func() {
				for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
					tk, err := f.Breaker().Allow(scope)
					if err != nil {
						continue
					}
					if !tk.Probe() {
						t.Errorf("an attempt through a circuit that is not closed was no probe")
					}
					mu.Lock()
					tickets = append(tickets, tk)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return tickets
	}
	time.Sleep(spell)
	round := probe()
	if len(round) != 2 {
		t.Fatalf("%d probes let through in the fleet; want Probes, 2", len(round))
	}
	round[0].Done(context.Background(), nil)
	round[1].Done(context.Background(), serverFault{})
	d := waitFor(t, 2*time.Second, "open everywhere again after a failed probe", func() bool {
		_, open, _ := states(fs, scope)
		return open == len(fs)
	})
	t.Logf("reopened everywhere in %v", d)

	time.Sleep(2 * spell) // the doubled spell
	round = probe()
	if len(round) != 2 {
		t.Fatalf("second round: %d probes let through in the fleet; want 2", len(round))
	}
	for _, tk := range round {
		tk.Done(context.Background(), nil)
	}
	d = waitFor(t, 2*time.Second, "closed everywhere after two successful probes", func() bool {
		c, _, _ := states(fs, scope)
		return c == len(fs)
	})
	t.Logf("closed everywhere in %v", d)
}

// TestFleetBreakerProbeHolderDies: a process that took the fleet's only
// probe place and died (it never reports, nor closes) holds it for the
// spell and the grace (FlushInterval + Timeout), no longer: then another
// process's attempt is the probe.
func TestFleetBreakerProbeHolderDies(t *testing.T) {
	needRedis(t)
	name := uniqueName("holder")
	const spell = 200 * time.Millisecond
	o := redisquota.FleetOptions{Timeout: 500 * time.Millisecond, FlushInterval: 100 * time.Millisecond}
	grace := o.Timeout + o.FlushInterval
	fs := processes(t, sharedRedis, name, 2, retry.BreakerOptions{MinAttempts: 5, OpenFor: spell}, o)
	dead, alive := fs[0], fs[1]
	for _, f := range fs {
		tk, _ := f.Breaker().Allow("")
		tk.Release()
	}
	fail(t, alive.Breaker(), "", 5)
	waitFor(t, 2*time.Second, "open everywhere", func() bool { c, _, _ := states(fs, ""); return c == 0 })
	time.Sleep(spell)
	var tk retry.BreakerTicket
	waitFor(t, time.Second, "the doomed process gets the probe", func() bool {
		var err error
		tk, err = dead.Breaker().Allow("")
		return err == nil
	})
	if !tk.Probe() {
		t.Fatal("not a probe")
	}
	granted := time.Now()
	_ = tk // never reported: the process is dead
	var d time.Duration
	waitFor(t, spell+grace+2*time.Second, "another process probes", func() bool {
		tk, err := alive.Breaker().Allow("")
		if err != nil {
			return false
		}
		d = time.Since(granted)
		tk.Done(context.Background(), nil)
		return true
	})
	if d < spell+grace-50*time.Millisecond {
		t.Errorf("the dead process's place was handed out again after %v; want no sooner than spell + grace, %v", d, spell+grace)
	}
	t.Logf("the place came back %v after it was granted (spell + grace = %v)", d.Round(time.Millisecond), spell+grace)
	waitFor(t, 2*time.Second, "closed after the live probe", func() bool {
		return alive.Breaker().State("") == retry.BreakerClosed
	})
}

// TestFleetBreakerRedisGone kills Redis (SIGKILL) under three processes:
// no call waits, each process falls back to its own circuit (one whose own
// failures open it opens alone), logs it once, and when Redis is back on
// the same port each rejoins the fleet's circuit (closed) and logs it once.
func TestFleetBreakerRedisGone(t *testing.T) {
	r := startRedis(t)
	name := uniqueName("gone")
	var l logs
	o := redisquota.FleetOptions{Timeout: 100 * time.Millisecond, ReconnectMax: 100 * time.Millisecond, Logger: slog.New(&l)}
	fs := processes(t, r.Addr, name, 3, retry.BreakerOptions{MinAttempts: 5, OpenFor: time.Minute}, o)
	for _, f := range fs {
		tk, _ := f.Breaker().Allow("")
		tk.Release()
	}
	_ = r.Kill()
	waitFor(t, 2*time.Second, "every process falls back", func() bool {
		for _, f := range fs {
			if f.Shared() {
				return false
			}
		}
		return true
	})
	start := time.Now()
	fail(t, fs[0].Breaker(), "", 5)
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("5 attempts took %v with Redis gone; the request path must not wait on it", d)
	}
	if st := fs[0].Breaker().State(""); st == retry.BreakerClosed {
		t.Errorf("the failing process's own circuit is %v; want open", st)
	}
	if c, _, _ := states(fs[1:], ""); c != 2 {
		t.Errorf("the other processes' circuits opened without Redis")
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "every process rejoins, closed", func() bool {
		c, _, _ := states(fs, "")
		return c == 3 && fs[0].Shared() && fs[1].Shared() && fs[2].Shared()
	})
	if n, m := l.count("unavailable"), l.count("rejoined"); n != 3 || m != 3 {
		t.Errorf("logged %d fallbacks and %d rejoins; want one each per process:\n%s", n, m, &l)
	}
}

// TestFleetBreakerPausedRedis pauses Redis (CLIENT PAUSE) while the fleet's
// circuit is open and its spell ends: the attempt that asks for a probe's
// place waits for at most Timeout, then the process probes on its own.
func TestFleetBreakerPausedRedis(t *testing.T) {
	r := startRedis(t)
	name := uniqueName("paused")
	const spell = 200 * time.Millisecond
	fs := processes(t, r.Addr, name, 1, retry.BreakerOptions{MinAttempts: 5, OpenFor: spell}, redisquota.FleetOptions{})
	b := fs[0].Breaker()
	fail(t, b, "", 5)
	waitFor(t, 2*time.Second, "the fleet's circuit opens", func() bool { return b.State("") != retry.BreakerClosed })
	admin := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer admin.Close()
	time.Sleep(spell)
	if err := admin.Do(t.Context(), "CLIENT", "PAUSE", 3000).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	tk, err := b.Allow("")
	if d := time.Since(start); d > time.Second {
		t.Errorf("Allow took %v with Redis paused; want about Timeout (100 ms)", d)
	}
	if err != nil || !tk.Probe() || fs[0].Shared() {
		t.Errorf("Allow = %v, probe %v, shared %v: want the process's own probe, Redis given up on", err, tk.Probe(), fs[0].Shared())
	}
	tk.Done(context.Background(), nil)
	if st := b.State(""); st != retry.BreakerClosed {
		t.Errorf("after its own probe succeeded the circuit is %v; want closed", st)
	}
	start = time.Now()
	if err := fs[0].Close(); err != nil {
		t.Error(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Close took %v with Redis paused", d)
	}
}
