package redisquota

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry"
)

// Defaults of Options.
const (
	DefaultCapacity      = 500
	DefaultLeaseTTL      = 10 * time.Second
	DefaultFlushInterval = 100 * time.Millisecond
	DefaultTimeout       = 100 * time.Millisecond
	DefaultReconnectMax  = 5 * time.Second
	DefaultKeyTTL        = 24 * time.Hour
)

// maxLeaseTTL bounds Options.LeaseTTL, well within what the arithmetic on
// it (90 % of it, past the monotonic clock) can hold without overflowing.
const maxLeaseTTL = 365 * 24 * time.Hour

// errNilClient is the error of every call of a quota that New was given no
// client for.
var errNilClient = errors.New("redisquota: New was given a nil Redis client")

// Options configure a Quota. The zero value of each field takes its default.
type Options struct {
	// Capacity is the most tokens the fleet's quota holds; 0 = 500, the
	// Smithy guide's bucket. Every process sharing a key should use the same
	// capacity: the last one to write wins.
	Capacity int
	// LeaseSize is how many tokens a process takes from Redis at a time; 0 =
	// Capacity/10 (at least 1). A larger lease means fewer round trips and
	// more tokens held away from the rest of the fleet: a process holds at
	// most LeaseSize tokens, or one retry's cost if that is larger.
	LeaseSize int
	// LeaseTTL is how long a lease lives without being renewed; 0 = 10 s,
	// and at most a year (a longer one is taken as a year). Tokens leased
	// by a process that dies come back to the fleet after it.
	LeaseTTL time.Duration
	// FlushInterval is the longest time refunds wait before they are sent;
	// 0 = 100 ms. They go sooner when LeaseSize of them have piled up.
	FlushInterval time.Duration
	// Timeout bounds each round trip to Redis, whatever the client's
	// options (see New); 0 = 100 ms.
	Timeout time.Duration
	// FallbackCapacity is the capacity of the local quota used while Redis
	// cannot be reached; 0 = Capacity, negative = no retries at all while
	// Redis is away. The local quota starts full once and keeps its level
	// across outages, so that flapping cannot refill it.
	FallbackCapacity int
	// ReconnectMax caps the jittered exponential backoff between attempts
	// to reach Redis again; 0 = 5 s.
	ReconnectMax time.Duration
	// KeyTTL is the keys' time to live, renewed by every call, so that the
	// keys of an abandoned quota go away; 0 = 24 h, negative = never.
	KeyTTL time.Duration
	// Logger receives one record when the quota falls back to its local
	// quota and one when it rejoins; nil = slog.Default().
	Logger *slog.Logger
	// Rand returns numbers in [0, 1) for the reconnect jitter; nil =
	// math/rand/v2. Tests pin it.
	Rand func() float64
}

// Errors reported by Sync and Close, and logged. Test with errors.Is.
var (
	// ErrWrongType: a key the quota uses holds a value of another type,
	// probably written by another program. The quota falls back to its
	// local quota until the key is fixed.
	ErrWrongType = errors.New("redisquota: a quota key holds a value of the wrong type")
	// ErrLeaseLost: the process's lease was gone when it was renewed,
	// because the keys expired, were evicted or deleted, or the lease
	// outlived its TTL (the process was cut off from Redis or paused). The
	// tokens it held were dropped; the quota carries on.
	ErrLeaseLost = errors.New("redisquota: the lease was lost")
	// ErrClosed: the quota was closed.
	ErrClosed = errors.New("redisquota: quota closed")
)

// reply is the script's answer.
type reply struct {
	status, granted, balance, tokens, leased, capacity int64
}

const (
	statusOK      = 0
	statusCreated = 1
	statusLost    = 2
)

// runner runs the script; New uses Redis, tests of the scheduling a
// stand-in in virtual time.
type runner func(ctx context.Context, keys []string, args ...any) (reply, error)

