package sim

import (
	"time"

	"github.com/retrykit/retry"
)

// Policy is how clients retry: a strategy per client, which may share state
// with the other clients' (one quota for the whole process).
type Policy struct {
	Name string
	// New returns the strategies of a run: strategy(i) is client i's.
	New func(env Env) (strategy func(client int) retry.Strategy)
	// MaxElapsed, if set, abandons a request this long after it was issued
	// (some libraries bound the time spent retrying rather than attempts).
	MaxElapsed time.Duration
	// RetryAfter is how the policy treats a 429's Retry-After.
	RetryAfter RetryAfterMode
	// Breaker, if set, returns the circuit breakers of a run:
	// breaker(i) is client i's, which its requests consult as Do
	// consults one given WithBreaker: not even asking the strategy for a
	// first attempt while it is open, before every attempt (Allow), with
	// each attempt's outcome (Done), and before every wait for a retry
	// (Delay).
	Breaker func(env Env) (breaker func(client int) *retry.Breaker)
}

// Env is what a run gives the strategies it makes: its seeded randomness,
// for backoff jitter, and its virtual clock, for strategies that read the
// time (rates, windows).
type Env struct {
	Rand func() float64
	Now  func() time.Time
	// After calls f d from now on the virtual clock, before any event
	// that comes later: a library's background work (a shared store's
	// syncs). Only Run's runs have it; it is nil in the layered and OCC
	// scenarios.
	After func(d time.Duration, f func())
}

// Epoch is the virtual clock's reading when a run starts.
var Epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// RetryAfterMode is how a policy treats the server's Retry-After.
type RetryAfterMode uint8

// Ways of treating Retry-After.
const (
	ObeyRetryAfter        RetryAfterMode = iota // wait at least what the server asks (retrykit)
	IgnoreRetryAfter                            // wait the backoff, whatever the server asks
	ReplaceWithRetryAfter                       // wait what the server asks instead of the backoff
)

