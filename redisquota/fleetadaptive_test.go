package redisquota_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/redisquota"
)

// Failures an Adaptive counts: the service's fault, and an attempt that
// timed out (a black-holed replica's).
var (
	errDown    = retry.WithInfo(errors.New("503"), retry.Info{Safety: retry.Safe, Fault: retry.FaultServer})
	errTimeout = retry.WithInfo(errors.New("timed out"), retry.Info{Safety: retry.Safe, Timeout: true, Fault: retry.FaultServer})
)

// fleetSyncs is how often the tests' processes sync: often, so that a
// test waits little for the fleet's views.
const fleetSyncs = 20 * time.Millisecond

// adaptives returns n FleetAdaptives named name on addr, standing for n
// processes (see ownClients).
func adaptives(t testing.TB, addr, name string, n int, opts retry.AdaptiveOptions, o redisquota.FleetOptions) []*redisquota.FleetAdaptive {
	t.Helper()
	if o.FlushInterval == 0 {
		o.FlushInterval = fleetSyncs
	}
	return ownClients(t, addr, n, func(c redis.UniversalClient) (*redisquota.FleetAdaptive, error) {
		return redisquota.NewFleetAdaptiveWith(c, name, opts, o)
	})
}

// settle waits until every process has reported what it counted so far
// and taken a view that holds every other's report: each has applied two
// syncs after the call (the first may have read its counts before it),
// twice.
func settle(t testing.TB, fs ...*redisquota.FleetAdaptive) {
	t.Helper()
	for range 2 {
		seen := make([]uint64, len(fs))
		for i, f := range fs {
			seen[i] = redisquota.Applied(f)
		}
		waitFor(t, 5*time.Second, "every process syncs twice", func() bool {
			for i, f := range fs {
				if redisquota.Applied(f) < seen[i]+2 {
					return false
				}
			}
			return true
		})
	}
}

// failAttempt makes one attempt in scope that fails with err, and returns
// the strategy's refusal of a retry, nil if it grants one.
func failAttempt(t testing.TB, s retry.Strategy, scope string, err error) error {
	t.Helper()
	tok, aerr := s.AcquireInitialToken(scope)
	if aerr != nil {
		t.Fatal(aerr)
	}
	next, refused := s.RefreshToken(tok, err)
	if refused == nil {
		_ = s.(retry.Releaser).ReleaseToken(next)
	}
	return refused
}

// succeedAttempt makes one attempt in scope that succeeds after took.
func succeedAttempt(t testing.TB, s retry.Strategy, scope string, took time.Duration) {
	t.Helper()
	tok, err := s.AcquireInitialToken(scope)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(took)
	if err := s.RecordSuccess(tok); err != nil {
		t.Fatal(err)
	}
}