// Quota is a retry quota shared by every process that uses the same Redis
// key. It implements retry.Quota; see the package documentation for how it
// works and how it fails. It is safe for concurrent use.
type Quota struct {
	run    runner
	epoch  time.Time // the clock's origin: times are kept as monotonic offsets from it
	keys   []string
	id     string
	opts   Options
	local  *retry.TokenBucket
	logger *slog.Logger

	lease    atomic.Int64 // tokens in hand
	deadline atomic.Int64 // clock after which the lease may not be spent
	refunds  atomic.Int64 // refunds recorded, cumulative
	pool     atomic.Int64 // the pool's tokens at the last call
	syncs    atomic.Int64 // calls answered
	replied  atomic.Int64 // clock of the last answer
	trips    atomic.Int64 // calls made
	fallback atomic.Bool
	closed   atomic.Bool
	lastTake atomic.Int64 // clock of the last take; 0 = never
	lastCost atomic.Int64

	wake  chan struct{}
	done  chan struct{}
	wg    sync.WaitGroup // the background loop
	calls sync.WaitGroup // the goroutines of calls to Redis, see trip
	once  sync.Once
	cerr  error

	mu        chan struct{} // the lock: one call at a time; guards the fields below (see lock)
	gAck      int64         // grants received, cumulative
	rAck      int64         // refunds acknowledged, cumulative
	lastSync  time.Time
	failures  int
	nextProbe time.Time
	pending   *trip // a call given up on at its deadline and still running; nil = none
}

// trip is one round trip to Redis, run on a goroutine of its own so that
// its caller can stop waiting at the deadline, and what it was sent.
type trip struct {
	done   chan struct{} // closed when the goroutine has set r and err
	r      reply
	err    error
	bal    int64     // the lease reported
	want   int64     // the balance asked for; -1 = the lease given back
	rtotal int64     // the refunds reported
	start  time.Time // when it was sent
}

var _ retry.Quota = (*Quota)(nil)

// New returns a Quota on key, shared by every process that calls New with
// the same key on the same Redis, and starts its background goroutine; call
// Close when done. The client may be a standalone, Sentinel (failover) or
// Cluster client: the quota's keys share a hash tag (see Keys), so that they
// live in one slot. New does not contact Redis. Given a nil client, it
// returns a quota whose every call fails with an error saying so, and
// which runs on its local fallback quota.
func New(client redis.UniversalClient, key string, opts Options) *Quota {
	opts = opts.withDefaults()
	if isNil(client) {
		return newQuota(func(context.Context, []string, ...any) (reply, error) { return reply{}, errNilClient }, key, opts)
	}
	scripter := bounded(client, opts.Timeout)
	run := func(ctx context.Context, keys []string, args ...any) (reply, error) {
		v, err := syncScript.Run(ctx, scripter, keys, args...).Int64Slice()
		if err != nil {
			return reply{}, err
		}
		if len(v) != 6 {
			return reply{}, fmt.Errorf("redisquota: unexpected reply %v", v)
		}
		return reply{v[0], v[1], v[2], v[3], v[4], v[5]}, nil
	}
	return newQuota(run, key, opts)
}

// isNil reports whether client is nil, or a nil pointer in the interface.
func isNil(client redis.UniversalClient) bool {
	v := reflect.ValueOf(client)
	return !v.IsValid() || v.Kind() == reflect.Pointer && v.IsNil()
}

// bounded returns client as the quota and the fleet breaker call it.
//
// go-redis ignores a context's deadline unless the client was built
// with ContextTimeoutEnabled: by default a call to a Redis that does not
// answer (paused, stopped with SIGSTOP, a half-open connection) waits
// for the client's ReadTimeout, 5 s, and retries. The quota does not
// rely on the deadline: syncLocked stops waiting at Timeout whatever the
// client does (see trip). For the goroutine running the call to end
// about as soon, a *redis.Client (standalone or Sentinel) is used
// through WithTimeout, a clone sharing its connection pool whose socket
// deadlines are Timeout. It is not closed: closing it would close the
// caller's pool. Other clients (Cluster, Ring) end such a call at their
// own ReadTimeout, or at Timeout if ContextTimeoutEnabled is set.
func bounded(client redis.UniversalClient, timeout time.Duration) redis.Scripter {
	if c, ok := client.(interface {
		WithTimeout(time.Duration) *redis.Client
	}); ok {
		return c.WithTimeout(timeout)
	}
	return client
}

func newQuota(run runner, key string, opts Options) *Quota {
	opts = opts.withDefaults() // idempotent: New applied them; the tests call newQuota directly
	q := &Quota{
		run:    run,
		epoch:  time.Now(),
		keys:   Keys(key),
		id:     crand.Text(),
		opts:   opts,
		local:  retry.NewTokenBucket(max(opts.FallbackCapacity, 0)),
		logger: opts.Logger,
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
		mu:     make(chan struct{}, 1),
	}
	q.pool.Store(int64(opts.Capacity))
	q.wg.Add(1)
	go q.loop()
	return q
}