// Policies returns the policies the simulator compares, in table order. Each
// drives the library's real strategies; the last three are the documented
// defaults of popular Go retry libraries, written with retrykit's parts and
// named after the library, its versions and the defaults' main numbers.
func Policies() []Policy {
	return []Policy{
		{Name: "no retries", New: shared(func(Env) retry.Strategy { return &retry.No{} })},
		{Name: "immediate, 3 attempts", New: shared(func(Env) retry.Strategy {
			return &retry.Simple{MaxAttempts: 3, Backoff: retry.Constant(0)}
		})},
		{Name: "exp 100ms-10s no jitter, 3 att.", New: shared(func(env Env) retry.Strategy {
			rnd := env.Rand
			return &retry.Simple{MaxAttempts: 3, Backoff: exp(100*time.Millisecond, 10*time.Second, retry.NoJitter, rnd)}
		})},
		{Name: "exp 100ms-10s full jitter, 3 att.", New: shared(func(env Env) retry.Strategy {
			rnd := env.Rand
			return &retry.Simple{MaxAttempts: 3, Backoff: exp(100*time.Millisecond, 10*time.Second, retry.FullJitter, rnd)}
		})},
		{Name: "Standard, quota per client", New: perClient(standard)},
		{Name: "Standard, one shared quota", New: shared(standard)},
		{Name: "Standard + Budget, per client", New: perClient(standardBudget)},
		{Name: "Standard + Budget, one shared", New: shared(standardBudget)},
		{Name: "AWS adaptive mode, per client", New: perClient(awsAdaptive)},
		{Name: Default + ", per client", New: perClient(adaptive)},
		{Name: Default + ", one shared", New: shared(adaptive)},
		{Name: FleetAdaptive + ", 100ms sync", New: fleetAdaptive(100 * time.Millisecond)},
		{Name: FleetAdaptive + ", 1s sync", New: fleetAdaptive(time.Second)},
		{Name: Breaker + ", per client", New: perClient(adaptive), Breaker: perClient(breaker)},
		{Name: Breaker + ", one shared", New: shared(adaptive), Breaker: shared(breaker)},
		{Name: FleetBreaker + ", 100ms sync", New: perClient(adaptive), Breaker: fleetBreaker(100 * time.Millisecond)},
		{Name: FleetBreaker + ", 1s sync", New: perClient(adaptive), Breaker: fleetBreaker(time.Second)},
		{Name: "avast/retry-go v4/v5 defaults: 10 att., 100ms·2^n", RetryAfter: IgnoreRetryAfter, New: shared(func(env Env) retry.Strategy {
			rnd := env.Rand
			// avast/retry-go's defaults (v4.7.0, v5.1.1): 10 attempts,
			// BackOffDelay from 100 ms combined with a random delay of up
			// to 100 ms; Retry-After is not read.
			return &retry.Simple{MaxAttempts: 10, Backoff: plusJitter{exp(100*time.Millisecond, 0, retry.NoJitter, rnd), 100 * time.Millisecond, rnd}}
		})},
		{Name: "go-retryablehttp v0.7 defaults: 4 retries, 1s-30s", RetryAfter: ReplaceWithRetryAfter, New: shared(func(env Env) retry.Strategy {
			rnd := env.Rand
			// hashicorp/go-retryablehttp's defaults (v0.7.8): 4 retries,
			// 1 s to 30 s; on 429 and 503 it waits the Retry-After instead.
			return &retry.Simple{MaxAttempts: 5, Backoff: exp(time.Second, 30*time.Second, retry.NoJitter, rnd)}
		})},
		{Name: "cenkalti/backoff v5 defaults: 500ms·1.5^n, 15 min", MaxElapsed: 15 * time.Minute, RetryAfter: IgnoreRetryAfter, New: shared(func(env Env) retry.Strategy {
			rnd := env.Rand
			// cenkalti/backoff's defaults (v5.0.3, as v4): 500 ms growing
			// 1.5× up to 60 s, randomised ±50 %, for up to 15 minutes.
			// Retry-After counts only if the operation parses it and
			// returns backoff.RetryAfter: by default it is not read.
			return &retry.Simple{MaxAttempts: 1 << 20, Backoff: geometric{500 * time.Millisecond, 1.5, 60 * time.Second, 0.5, rnd}}
		})},
	}
}

// exp is an exponential backoff from base up to limit.
func exp(base, limit time.Duration, j retry.Jitter, rnd func() float64) retry.Backoff {
	return retry.Exponential{Base: base, Max: limit, Jitter: j, Rand: rnd}
}

// perClient gives each client a strategy (or breaker) of its own, made by
// mk on the client's first request: per-client state such as a retry
// quota.
func perClient[T any](mk func(env Env) T) func(Env) func(int) T {
	return func(env Env) func(int) T {
		byClient := map[int]T{}
		return func(c int) T {
			s, ok := byClient[c]
			if !ok {
				s = mk(env)
				byClient[c] = s
			}
			return s
		}
	}
}

// shared gives every client one strategy (or breaker) made by mk, so
// that its state (one quota for the whole process) is shared.
func shared[T any](mk func(env Env) T) func(Env) func(int) T {
	return func(env Env) func(int) T {
		s := mk(env)
		return func(int) T { return s }
	}
}

// standard is retry.NewStandard with its default numbers, its jitter
// drawn from the run's seeded randomness.
func standard(env Env) retry.Strategy {
	return retry.NewStandard(retry.StandardOptions{
		Backoff:         exp(50*time.Millisecond, 20*time.Second, retry.FullJitter, env.Rand),
		ThrottleBackoff: exp(time.Second, 20*time.Second, retry.FullJitter, env.Rand),
	})
}

// standardBudget adds a retry budget with its default ratio to Standard.
func standardBudget(env Env) retry.Strategy {
	return retry.NewStandard(retry.StandardOptions{
		Backoff:         exp(50*time.Millisecond, 20*time.Second, retry.FullJitter, env.Rand),
		ThrottleBackoff: exp(time.Second, 20*time.Second, retry.FullJitter, env.Rand),
		Budget:          retry.NewBudget(retry.BudgetOptions{Now: env.Now}),
	})
}