// TestNewFleetAdaptive: a nil client (untyped or typed) or an empty name
// is an error, not a panic; Close may be called twice, and the strategy
// goes on deciding on its own evidence after it.
func TestNewFleetAdaptive(t *testing.T) {
	if _, err := redisquota.NewFleetAdaptive(nil, "x", retry.AdaptiveOptions{}); err == nil {
		t.Error("NewFleetAdaptive(nil client) did not fail")
	}
	var typed *redis.Client
	if _, err := redisquota.NewFleetAdaptive(typed, "x", retry.AdaptiveOptions{}); err == nil {
		t.Error("NewFleetAdaptive(a nil *redis.Client) did not fail")
	}
	if _, err := redisquota.NewFleetBreaker(typed, "x", retry.BreakerOptions{}); err == nil {
		t.Error("NewFleetBreaker(a nil *redis.Client) did not fail")
	}
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	if _, err := redisquota.NewFleetAdaptive(c, "", retry.AdaptiveOptions{}); err == nil {
		t.Error("NewFleetAdaptive with an empty name did not fail")
	}
	f, err := redisquota.NewFleetAdaptive(c, "x", retry.AdaptiveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := f.Strategy()
	if _, ok := s.(*retry.Adaptive); !ok {
		t.Errorf("Strategy is a %T; want a *retry.Adaptive", s)
	}
	if err := f.Close(); err != nil {
		t.Error(err)
	}
	if err := f.Close(); err != nil {
		t.Error(err)
	}
	if err := failAttempt(t, s, "", errDown); err != nil {
		t.Errorf("a first failure after Close: %v, want a retry", err)
	}
	if err := retry.Do(context.Background(), s, func(context.Context) error { return nil }); err != nil {
		t.Errorf("a success after Close: %v", err)
	}
}

// TestFleetAdaptiveStopsAnOutageAsOne: 20 processes each see one failure
// of a service that fails everything, which alone would not stop a
// process's retries (an unbound Adaptive retries its second failure too);
// after the fleet has synced, every process refuses its next retry.
func TestFleetAdaptiveStopsAnOutageAsOne(t *testing.T) {
	needRedis(t)
	fs := adaptives(t, sharedRedis, uniqueName("outage"), 20, retry.AdaptiveOptions{}, redisquota.FleetOptions{Timeout: upTimeout})
	const scope = "payments"
	for _, f := range fs {
		if err := failAttempt(t, f.Strategy(), scope, errDown); err != nil {
			t.Fatalf("a process's first failure: %v, want a retry", err)
		}
	}
	settle(t, fs...)
	for i, f := range fs {
		if err := failAttempt(t, f.Strategy(), scope, errDown); !errors.Is(err, retry.ErrBudgetExhausted) {
			t.Errorf("process %d's second failure, the fleet's 21st in a row: %v, want ErrBudgetExhausted", i, err)
		}
	}
	alone := retry.NewAdaptive(retry.AdaptiveOptions{})
	for n := range 2 {
		if err := failAttempt(t, alone, scope, errDown); err != nil {
			t.Fatalf("an unbound Adaptive's failure %d: %v, want a retry", n+1, err)
		}
	}
	// Through retry.Do: the operation is called once, its failure not
	// retried.
	calls := 0
	err := retry.Do(context.Background(), fs[0].Strategy(), func(context.Context) error { calls++; return errDown }, retry.Scope(scope))
	if calls != 1 || !errors.Is(err, retry.ErrBudgetExhausted) {
		t.Errorf("retry.Do: %d calls, %v; want 1 call and ErrBudgetExhausted", calls, err)
	}
}

// TestFleetAdaptiveRetriesABlackHoledReplica: a process whose attempt
// times out (a black-holed replica) has timed no success of its own, but
// the fleet's successes, timed in five other processes, answer in their
// usual time: the timeout is retried. An unbound Adaptive with the same
// evidence refuses it.
func TestFleetAdaptiveRetriesABlackHoledReplica(t *testing.T) {
	needRedis(t)
	opts := retry.AdaptiveOptions{Window: 2 * time.Second}
	fs := adaptives(t, sharedRedis, uniqueName("blackhole"), 6, opts, redisquota.FleetOptions{Timeout: upTimeout})
	quiet, busy := fs[0], fs[1:]
	const scope = "orders"
	succeedAttempt(t, quiet.Strategy(), scope, 0) // the scope, and no probe of its own
	var wg sync.WaitGroup
	for _, f := range busy {
		wg.Go(func() {
			// Successes over 600 ms, several tenths of the window, each
			// taking about 2 ms: the probes the first success arms time
			// most of them.
			for end := time.Now().Add(600 * time.Millisecond); time.Now().Before(end); time.Sleep(30 * time.Millisecond) {
				err := retry.Do(context.Background(), f.Strategy(), func(context.Context) error {
					time.Sleep(2 * time.Millisecond)
					return nil
				}, retry.Scope(scope))
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	settle(t, fs...)
	if err := failAttempt(t, quiet.Strategy(), scope, errTimeout); err != nil {
		t.Errorf("a timeout while the fleet's successes answer in their usual time: %v, want a retry", err)
	}
	alone := retry.NewAdaptive(opts)
	succeedAttempt(t, alone, scope, 0)
	if err := failAttempt(t, alone, scope, errTimeout); !errors.Is(err, retry.ErrNotRetryable) {
		t.Errorf("an unbound Adaptive's timeout with no latency evidence: %v, want ErrNotRetryable", err)
	}
}

// TestFleetAdaptiveDeadProcessExpires: a process that fails 20 times and
// dies (its loop stops: it never reports again, as Redis sees a killed
// process) holds the fleet's retries back for a window (500 ms), no longer:
// then the survivor's failure is retried. Once no process reports the
// scope, its key is gone within two windows. With the streak signal off,
// the window's evidence alone (client-side throttling) decides; with it
// on, the fleet's failures in a row end with the window too, though the
// survivor goes on syncing.
func TestFleetAdaptiveDeadProcessExpires(t *testing.T) {
	t.Parallel() // its waits overlap the others'
	needRedis(t)
	for _, streak := range []int{-1, 0} {
		t.Run(fmt.Sprintf("streak %d", streak), func(t *testing.T) {
			t.Parallel()
			const window = 500 * time.Millisecond
			opts := retry.AdaptiveOptions{Window: window, Streak: streak, Rand: func() float64 { return 0 }}
			name := uniqueName("dead")
			fs := adaptives(t, sharedRedis, name, 2, opts, redisquota.FleetOptions{Timeout: upTimeout})
			dead, alive := fs[0], fs[1]
			const scope = "s"
			// The survivor's success reaches the fleet before the doomed
			// process's failures, so that they are the fleet's streak.
			succeedAttempt(t, alive.Strategy(), scope, 0)
			settle(t, alive)
			for range 20 {
				_ = failAttempt(t, dead.Strategy(), scope, errDown)
			}
			settle(t, fs...)
			if err := failAttempt(t, alive.Strategy(), scope, errDown); !errors.Is(err, retry.ErrBudgetExhausted) {
				t.Fatalf("with the doomed process's 20 failures in the window: %v, want ErrBudgetExhausted", err)
			}
			dead.Close()
			died := time.Now()
			time.Sleep(window + window/5)
			settle(t, alive)
			if err := failAttempt(t, alive.Strategy(), scope, errDown); err != nil {
				t.Errorf("%v after the process died: %v, want a retry (its evidence out of the window)", time.Since(died).Round(time.Millisecond), err)
			}

			admin := client(t)
			key := redisquota.EvidenceKey(name, scope)
			if ttl := admin.PTTL(t.Context(), key).Val(); ttl <= 0 || ttl > 2*window {
				t.Errorf("the scope's key lives %v more; want at most two windows, %v", ttl, 2*window)
			}
			alive.Close()
			waitFor(t, 2*window+time.Second, "the key expires", func() bool {
				return admin.Exists(t.Context(), key).Val() == 0
			})
		})
	}
}

// TestFleetAdaptiveRedisAway: Redis paused (CLIENT PAUSE), slow (a proxy
// holding its answers for longer than Timeout) or killed (SIGKILL) under
// three processes whose fleet has a streak of 3: no attempt waits on
// Redis; each process logs one Warn record, and once its view is stale
// decides on its own evidence (its second failure is retried, which the
// fleet's streak would refuse); when Redis is back each rejoins, logs one
// Info record, and decides on the fleet's evidence again.
func TestFleetAdaptiveRedisAway(t *testing.T) {
	t.Parallel() // its waits overlap the others'
	for _, away := range []string{"paused", "slow", "killed"} {
		t.Run(away, func(t *testing.T) {
			t.Parallel() // each has a server of its own
			r := startRedis(t)
			addr := r.Addr
			var proxy *slowProxy
			if away == "slow" {
				proxy = newSlowProxy(t, r.Addr, 0)
				addr = proxy.Addr()
			}
			admin := redis.NewClient(&redis.Options{Addr: r.Addr})
			defer admin.Close()
			var l logs
			const timeout = 100 * time.Millisecond
			o := redisquota.FleetOptions{Timeout: timeout, ReconnectMax: 100 * time.Millisecond, Logger: slog.New(&l)}
			fs := adaptives(t, addr, uniqueName(away), 3, retry.AdaptiveOptions{}, o)
			// shared fails once in every process, and checks that the
			// fleet's streak refuses the next failure.
			shared := func(scope string) {
				t.Helper()
				for _, f := range fs {
					if err := failAttempt(t, f.Strategy(), scope, errDown); err != nil {
						t.Fatalf("a first failure: %v", err)
					}
				}
				settle(t, fs...)
				if err := failAttempt(t, fs[0].Strategy(), scope, errDown); !errors.Is(err, retry.ErrBudgetExhausted) {
					t.Fatalf("the fleet's 4th failure in a row: %v, want ErrBudgetExhausted", err)
				}
			}
			shared("before")

			switch away {
			case "paused":
				if err := admin.Do(t.Context(), "CLIENT", "PAUSE", 2000).Err(); err != nil {
					t.Fatal(err)
				}
			case "slow":
				proxy.setDelay(3 * timeout)
			case "killed":
				if err := r.Kill(); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			for _, f := range fs[1:] {
				for range 10 {
					succeedAttempt(t, f.Strategy(), "other", 0)
				}
			}
			if d := time.Since(start); d > 100*time.Millisecond {
				t.Errorf("20 attempts took %v with Redis %s; the request path must not wait on it", d, away)
			}
			waitFor(t, 3*time.Second, "every process falls back", func() bool {
				for _, f := range fs {
					if f.Shared() {
						return false
					}
				}
				return true
			})
			// The last view was applied before the fallback; it is stale
			// after 2·FlushInterval + Timeout.
			time.Sleep(2*fleetSyncs + timeout)
			if err := failAttempt(t, fs[1].Strategy(), "before", errDown); err != nil {
				t.Errorf("Redis %s, the view stale: a process's 2nd failure of its own: %v, want a retry", away, err)
			}

			switch away {
			case "paused":
				if err := admin.Do(t.Context(), "CLIENT", "UNPAUSE").Err(); err != nil {
					t.Fatal(err)
				}
			case "slow":
				proxy.setDelay(0)
			case "killed":
				if err := r.Start(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, 5*time.Second, "every process rejoins", func() bool {
				for _, f := range fs {
					if !f.Shared() {
						return false
					}
				}
				return true
			})
			shared("after")
			if n, m := l.count("unavailable"), l.count("rejoined"); n != 3 || m != 3 {
				t.Errorf("logged %d fallbacks and %d rejoins; want one each per process:\n%s", n, m, &l)
			}
		})
	}
}

// TestFleetAdaptiveOneCallPerSync: four goroutines sending as fast as they
// can in eight scopes make no call to Redis of their own: the process
// makes one script call per FlushInterval, whatever the request rate.
func TestFleetAdaptiveOneCallPerSync(t *testing.T) {
	t.Parallel() // its waits overlap the others'
	r := startRedis(t)
	admin := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer admin.Close()
	const interval = 50 * time.Millisecond
	f := adaptives(t, r.Addr, uniqueName("calls"), 1, retry.AdaptiveOptions{}, redisquota.FleetOptions{FlushInterval: interval, Timeout: upTimeout})[0]
	if err := admin.ConfigResetStat(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	var (
		wg       sync.WaitGroup
		requests atomic.Int64
	)
	start := time.Now()
	for g := range 4 {
		wg.Go(func() {
			for i := 0; time.Since(start) < 500*time.Millisecond; i++ {
				scope := fmt.Sprint("scope-", (g+i)%8)
				if i%10 == 0 {
					_ = failAttempt(t, f.Strategy(), scope, errDown)
				} else {
					succeedAttempt(t, f.Strategy(), scope, 0)
				}
				requests.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	f.Close()
	stats, err := admin.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	for line := range strings.Lines(stats) {
		for _, cmd := range []string{"cmdstat_evalsha:", "cmdstat_eval:"} {
			if rest, ok := strings.CutPrefix(line, cmd); ok {
				var n int
				if _, err := fmt.Sscanf(rest, "calls=%d", &n); err != nil {
					t.Fatalf("%q: %v", line, err)
				}
				calls += n
			}
		}
	}
	// One a sync, and one more for the script's first load (EVALSHA
	// answered NOSCRIPT, then EVAL).
	most := int(elapsed/interval) + 3
	t.Logf("%d requests in %v: %d script calls (at most %d)", requests.Load(), elapsed.Round(time.Millisecond), calls, most)
	if calls > most || calls == 0 {
		t.Errorf("%d script calls in %v with a FlushInterval of %v; want one a sync, at most %d", calls, elapsed, interval, most)
	}
	if requests.Load() < 1000 {
		t.Errorf("only %d requests: the test shows nothing", requests.Load())
	}
}

// TestFleetAdaptiveRejoinKeepsWhatItSawAlone: a process that saw the
// service fail on its own while Redis was away sends it once Redis is
// back: its failures in a row still refuse its retries, as they did
// alone, rather than being counted as sent and lost. (Found by review.)
func TestFleetAdaptiveRejoinKeepsWhatItSawAlone(t *testing.T) {
	t.Parallel() // its waits overlap the others'
	r := startRedis(t)
	o := redisquota.FleetOptions{Timeout: 100 * time.Millisecond, ReconnectMax: 100 * time.Millisecond}
	fs := adaptives(t, r.Addr, uniqueName("rejoin"), 1, retry.AdaptiveOptions{}, o)
	f := fs[0]
	succeedAttempt(t, f.Strategy(), "s", 0)
	settle(t, f)
	if err := r.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "the process falls back", func() bool { return !f.Shared() })
	time.Sleep(2*fleetSyncs + 100*time.Millisecond) // its views go stale
	for range 5 {
		_ = failAttempt(t, f.Strategy(), "s", errDown)
	}
	if err := failAttempt(t, f.Strategy(), "s", errDown); !errors.Is(err, retry.ErrBudgetExhausted) {
		t.Fatalf("alone, six failures in a row: %v, want ErrBudgetExhausted", err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the process rejoins", func() bool { return f.Shared() })
	settle(t, f)
	if err := failAttempt(t, f.Strategy(), "s", errDown); !errors.Is(err, retry.ErrBudgetExhausted) {
		t.Errorf("rejoined, seven failures in a row of its own and nothing else in the fleet: %v, want ErrBudgetExhausted", err)
	}
}