// Keys returns the Redis keys a quota on key uses: the pool (a hash), the
// leases (a hash) and the leases' expiries (a sorted set). They share the
// hash tag {key}, so a Redis Cluster keeps them in one slot:
// redisquota:{key}:pool and so on. Redis hashes a whole name when its first
// braces hold nothing, which would put the three in slots of their own; so
// a key that is empty or starts with '}' has names of another shape, with
// the hash tag {=}: redisquota:={=}key:pool and so on.
func Keys(key string) []string {
	prefix := "redisquota:{" + key + "}:"
	if key == "" || key[0] == '}' {
		// "redisquota:=" starts no other key's names.
		prefix = "redisquota:={=}" + key + ":"
	}
	return []string{prefix + "pool", prefix + "leases", prefix + "expiry"}
}

func (o Options) withDefaults() Options {
	if o.Capacity <= 0 {
		o.Capacity = DefaultCapacity
	}
	if o.LeaseSize <= 0 {
		o.LeaseSize = max(o.Capacity/10, 1)
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	o.LeaseTTL = min(o.LeaseTTL, maxLeaseTTL)
	if o.FlushInterval <= 0 {
		o.FlushInterval = DefaultFlushInterval
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.FallbackCapacity == 0 {
		o.FallbackCapacity = o.Capacity
	}
	if o.ReconnectMax <= 0 {
		o.ReconnectMax = DefaultReconnectMax
	}
	if o.KeyTTL == 0 {
		o.KeyTTL = DefaultKeyTTL
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Rand == nil {
		o.Rand = rand.Float64
	}
	return o
}

// Take removes n tokens if the quota holds them and reports whether it did.
// It spends the process's lease; when the lease cannot pay, it makes one
// round trip to Redis (bounded by Options.Timeout) for a new lease, unless
// Redis said less than FlushInterval ago that the pool could not pay either:
// during an outage, when the pool is empty, retries are refused without a
// call. A call under way (another Take's, or the background one) is waited
// for first, for at most Timeout; a Take still waiting then is refused
// unless that call filled the lease. While Redis cannot be reached it takes
// from the local fallback quota instead.
func (q *Quota) Take(n int) bool {
	if n <= 0 {
		return true
	}
	if q.fallback.Load() {
		return q.local.Take(n)
	}
	cost := int64(n)
	now := time.Now()
	q.lastTake.Store(q.clock(now))
	q.lastCost.Store(cost)
	if q.spend(cost, now) {
		if q.lease.Load() < int64(q.opts.LeaseSize)/2 {
			q.nudge()
		}
		return true
	}
	if q.clock(now)-q.replied.Load() <= int64(q.opts.FlushInterval) && q.pool.Load()+q.lease.Load() < cost {
		return false // Redis said the pool was short less than FlushInterval ago
	}
	seen := q.syncs.Load()
	// Takes must not queue behind each other's round trips: with 32 of them
	// and a Redis answering in 40 ms, the last would wait 1.3 s.
	wait, cancel := context.WithTimeout(context.Background(), q.opts.Timeout)
	locked := q.lock(wait.Done())
	cancel()
	if !locked {
		if q.fallback.Load() {
			return q.local.Take(n)
		}
		return q.spend(cost, time.Now())
	}
	defer q.unlock()
	if q.fallback.Load() {
		return q.local.Take(n)
	}
	if q.spend(cost, time.Now()) {
		return true
	}
	if q.syncs.Load() != seen && q.pool.Load()+q.lease.Load() < cost {
		return false // a call made while this one waited found the pool short
	}
	if err := q.syncLocked(context.Background(), max(int64(q.opts.LeaseSize), cost), cost); err != nil && q.fallback.Load() {
		return q.local.Take(n)
	}
	return q.spend(cost, time.Now())
}

// lock takes q.mu, the lock of the quota's calls to Redis, and reports
// whether it did before stop was closed (nil = wait as long as it takes). A
// call holds it for at most Timeout.
func (q *Quota) lock(stop <-chan struct{}) bool {
	select {
	case q.mu <- struct{}{}:
		return true
	default:
	}
	select {
	case q.mu <- struct{}{}:
		return true
	case <-stop:
		return false
	}
}

func (q *Quota) unlock() { <-q.mu }

// clock returns t as an offset from the quota's epoch on the monotonic
// clock, plus one so that zero means never: a step of the wall clock moves
// no deadline.
func (q *Quota) clock(t time.Time) int64 { return int64(t.Sub(q.epoch)) + 1 }

// spend takes cost from the lease if it holds enough and has not expired.
func (q *Quota) spend(cost int64, now time.Time) bool {
	if q.clock(now) >= q.deadline.Load() {
		return false
	}
	for {
		l := q.lease.Load()
		if l < cost {
			return false
		}
		if q.lease.CompareAndSwap(l, l-cost) {
			return true
		}
	}
}

// Refund records n tokens to give back to the fleet's quota. It never waits
// on Redis: refunds are sent in the background. While Redis cannot be
// reached they go to the local fallback quota.
func (q *Quota) Refund(n int) {
	if n <= 0 {
		return
	}
	if q.fallback.Load() {
		q.local.Refund(n)
		return
	}
	if q.refunds.Add(int64(n))%int64(q.opts.LeaseSize) < int64(n) {
		q.nudge() // another LeaseSize tokens since the last nudge: send them now
	}
}

// Available returns the tokens the process can count on: its lease (less
// any tokens it owes the pool, see the package documentation) plus the
// fleet's pool as last seen, or the local quota's while Redis is away.
func (q *Quota) Available() int {
	if q.fallback.Load() {
		return q.local.Available()
	}
	return int(max(q.lease.Load()+q.pool.Load(), 0))
}

// RoundTrips returns how many calls the quota has made to Redis.
func (q *Quota) RoundTrips() int64 { return q.trips.Load() }

// Shared reports whether the quota is using the fleet's count in Redis, as
// opposed to its local fallback quota.
func (q *Quota) Shared() bool { return !q.fallback.Load() && !q.closed.Load() }

// Sync sends the pending refunds and renews the lease now, and returns what
// went wrong: an error wrapping ErrWrongType, ErrLeaseLost, ErrClosed, or the
// Redis client's error. It waits for Redis until ctx is done or
// Options.Timeout has passed, whichever comes first. The end of ctx is not
// taken for an outage: Sync returns ctx's error, and the quota stays on
// Redis and takes in the answer at its next call.
func (q *Quota) Sync(ctx context.Context) error {
	if q.closed.Load() {
		return ErrClosed
	}
	if !q.lock(ctx.Done()) {
		return fmt.Errorf("redisquota: waiting for a call under way: %w", ctx.Err())
	}
	defer q.unlock()
	if q.closed.Load() {
		return ErrClosed // Close ran while this waited: it must start no call after Close
	}
	return q.syncLocked(ctx, q.want(time.Now()), 0)
}

// Close stops the background goroutine, sends the pending refunds and
// returns the unspent lease to the fleet, with the tokens granted by a call
// that a Take gave up on and that Redis answered late. It returns the error
// of that last call, if any (the lease then comes back when it expires).
// After Close the quota answers from its local fallback quota and never
// calls Redis, and no goroutine of the quota is left. Call it once the
// strategies using the quota are done.
//
// Close does not hang on a Redis that does not answer: it waits for the
// background goroutine's call in progress, then for its own last call, each
// for at most Options.Timeout, then for the goroutines of calls given up on,
// which a *redis.Client ends within Timeout of their start (a Cluster or
// Ring client at its ReadTimeout; see New; if such a call is still
// unanswered after Close's own wait, Close waits for it and gives its grant
// back with one more call). With a *redis.Client it returns within about
// three Timeouts.
func (q *Quota) Close() error {
	q.once.Do(func() {
		close(q.done)
		q.wg.Wait()
		q.lock(nil)
		q.closed.Store(true)
		if q.pending != nil || !q.fallback.Load() || q.lease.Load() != 0 || q.refunds.Load() != q.rAck {
			q.cerr = q.syncLocked(context.Background(), -1, 0)
		}
		if p := q.pending; p != nil && p.want >= 0 {
			// A call given up on is still unanswered, and no lease was
			// given back: its answer may yet grant tokens, leased to this
			// process until LeaseTTL. Its goroutine ends within Timeout
			// with a *redis.Client, at the client's ReadTimeout otherwise
			// (Close waits for it in any case, below): take it in and give
			// the lease back.
			<-p.done
			q.cerr = q.syncLocked(context.Background(), -1, 0)
		}
		q.fallback.Store(true)
		q.unlock()
		// No call is started after this point (closed is set and the loop
		// has stopped), so the wait ends with the last one's goroutine.
		q.calls.Wait()
	})
	return q.cerr
}

func (q *Quota) nudge() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// loop flushes and renews in the background until Close.
func (q *Quota) loop() {
	defer q.wg.Done()
	t := time.NewTimer(q.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-q.done:
			return
		case <-q.wake:
		case <-t.C:
		}
		d := q.tick(time.Now())
		t.Reset(d)
	}
}

// tick makes the background call if one is due and returns when to look
// again.
func (q *Quota) tick(now time.Time) time.Duration {
	q.lock(nil)
	defer q.unlock()
	if q.fallback.Load() {
		if now.Before(q.nextProbe) {
			return q.nextProbe.Sub(now)
		}
	} else if !q.due(now) {
		return q.opts.FlushInterval
	}
	want := q.want(now)
	need := min(want, q.lease.Load()+q.lastCost.Load())
	_ = q.syncLocked(context.Background(), want, need)
	if q.fallback.Load() {
		return time.Until(q.nextProbe)
	}
	return q.opts.FlushInterval
}

// due reports whether a call is needed: refunds are waiting, the lease runs
// low while the process retries, or the lease must be renewed or given back
// (or, below zero, paid for).
func (q *Quota) due(now time.Time) bool {
	if q.refunds.Load() != q.rAck {
		return true
	}
	lease := q.lease.Load()
	if q.active(now) && lease < int64(q.opts.LeaseSize)/2 {
		return true
	}
	return lease != 0 && now.Sub(q.lastSync) >= q.opts.LeaseTTL/3
}

// active reports whether the process took tokens recently.
func (q *Quota) active(now time.Time) bool {
	last := q.lastTake.Load()
	return last != 0 && q.clock(now)-last < int64(q.opts.LeaseTTL/3)
}

// want is the lease the process should hold: a full one while it retries,
// none when it has not retried for a third of the lease TTL, so that idle
// processes do not sit on the fleet's tokens.
func (q *Quota) want(now time.Time) int64 {
	if q.active(now) {
		return max(int64(q.opts.LeaseSize), q.lastCost.Load())
	}
	return 0
}

// syncLocked makes one call: it reports the lease in hand and the refunds
// recorded, and asks for a balance of want tokens (-1 = give the lease
// back), granted only if it reaches need. It waits until parent is done or
// Timeout has passed, whichever comes first. Holding q.mu.
//
// The call runs on a goroutine of its own (see start), and syncLocked stops
// waiting at the deadline whether or not the Redis client honours it: a
// paused or hung Redis cannot hold a retry for longer than Timeout, nor
// Close. The call given up on is kept as q.pending until its goroutine
// ends, and no other call is made before that: the script's bookkeeping
// (cumulative grants and refunds acknowledged) assumes one call of a
// process at a time, and a late answer can then be applied as if it had
// come in time, so the tokens Redis granted to it are not lost.
func (q *Quota) syncLocked(parent context.Context, want, need int64) error {
	// The end of the caller's context is no outage: its error goes back to
	// the caller, and the quota neither falls back nor counts a failure.
	if err := parent.Err(); err != nil {
		return q.keyed(err)
	}
	fail := func(err error) error {
		if parent.Err() != nil {
			return q.keyed(err)
		}
		return q.failLocked(err)
	}
	ctx, cancel := context.WithTimeout(parent, q.opts.Timeout)
	defer cancel()
	if p := q.pending; p != nil {
		select {
		case <-p.done:
			q.pending = nil
			if p.err == nil {
				_ = q.applyLocked(p) // a late answer: take the grant and the acknowledgements it carries
			}
		case <-ctx.Done():
			return fail(fmt.Errorf("the previous call, sent %v ago, is still unanswered: %w",
				time.Since(p.start).Round(time.Millisecond), ctx.Err()))
		}
	}
	c := q.start(ctx, want, need)
	select {
	case <-c.done:
	case <-ctx.Done():
		q.pending = c
		return fail(fmt.Errorf("no answer within %v: %w", time.Since(c.start).Round(time.Millisecond), ctx.Err()))
	}
	if c.err != nil {
		return q.failLocked(c.err)
	}
	return q.applyLocked(c)
}

// start sends one call on a goroutine of its own, tracked by q.calls so that
// Close can wait for it. The goroutine's context keeps ctx's values but not
// its cancellation, with a deadline of Timeout: a client that honours
// deadlines ends the call then, even when its caller stopped waiting
// sooner. Holding q.mu.
func (q *Quota) start(ctx context.Context, want, need int64) *trip {
	c := &trip{done: make(chan struct{}), bal: q.lease.Load(), want: want, rtotal: q.refunds.Load(), start: time.Now()}
	args := []any{q.id, q.opts.Capacity, c.bal, q.gAck, q.rAck, c.rtotal, want, need,
		q.opts.LeaseTTL.Milliseconds(), q.opts.KeyTTL.Milliseconds()}
	q.trips.Add(1)
	q.calls.Add(1)
	go func() {
		defer q.calls.Done()
		defer close(c.done)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), q.opts.Timeout)
		defer cancel()
		c.r, c.err = q.run(ctx, q.keys, args...)
	}()
	return c
}