// adaptive is retry.NewAdaptive with its defaults: what a user who
// configures nothing gets.
func adaptive(env Env) retry.Strategy {
	return retry.NewAdaptive(retry.AdaptiveOptions{
		StandardOptions: retry.StandardOptions{
			Backoff:         exp(50*time.Millisecond, 20*time.Second, retry.FullJitter, env.Rand),
			ThrottleBackoff: exp(time.Second, 20*time.Second, retry.FullJitter, env.Rand),
		},
		Rand: env.Rand,
		Now:  env.Now,
	})
}

// awsAdaptive is AWS's adaptive retry mode as the AWS SDKs ship it, as
// near as Adaptive's dials reach: the standard mode's quota of 500 per
// client, timeouts retried, no failure streaks or client-side
// throttling, and a send-rate limiter that only throttling errors slow
// down and whose waits are not bounded (an hour). (Adaptive's limiter
// still stops limiting after the throttling ends; AWS's does not.)
func awsAdaptive(env Env) retry.Strategy {
	return retry.NewAdaptive(retry.AdaptiveOptions{
		StandardOptions: retry.StandardOptions{
			Backoff:         exp(50*time.Millisecond, 20*time.Second, retry.FullJitter, env.Rand),
			ThrottleBackoff: exp(time.Second, 20*time.Second, retry.FullJitter, env.Rand),
			Capacity:        retry.DefaultBucketCapacity,
		},
		Streak:        -1,
		Multiplier:    -1,
		RetryTimeouts: true,
		MaxWait:       time.Hour,
		Rand:          env.Rand,
		Now:           env.Now,
	})
}

// Default names the rows of the strategy users get when they configure
// nothing.
const Default = "Adaptive (default)"

// Breaker names the rows of the default strategy with a circuit breaker
// at its defaults.
const Breaker = "Adaptive + Breaker"

// breaker is retry.NewBreaker with its defaults, on the run's clock.
func breaker(env Env) *retry.Breaker {
	return retry.NewBreaker(retry.BreakerOptions{Now: env.Now})
}

// plusJitter adds a uniform random delay of up to extra to a backoff.
type plusJitter struct {
	retry.Backoff
	extra time.Duration
	rnd   func() float64
}

func (p plusJitter) Delay(n int, prev time.Duration) time.Duration {
	return p.Backoff.Delay(n, prev) + time.Duration(p.rnd()*float64(p.extra))
}

// geometric grows by factor per retry up to limit, randomised by ±spread.
type geometric struct {
	base   time.Duration
	factor float64
	limit  time.Duration
	spread float64
	rnd    func() float64
}

func (g geometric) Delay(n int, _ time.Duration) time.Duration {
	d := float64(g.base)
	for i := 1; i < n && d < float64(g.limit); i++ {
		d *= g.factor
	}
	d = min(d, float64(g.limit))
	return time.Duration(d * (1 - g.spread + 2*g.spread*g.rnd()))
}

// OCCPolicies returns the backoffs compared in the OCC scenario, after AWS's
// "Exponential Backoff And Jitter" experiment: one per jitter. (retrykit's
// decorrelated jitter is min(max, base + r·3·prev); AWS's was
// min(max, base + r·(3·prev − base)).)
func OCCPolicies(base, limit time.Duration) []Policy {
	var out []Policy
	for _, j := range []retry.Jitter{retry.NoJitter, retry.FullJitter, retry.EqualJitter, retry.DecorrelatedJitter} {
		out = append(out, Policy{Name: "exponential, " + jitterName(j), New: func(env Env) func(int) retry.Strategy {
			s := &retry.Simple{MaxAttempts: 1 << 20, Backoff: retry.Exponential{Base: base, Max: limit, Jitter: j, Rand: env.Rand}}
			return func(int) retry.Strategy { return s }
		}})
	}
	return out
}

func jitterName(j retry.Jitter) string {
	if j == retry.NoJitter {
		return "no jitter"
	}
	return j.String() + " jitter"
}
