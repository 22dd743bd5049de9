// Package redisquota is a retry quota shared by a fleet of processes through
// Redis: a retry.Quota that every process calling a service takes its retry
// tokens from, so that the fleet as a whole, not each process on its own,
// stops retrying when the service is failing; and a circuit breaker whose
// circuits the fleet shares (FleetBreaker).
//
// A retry quota (the token bucket of Smithy's retry guidance,
// https://smithy.io/2.0/guides/client-guidance/retries.html) keeps one
// process from multiplying the load on a service that is down. But a retry
// storm is a fleet phenomenon: a thousand processes, each with a full bucket
// of its own, retry a thousand buckets' worth; and a process that restarts,
// scales out or runs a short job starts with a full bucket every time. The
// Google SRE book ("Handling Overload",
// https://sre.google/sre-book/handling-overload/) caps retries per client for
// the same reason. A Quota puts one bucket in Redis for every process that
// uses the same key:
//
//	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
//	quota := redisquota.New(client, "payments-api", redisquota.Options{Capacity: 500})
//	defer quota.Close()
//	strategy := retry.NewStandard(retry.StandardOptions{Bucket: quota})
//
// # How it works
//
// The request path never waits on Redis. Refunds (a first-attempt success
// adds a token, a successful retry returns its cost) are counted locally and
// sent by a background goroutine at most FlushInterval (100 ms) later, or at
// once when LeaseSize of them have piled up. A retry takes its cost from a
// lease: tokens the process has taken out of the shared pool in a batch of
// LeaseSize (Capacity/10). When the lease runs below half, the background
// goroutine tops it up; only when a retry finds the lease too small does it
// make a round trip itself, bounded by Options.Timeout, and not even then
// if Redis said less than FlushInterval ago that the pool was short: in an
// outage, when the pool is empty, a process asks Redis about once per
// FlushInterval however many retries it refuses. A retry therefore costs at
// most one round trip and usually none; a success never costs one.
//
// Every change to the shared state is one Lua script, run atomically by
// Redis. The state is three keys sharing a hash tag, {key} for most keys,
// so that a Redis Cluster keeps them in one slot (Keys lists them, and the
// tag of a key that is empty or starts with '}'): a hash with the pool's
// free tokens, the tokens leased out and the capacity; a hash with each
// process's lease (its balance, and cumulative counts of the grants it was
// given and the refunds it sent); and a sorted set of the leases' expiry
// times. The script keeps free + leased within [0, capacity]: refunds beyond
// the capacity are dropped, grants never exceed the free tokens. When a call
// gives back the surplus of a lease (one that grew to a large retry's cost)
// while other retries spend from it, the lease goes below zero: the next
// call reports what the process owes and the script takes it from the pool,
// so that no token is spent twice.
//
// The script is idempotent where it matters. A process reports the balance
// it holds, not what it spent, and cumulative counts of grants received and
// refunds sent: if a reply is lost, the next call returns the grant it never
// received to the pool and does not count the refunds twice.
//
// # Leases expire
//
// A lease lives LeaseTTL (10 s) unless renewed; the process renews it in the
// background while it holds tokens, and gives it back after a third of the
// TTL without a retry, so that idle processes hold nothing. Expiry is judged
// by the Redis server's clock (the script reads TIME), never by the clients'.
// Each call of the script, by any process, first reclaims the leases whose
// time has passed: the tokens of a process that died, was partitioned from
// Redis or stopped for longer than the TTL go back to the pool. The process
// itself stops spending its lease at 90 % of the TTL after the call that
// granted or renewed it, measured on its own monotonic clock, so that a
// lease is never spent by its holder and reclaimed by the fleet at once
// (barring a process paused in the middle of a take). When such a process
// comes back, its next call finds its lease gone: the tokens it held are
// dropped, and Sync reports ErrLeaseLost.
//
// # How it fails
//
// Redis unreachable or answering errors: the process falls back to a local
// quota of its own, a retry.TokenBucket of FallbackCapacity (Capacity by
// default), and logs one Warn record through log/slog. It fails safe: each
// process is then limited as it would be with no fleet quota, never
// unlimited, and a negative FallbackCapacity refuses every retry while Redis
// is away. The local quota starts full once and keeps its level across
// outages, so that a flapping Redis cannot refill it. The process tries
// Redis again with exponential backoff from FlushInterval to ReconnectMax (5
// s) with equal jitter, so that a fleet cut off at once does not come back
// in lockstep; on the first answer it rejoins, logs one Info record, and
// sends the refunds it counted before the outage (refunds made during the
// outage went to the local quota). A retry that finds its lease empty just
// as Redis goes away waits for at most Timeout (twice if a call was under
// way, the background one or another retry's: a retry waits for such a
// call for at most Timeout, and is refused if it still cannot pay, rather
// than queue behind every other retry's round trip).
//
// Redis hung (paused, stopped, a half-open connection): the same, within
// the same bound, whatever the client's options. go-redis ignores a
// context's deadline unless the client was built with
// ContextTimeoutEnabled, and then waits out its ReadTimeout (5 s) and
// retries; so the quota runs each call on a goroutine of its own and stops
// waiting at Timeout itself. The call given up on finishes in the
// background, and the quota makes no other call until it has (a late answer
// is taken in, so that the tokens it granted are not lost). With a
// *redis.Client (standalone or Sentinel) the quota calls through
// WithTimeout(Timeout), which shares the client's connections, so that such
// a call also ends within Timeout; a Cluster or Ring client ends it at its
// ReadTimeout, or at Timeout if ContextTimeoutEnabled is set. Close waits
// for it: no goroutine of the quota outlives Close, which with a
// *redis.Client returns within about three Timeouts.
//
// Tokens that can be lost: a process killed with a lease loses at most
// LeaseSize tokens for at most LeaseTTL (they come back when the lease
// expires). A Redis that loses its data (a restart without persistence, a
// failover to a replica that had not received the last writes, eviction
// under maxmemory, the keys' KeyTTL after 24 h of disuse) starts the pool
// again full; the processes' next calls report their leases lost. When
// only the lease records go (eviction takes whole keys, and a partial flush
// or a DEL may take the leases hash or the expiry set and leave the pool),
// the next call of any process reconciles the pool with the leases that
// remain: tokens leased to records that are gone go back to the pool at
// once, and a lease that lost its expiry gets one of a LeaseTTL, so that a
// dead holder's tokens come back after it (processes sharing a key should
// use the same LeaseTTL). The check costs O(1) per call; only a loss makes
// the script walk the leases. A key of
// the wrong type (another program writing it) is an error wrapping
// ErrWrongType that names the key, and the processes use their local quotas
// until it is fixed.
//
// Accuracy: the fleet can hold up to LeaseSize tokens per process away from
// the pool, and Available returns the pool as last seen plus the lease in
// hand. Refunds reach the pool up to FlushInterval late. Processes sharing a
// key should use the same Capacity (the last call's wins).
//
// Standalone Redis, Sentinel (redis.NewFailoverClient) and Cluster
// (redis.NewClusterClient) clients all work; the tests run a standalone
// server, a one-node cluster and a Sentinel.
//
// # A circuit shared by a fleet
//
// A FleetBreaker is a circuit breaker whose circuits every process with the
// same name shares: the fleet's counted attempts open and close one circuit
// per scope, by retry.Breaker's rules, and while it is open Probes attempts
// pass per spell in the whole fleet. Its Breaker is a *retry.Breaker, which
// retry.WithBreaker and every integration take unchanged:
//
//	fb, err := redisquota.NewFleetBreaker(client, "payments-api", retry.BreakerOptions{})
//	...
//	defer fb.Close()
//	err = retry.Do(ctx, strategy, op, retry.WithBreaker(fb.Breaker()))
//
// It fails as the quota does: the request path answers from the process's
// copy of each circuit, synchronised in the background every FlushInterval,
// and only a probe's claim, when an open spell ends, waits on Redis, for at
// most Timeout; while Redis cannot be reached each process goes on with its
// own circuits, and rejoins when it answers. See FleetBreaker.
//
// # Adaptive's evidence shared by a fleet
//
// A FleetAdaptive is a retry.Adaptive whose evidence every process with the
// same name shares, for fleets of quiet processes (thousands of pods,
// workers or functions, each sending a request every few seconds) in which
// no process sees enough on its own: not the failures in a row that stop an
// outage's retries, nor the timed successes that tell one black-holed
// replica's timeout from an overload. Its Strategy is a *retry.Adaptive,
// which retry.Do and every integration take unchanged:
//
//	fa, err := redisquota.NewFleetAdaptive(client, "payments-api", retry.AdaptiveOptions{})
//	...
//	defer fa.Close()
//	err = retry.Do(ctx, fa.Strategy(), op)
//
// Per scope the fleet shares the window's attempts, accepts and timeouts,
// the failures in a row, when a retry last worked and the latency of the
// timed successes; the send-rate limiter and the judgement across scopes
// stay the process's own. The request path never calls Redis: one script
// call per process per FlushInterval sends every scope's counts and takes
// the fleet's views, which stay fresh for two FlushIntervals plus Timeout.
// A large fleet syncs less often: NewFleetAdaptiveWith and
// NewFleetBreakerWith take FleetOptions, whose FlushInterval of a second
// makes 10,000 processes call Redis 10,000 times a second, not 100,000.
// Each scope is a hash, EvidenceKey(name, scope), whose TTL is two windows
// (20 s by default), so that a dead process's evidence leaves with the
// window. While Redis cannot be reached each process decides on its own
// evidence, as an unbound Adaptive, and rejoins when it answers. See
// FleetAdaptive.
//
// # Tests
//
// The tests start redis-server on loopback (Redis 7; apt-get install
// redis-server, or brew install redis). Without it on PATH, the tests that
// need it skip, saying so, and the rest run; with
// RETRYKIT_REQUIRE_SERVERS=1 in the environment, as CI should set, a
// missing redis-server fails the tests instead.
package redisquota