// applyLocked takes in the answer to c. Holding q.mu, with no other call
// made since c was sent.
func (q *Quota) applyLocked(c *trip) error {
	r, bal := c.r, c.bal
	wasFallback := q.fallback.Load()
	q.gAck += r.granted
	q.rAck = c.rtotal
	q.lastSync = c.start
	q.adjustLease(r.balance-bal, r.status == statusLost)
	q.deadline.Store(q.clock(c.start.Add(q.opts.LeaseTTL * 9 / 10)))
	q.pool.Store(r.tokens)
	q.replied.Store(q.clock(time.Now()))
	q.syncs.Add(1)
	if wasFallback && !q.closed.Load() {
		q.failures = 0
		q.fallback.Store(false)
		var lost int64
		if r.status == statusLost {
			lost = bal
		}
		q.logger.Info("redisquota: Redis is back; rejoined the fleet's quota",
			"key", q.keys[0], "pool", r.tokens, "lease_lost", lost)
	}
	if r.status == statusLost {
		err := fmt.Errorf("redisquota: %d tokens leased on %s were gone when the lease was renewed (the keys expired, were evicted or deleted, or the lease outlived its %v TTL); they were dropped: %w",
			bal, q.keys[1], q.opts.LeaseTTL, ErrLeaseLost)
		if !wasFallback {
			q.logger.Warn(err.Error(), "key", q.keys[0])
		}
		return err
	}
	return nil
}

// adjustLease adds d to the lease. The lease may go below zero: when a
// call gives back the lease's surplus, Redis puts in the pool tokens that
// takes may have spent while the call was under way, and the process owes
// them; its next call reports the negative balance and the script takes
// them from the pool. A lost lease stops at zero: tokens spent from a lease
// that Redis had already taken back are not owed twice.
func (q *Quota) adjustLease(d int64, lost bool) {
	for {
		l := q.lease.Load()
		n := l + d
		if lost {
			n = max(n, 0)
		}
		if q.lease.CompareAndSwap(l, n) {
			return
		}
	}
}

// keyed returns err naming the quota's keys, and wrapping ErrWrongType if
// Redis said WRONGTYPE.
func (q *Quota) keyed(err error) error {
	if strings.Contains(err.Error(), "WRONGTYPE") {
		return fmt.Errorf("redisquota: keys %s: %w: %w", strings.Join(q.keys, ", "), ErrWrongType, err)
	}
	return fmt.Errorf("redisquota: keys %s: %w", strings.Join(q.keys, ", "), err)
}

// failLocked switches to the local quota after a failed call, logging once
// per outage, and schedules the next attempt with jittered backoff.
func (q *Quota) failLocked(err error) error {
	err = q.keyed(err)
	q.failures++
	q.nextProbe = time.Now().Add(q.opts.reconnectDelay(q.failures))
	if !q.fallback.Load() && !q.closed.Load() {
		q.fallback.Store(true)
		q.logger.Warn("redisquota: Redis is unavailable; falling back to a local quota",
			"key", q.keys[0], "fallback_capacity", q.local.Capacity(), "error", err)
	}
	q.nudge() // the loop sets its timer to the next attempt
	return err
}

// reconnectDelay is the wait before trying Redis again after failures
// failed calls in a row: exponential from FlushInterval to ReconnectMax,
// with equal jitter (at least half the step), so that a fleet cut off at
// once comes back spread out, never in lockstep.
func (o Options) reconnectDelay(failures int) time.Duration {
	// The doubling stops at ReconnectMax before it can overflow.
	step := o.ReconnectMax
	if n := min(max(failures, 1)-1, 16); o.FlushInterval <= step>>n {
		step = o.FlushInterval << n
	}
	return step/2 + time.Duration(o.Rand()*float64(step/2))
}
