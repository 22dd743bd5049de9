package retry

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrykit/retry/internal/errchain"
)

// Defaults of AdaptiveOptions.
const (
	DefaultAdaptiveStreak     = 3
	DefaultAdaptiveMultiplier = 2.0
	DefaultAdaptiveWindow     = 10 * time.Second
	DefaultAdaptiveMaxWait    = time.Second
)

// AdaptiveOptions configure an Adaptive strategy. The zero value is the
// recommended configuration; each zero field takes its default.
type AdaptiveOptions struct {
	// StandardOptions are the attempts, backoffs, the cap on a service's
	// Retry-After, the retry quota and an optional Budget, as for Standard.
	// Unlike Standard, Adaptive takes retry tokens from a quota only if one
	// is given (Bucket) or sized (Capacity): its failure streaks do the
	// quota's work, and unlike a quota that costs 14 tokens a retry they
	// keep retrying through a brownout that fails 30 % of attempts.
	StandardOptions

	// Streak is how many attempts in a row may fail in a scope before its
	// retries stop, until an attempt in it succeeds. While retries in the
	// scope are working (one succeeded within Window) it is 2·Streak+2,
	// except after throttling errors. 0 = 3; negative = no limit.
	Streak int
	// Multiplier is K in the client-side throttling of the Google SRE
	// book: when a scope's attempts over Window exceed K times those the
	// service accepted, a retry is refused with probability
	// (attempts − K·accepts) / (attempts + 1). 0 = 2; negative = off.
	Multiplier float64
	// Window is how long attempts and accepts count, and how recent a
	// successful retry must be to relax the streak. 0 = 10 s.
	Window time.Duration
	// RetryTimeouts retries attempts that timed out whatever the evidence.
	// By default a timeout is refused when the scope's evidence says the
	// service is overloaded: see Adaptive.
	RetryTimeouts bool

	// MaxWait is the longest wait the send-rate limiter imposes on an
	// attempt. 0 = 1 s.
	MaxWait time.Duration
	// MinRate is the send rate, in attempts per second per scope, that the
	// limiter never goes below. 0 = 0.5, AWS's number.
	MinRate float64
	// Beta is what a throttle multiplies the send rate by; 0 = 0.7.
	Beta float64
	// Scale is how fast the send rate grows back after a throttle (the
	// CUBIC curve's C); 0 = 0.4.
	Scale float64

	// Rand draws the probability of refusing a retry; nil = math/rand/v2.
	Rand func() float64
	// Now is the clock of the limiter and the windows; nil = time.Now.
	// Simulations and tests set it.
	Now func() time.Time
}

// Adaptive is the strategy to use when nothing else is known: it adapts to
// the health of the service in every process on its own, so that a fleet of
// clients that each run it cannot turn an outage, an overload or throttling
// into a retry storm, and it still retries whatever a retry would fix: a
// brownout, one bad replica of many, one slow attempt. It is the default of
// httpretry.Transport, of the Forrst client and of the gRPC interceptors.
//
// Per scope, it keeps four signals, each cheap enough for every request:
//
// Failure streaks. After 3 attempts in a row fail with no success between
// them, the scope's retries stop until an attempt succeeds. A client that
// was healthy and meets an outage thus retries its first failing request
// and no other: 2 retries in all, whether it sends one request a second or
// a thousand. While retries are working (one succeeded in the last 10 s) a
// streak of 8 is allowed instead: a brownout that fails 30 % of attempts at
// random is retried in full, because there retries are what succeeds.
// Throttling errors never relax the streak: a retry the service refused for
// load is no evidence that retrying helps.
//
// Client-side throttling, after the Google SRE book. Over 10 s it counts
// the attempts sent and those the service accepted; when attempts exceed
// twice the accepts (and number at least 10: a window of a few attempts
// says too little), a retry is refused with probability
// (attempts − 2·accepts)/(attempts + 1). The counts are kept across
// scopes too, of every scope whose own window does not show it healthy
// (10 attempts or more, half of them accepted), and such a scope must pass
// those as well, so that a failing service reached under many scope names
// (one per host, say) cannot collect a fresh allowance under each, nor
// borrow one from the successes of a healthy service beside it, while a
// healthy service that shares the strategy with a failing one keeps its
// retries.
//
// What counts. An answer that blames the client (gRPC NOT_FOUND, an HTTP
// 404, a Forrst client error) shows a service at work: it counts as an
// accepted attempt and ends the streak. A throttle and a timeout count as
// failures, and so does a client fault the service said may be retried
// (Info.Allowed, a 413 with a Retry-After): it did not take the request.
// The caller's own cancellation, or its own deadline, counts as nothing:
// it says nothing about the service. A deadline of the attempt's own
// (AttemptTimeout, an http.Client's Timeout, a context.WithTimeout inside
// the operation), met while the caller still waits, is the service's
// timeout, however the operation marked it: Do tells the strategy so.
//
// Latency. About every 100 ms (every attempt, for a client that sends less
// often), an attempt is timed, and the scope keeps the latest latency and
// the typical latency of the probes before it, smoothed over the window.
// This is what judges a timeout.
//
// Timeouts. An attempt that timed out is retried when the evidence shows the
// rest of the service healthy, and not otherwise: fewer than half of the
// window's attempts timed out (or it holds fewer than 10), and a success
// was timed in the last window and took at most 4 times the typical
// latency of those before it (more is a queue building at the server). One
// black-holed or slow replica among ten times out a tenth of attempts while
// the others answer in their usual time, and its retry, sent to another
// replica, succeeds; an overloaded server makes every answer slower before
// attempts start to time out, and a retry there doubles the work exactly
// when the server can do least (why gRPC's retry design and Finagle do not
// retry timeouts by default). A client that has timed no success in the
// last window has no evidence either way (one that sends a request every
// ten seconds cannot tell the onset of an overload from one bad replica),
// and does not retry: a fleet of such clients would double an overloaded
// server's load. RetryTimeouts retries timeouts whatever the evidence.
//
// A send-rate limiter, after AWS's adaptive retry mode: a token bucket
// whose rate follows the CUBIC curve (beta 0.7, scale 0.4, send rate
// measured over 0.5 s and smoothed 0.8, at least 0.5 attempts per second,
// at most twice the measured rate). It starts unlimited; a throttling error
// (HTTP 429, a throttling code) cuts the rate to 0.7 times what the client
// was sending, measured over the last tenth of a second or two (between
// the latency probes), so that a client younger than the window, or one
// that just ramped up, is cut from its real rate and not from a fraction
// of it; successes grow the rate back along the curve. Where it makes
// an attempt wait, first attempts included, the wait is the token's Delay:
// Do waits it, cancellably, and never past the context's deadline. Three
// changes from the AWS SDKs: no wait exceeds MaxWait (1 s), since a wait
// fixed at the rate of the worst moment would outlast the throttling and a
// queue of them would leave in a burst; a retry that would wait that long
// is refused instead (the client already sends more than the service
// accepts, and first attempts have the better claim to what it does); and
// once no throttle has been heard for twice the curve's recovery time (at
// least 2 s) the limiter stops limiting, as the next attempt or answer
// finds, where the AWS SDKs' limiter, once throttled, limits for the life
// of the client.
//
// The service's explicit permission (Info.Allowed: a Retry-After, Forrst
// retry guidance "allowed": true, a gRPC pushback) is honoured: it lifts
// the refusal of a timeout. It lifts nothing else: streaks, client-side
// throttling, the limiter, quotas and budgets still bound every retry.
//
// The windows and the limiter run on the monotonic clock: a wall clock
// that steps back (an NTP correction) changes nothing.
//
// Why these. A ratio budget cannot tell an outage from a brownout, and a
// token-bucket quota drains in both; what tells them apart is whether
// retries succeed, which the streak reads from the first failures. The
// same streak is what limits a client that sends one request a second,
// where a quota of 500 tokens is 35 retries. A timeout rule that reads only
// counts cannot tell a black-holed replica from the onset of overload, as
// both show one timeout after many successes; the latency of those
// successes can. The retry command's simulator (retry sim) measures each
// choice, with one server and with ten replicas behind a load balancer; the
// README has its tables.
//
// The first attempt is never refused, only delayed by the limiter. With
// the defaults there is no token quota (see AdaptiveOptions.StandardOptions);
// a Budget in the options bounds retries further. The success path reads no
// clock while the limiter is not limiting and no latency probe is due (and,
// once scopes other than "" are used, but once every ten successes of a
// scope whose window does not show it healthy), and allocates nothing.
//
// An Adaptive is safe for concurrent use; one should be shared by every
// caller of a service in a process. Its zero value uses the defaults;
// NewAdaptive sets options. It must not be copied after first use.
type Adaptive struct {
	opts   AdaptiveOptions
	tokens issuer
	scopes scopes[adaptiveScope, *adaptiveScope]
	// all counts, together, the attempts of every scope that is not judged
	// alone, once scopes other than "" are used.
	all outcomes
	// scoped is set when a scope other than "" is first used. Until then
	// the unscoped scope's outcomes are every scope's, and the success path
	// need not count them twice.
	scoped atomic.Bool
	clock  clock
}

// NewAdaptive returns an Adaptive strategy with the given options.
func NewAdaptive(opts AdaptiveOptions) *Adaptive {
	if b, ok := opts.Bucket.(*TokenBucket); ok && b == nil {
		opts.Bucket = nil
	}
	return &Adaptive{opts: opts}
}

// adaptiveScope is what an Adaptive keeps per scope. It is the Quota the
// scope's tokens carry (its methods reach the scope's quota, if any), so
// that a token leads back to its scope.
type adaptiveScope struct {
	bucket   TokenBucket // the scope's own quota, when it has one
	quota    Quota       // the quota retries pay: &bucket, a shared one, or nil
	outcomes outcomes
	limiting atomic.Bool // the limiter is enabled: consult it on every attempt
	mu       sync.Mutex  // guards limiter; never held while waiting
	limiter  cubic
	started  bool         // limiter has its clock
	streak   atomic.Int64 // failed attempts since the last success
	// alone: the scope's own window showed it healthy when last read (see
	// healthy), so that it is judged by that alone and its attempts stay
	// out of the strategy's counts of every scope, where a healthy
	// service's successes would vouch for a failing one reached under
	// other names.
	alone    atomic.Bool
	worked   atomic.Int64 // when a retry last succeeded, a reading of the strategy's clock
	timeouts rolling      // attempts that timed out, over the window
	latency  latency      // of successful attempts, probed
}

func (sc *adaptiveScope) init(cfg scopeConfig) {
	if cfg.clock != nil {
		sc.outcomes.placed.begin(cfg.clock.read(cfg.now))
	}
	switch {
	case cfg.shared != nil:
		sc.quota = cfg.shared
	case cfg.capacity > 0:
		sc.bucket.fill(cfg.capacity)
		sc.quota = &sc.bucket
	}
}

func (sc *adaptiveScope) idle() bool {
	return !sc.limiting.Load() && sc.streak.Load() == 0 && (sc.quota != &sc.bucket || sc.bucket.idle())
}

func (sc *adaptiveScope) inherit(old any) {
	o, ok := old.(*adaptiveScope)
	if !ok {
		return
	}
	sc.bucket.inherit(&o.bucket)
	// The window's counts and the limiter go with the name's replacement:
	// a drained, throttled scope dropped for room comes back no better.
	o.mu.Lock()
	sc.limiter, sc.started = o.limiter, o.started
	o.mu.Unlock()
	sc.limiting.Store(o.limiting.Load())
	sc.streak.Store(o.streak.Load())
	sc.alone.Store(o.alone.Load())
	sc.worked.Store(o.worked.Load())
	for i := range rollingSlots {
		sc.timeouts.slots[i].Store(o.timeouts.slots[i].Load())
	}
	sc.outcomes.total.Store(o.outcomes.total.Load())
	sc.outcomes.taken.Store(o.outcomes.taken.Load())
	sc.outcomes.placed.at.Store(o.outcomes.placed.at.Load())
	for i := range rollingSlots {
		sc.outcomes.attempts.slots[i].Store(o.outcomes.attempts.slots[i].Load())
		sc.outcomes.accepts.slots[i].Store(o.outcomes.accepts.slots[i].Load())
	}
}

// Take, Refund and Available reach the scope's quota; a scope without one
// takes anything.
func (sc *adaptiveScope) Take(n int) bool {
	if sc.quota == nil {
		return true
	}
	return sc.quota.Take(n)
}

func (sc *adaptiveScope) Refund(n int) {
	if sc.quota != nil {
		refund(sc.quota, n)
	}
}

func (sc *adaptiveScope) Available() int {
	if sc.quota == nil {
		return math.MaxInt
	}
	return sc.quota.Available()
}

// AcquireInitialToken returns the token for a request's first attempt. It
// never fails; its Delay is the wait the send-rate limiter imposes, if it is
// limiting.
func (a *Adaptive) AcquireInitialToken(scope string) (Token, error) {
	return a.tokens.acquire(a, scope), nil
}

// local returns the state of the empty scope when it exists, is not
// limiting, and nothing but the scope needs to hear of a success: the
// common case, which Do serves without an interface call.
func (a *Adaptive) local() *adaptiveScope {
	if a.opts.Bucket != nil || a.opts.Budget != nil || a.opts.Capacity > 0 {
		return nil
	}
	if b := a.scopes.unscoped.Load(); b != nil && !b.val.limiting.Load() && !b.val.latency.due.Load() {
		return &b.val
	}
	return nil
}

// firstSucceeded is succeed for a first attempt in sc, a scope local
// returned; succeed calls it too, for what every success does.
func (a *Adaptive) firstSucceeded(sc *adaptiveScope) {
	if sc.streak.Load() != 0 {
		sc.streak.Store(0)
	}
	total := sc.outcomes.success()
	if full(total) {
		sc.outcomes.count(a.now(), a.window())
	}
	sc.latency.succeeded(uint32(total))
	if !a.scoped.Load() || sc.alone.Load() {
		return
	}
	if uint32(total>>32)%minEvidence == 0 && sc.judge(sc.outcomes.count(a.now(), a.window())) {
		// Every minEvidence attempts, a scope not judged alone is judged
		// again without waiting for a probe, whose stride of successes
		// (a hundred, for a scope that succeeds a thousand times a
		// second) would count towards every scope's.
		return
	}
	if full(a.all.success()) {
		a.all.count(a.now(), a.window())
	}
}

func (a *Adaptive) quick(scope string) (Quota, bool) {
	sc := a.quota(scope).(*adaptiveScope)
	return sc, !sc.limiting.Load() && !sc.latency.due.Load()
}

func (a *Adaptive) begin(scope string) state {
	sc := a.quota(scope).(*adaptiveScope)
	st := state{bucket: sc, scope: scope}
	if sc.latency.claim(uint32(sc.outcomes.total.Load())) {
		st.started = a.now()
	}
	if sc.limiting.Load() {
		st.delay, st.limited = a.reserve(sc)
	}
	return st
}

// RefreshToken spends the token of a failed attempt and returns the token
// for the next one. It checks what Standard checks (ErrInvalidToken,
// ErrNotRetryable, ErrMaxAttempts, ErrRetryAfterTooLong, and
// ErrQuotaExhausted if there is a quota), then the client-side throttling
// and the Budget (ErrBudgetExhausted). The new token's delay is the longest
// of the backoff, the service's RetryAfter and the limiter's wait.
func (a *Adaptive) RefreshToken(t Token, err error) (Token, error) {
	return a.tokens.refresh(a, t, err)
}

// RecordSuccess spends the token of a successful attempt, counts the
// success, and refunds a quota as Standard does.
func (a *Adaptive) RecordSuccess(t Token) error { return a.tokens.record(a, t) }

// ReleaseToken spends a token whose attempt will not be made: what its
// retry took from the quota and the budget goes back, and so does the
// limiter's token. It implements Releaser.
func (a *Adaptive) ReleaseToken(t Token) error {
	c, ok := a.tokens.spend(t)
	if !ok {
		return errForeignToken
	}
	a.release(t.st)
	a.tokens.cells.Put(c)
	return nil
}

// Rate returns the send rate the limiter allows in scope, in attempts per
// second, and whether it is limiting at all (it is not until the service
// throttles the scope, and stops some time after the throttling ends).
func (a *Adaptive) Rate(scope string) (rate float64, limiting bool) {
	sc := a.scopes.peek(scope)
	if sc == nil || !sc.limiting.Load() {
		return math.Inf(1), false
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.limiter.fillRate, true
}

// Available returns the tokens left in scope's quota, or math.MaxInt if
// the strategy has none.
func (a *Adaptive) Available(scope string) int {
	if q := a.opts.Bucket; q != nil {
		return q.Available()
	}
	if sc := a.scopes.peek(scope); sc != nil {
		return sc.Available()
	}
	if a.opts.Capacity > 0 {
		return a.opts.Capacity
	}
	return math.MaxInt
}

func (a *Adaptive) quota(scope string) Quota {
	var sc *adaptiveScope
	if b := a.scopes.unscoped.Load(); b != nil && scope == "" {
		sc = &b.val
	} else {
		if scope != "" && !a.scoped.Load() {
			// The strategy-wide counts start now.
			a.all.placed.begin(a.now())
			a.scoped.Store(true)
		}
		sc = a.scopes.get(scope, scopeConfig{capacity: a.opts.Capacity, shared: a.opts.Bucket, clock: &a.clock, now: a.opts.Now}, orDefault(a.opts.MaxScopes, defaultMaxScopes))
	}
	return sc
}

func (a *Adaptive) next(st state, err error) (state, error) {
	sc := st.bucket.(*adaptiveScope)
	p := newPolicy(a.opts.MaxAttempts, a.opts.Backoff, a.opts.ThrottleBackoff, a.opts.MaxRetryAfter)
	info, delay, refused := p.decide(&st, err)
	if st.retries == 0 {
		a.deposit()
	}
	st.started = 0 // a retry is not timed
	now := a.now()
	e := a.observe(sc, now, info, err)
	switch {
	case refused != nil:
		return st, refused
	case e.kind != failed:
		// A Safe answer of a client fault the service did not ask to have
		// retried, or a Safe error of the caller's own context (which Do
		// does not retry, but a loop of its own may ask about): the
		// service is not failing, so its signals have nothing to refuse.
	case info.Timeout && !a.opts.RetryTimeouts && !info.Allowed && a.overloaded(sc, e, now):
		return st, errTimeoutNotRetried
	case a.streakTooLong(sc, e.streak, info, now):
		return st, errStreak
	case a.throttledClient(&e):
		if e.all {
			return st, errThrottledAll
		}
		return st, errThrottledClient
	}
	cost := a.cost(info)
	if !sc.Take(cost) {
		return st, &QuotaError{Scope: st.scope, Cost: cost, Available: sc.Available(), Delay: delay}
	}
	if b := a.opts.Budget; b != nil && !b.TryWithdraw() {
		sc.Refund(cost)
		return st, errBudget
	}
	st.limited = false
	if sc.limiting.Load() {
		wait, limited := a.reserve(sc)
		if limited && wait >= orDuration(a.opts.MaxWait, DefaultAdaptiveMaxWait) && e.attempts >= minEvidence {
			// The client already sends more than the throttled rate
			// allows: a retry would only add to the queue of attempts.
			// (A client with a handful of attempts has no rate to speak
			// of, and its limiter starts from the floor: it retries.)
			a.release(state{bucket: sc, cost: cost, retries: 1, limited: true})
			return st, errLimited
		}
		delay = max(delay, wait)
		st.limited = limited
	}
	st.retries++
	st.delay, st.cost = delay, cost
	return st, nil
}

// Refusals of Adaptive's own.
var (
	errStreak            = &refusal{ErrBudgetExhausted, "too many attempts in a row failed in this scope; retries resume after a success"}
	errThrottledClient   = &refusal{ErrBudgetExhausted, "the service accepts too few attempts in this scope to retry (client-side throttling)"}
	errThrottledAll      = &refusal{ErrBudgetExhausted, "the service accepts too few attempts across all scopes, and this scope's own attempts show no health of its own, to retry (client-side throttling)"}
	errLimited           = &refusal{ErrBudgetExhausted, "the send-rate limiter of this scope, slowed by the service's throttling, has no room for a retry"}
	errTimeoutNotRetried = &refusal{ErrNotRetryable, "the attempt timed out and this scope's recent attempts do not show the service otherwise healthy (many time out, latency climbs, or no success was timed lately), so it may be overload (AdaptiveOptions.RetryTimeouts allows it)"}
)

// answer kinds, as Adaptive's signals count them.
const (
	failed   = iota // the service failed the attempt: a server fault, a throttle, a timeout
	accepted        // the service answered, with a fault of the client's: it is working
	ignored         // the caller gave up: nothing about the service
)

// evidence is what a scope's signals say after one failed attempt.
type evidence struct {
	kind              int
	streak            int64   // failed attempts in a row, this one included
	attempts, accepts float64 // the scope's window
	timeouts          float64 // attempts in the scope's window that timed out
	allAttempts       float64 // every scope's window, while other scopes exist
	allAccepts        float64
	all               bool // other scopes exist and this one is not judged alone: the all-scope counts apply
}

// observe counts a failed attempt in sc's signals as what it says about
// the service, and returns what they say now.
//
// An answer that blames the client (gRPC NOT_FOUND, HTTP 404, a Forrst
// client error) shows a service at work: it counts as an accepted attempt
// and ends the scope's failure streak, or a scope where most calls look
// things up that are not there would have its retries refused. A throttle
// is no such answer, nor is a timeout: both are the service's load. Nor is
// a client fault the service gave its permission to retry (Info.Allowed:
// a 413 with a Retry-After, Forrst guidance "allowed": true): the service
// asks for the request again, it did not take it, and counted as accepted
// its answer would lift the streak and client-side throttling that the
// permission never lifts. The caller's own cancellation, or its own
// deadline, counts as nothing.
func (a *Adaptive) observe(sc *adaptiveScope, now int64, info Info, err error) evidence {
	var e evidence
	w := a.window()
	switch {
	case info.Fault == FaultClient && !info.Throttle && !info.Timeout && !info.Allowed && !callerGaveUp(err):
		e.kind = accepted
		e.attempts, e.accepts = sc.outcomes.accept(now, w)
		if e.all = a.scoped.Load() && !sc.judge(e.attempts, e.accepts); e.all {
			e.allAttempts, e.allAccepts = a.all.accept(now, w)
		}
		if sc.streak.Load() != 0 {
			sc.streak.Store(0)
		}
	case info.Fault != FaultServer && callerGaveUp(err):
		e.kind = ignored
		return e
	default:
		e.attempts, e.accepts = sc.outcomes.failure(now, w)
		if e.all = a.scoped.Load() && !sc.judge(e.attempts, e.accepts); e.all {
			e.allAttempts, e.allAccepts = a.all.failure(now, w)
		}
		e.streak = sc.streak.Add(1)
		slot := slotOf(now, w)
		if info.Timeout {
			sc.timeouts.add(slot, milli)
		}
		e.timeouts = float64(sc.timeouts.sum(slot)) / milli
	}
	if info.Throttle || sc.limiting.Load() {
		a.tell(sc, now, info.Throttle)
	}
	return e
}

// callerGaveUp reports whether err is a context's error that no one
// classified otherwise: the caller cancelled, or its deadline passed. An
// attempt that timed out while the caller waited (AttemptTimeout, or a
// deadline of the operation's own, which Do's loop marks: see timing) is
// no such error: the service did not answer in time.
func callerGaveUp(err error) bool {
	var w errchain.Walk
	if w.Find(err, func(err error) bool { _, ok := err.(*attemptTimeoutError); return ok }) {
		return false
	}
	return isContextError(err)
}

// overloaded reports whether sc's evidence fails to show that a timeout
// there is one bad replica or one slow attempt rather than the service's
// overload, which a retry would add to: at least half of a window of
// attempts (minEvidence or more) timed out, or the latency of its
// successful attempts is climbing, or there is no recent latency to judge
// by. See Adaptive for why.
func (a *Adaptive) overloaded(sc *adaptiveScope, e evidence, now int64) bool {
	if e.attempts >= minEvidence && 2*e.timeouts >= e.attempts {
		return true
	}
	return !sc.latency.healthy(now, a.window())
}

// throttledClient reports whether client-side throttling refuses a retry,
// and sets e.all when it is the every-scope counts that do. Those apply
// only to a scope that shows no health of its own (too few attempts to
// judge, or too few accepted; observe set e.all for no other), and count
// only such scopes: a failing service reached under many scope names
// cannot collect a fresh allowance under each, nor borrow one from the
// successes of a healthy service beside it, and yet one failing service
// does not starve another, healthy one that shares the strategy.
func (a *Adaptive) throttledClient(e *evidence) bool {
	reject := a.rejection(e.attempts, e.accepts)
	if e.all && reject == 0 {
		reject = a.rejection(e.allAttempts, e.allAccepts)
	} else {
		e.all = false
	}
	return reject > 0 && a.rand() < reject
}

// streakTooLong reports whether a scope's failures in a row, streak, stop
// its retries.
func (a *Adaptive) streakTooLong(sc *adaptiveScope, streak int64, info Info, now int64) bool {
	limit := int64(a.opts.Streak)
	switch {
	case limit < 0:
		return false
	case limit == 0:
		limit = DefaultAdaptiveStreak
	}
	if last := sc.worked.Load(); !info.Throttle && last != 0 && now-last < int64(a.window()) {
		limit = 2*limit + 2 // retries are working: a brownout, not an outage
	}
	return streak >= limit
}

// healthy reports whether a window of a scope's attempts and accepts shows
// it healthy on its own: minEvidence attempts or more, half of them
// accepted.
func healthy(attempts, accepts float64) bool {
	return attempts >= minEvidence && accepts*2 >= attempts
}

// judge records whether sc's window, attempts and accepts, shows it
// healthy on its own, and reports it.
func (sc *adaptiveScope) judge(attempts, accepts float64) bool {
	h := healthy(attempts, accepts)
	if sc.alone.Load() != h {
		sc.alone.Store(h)
	}
	return h
}

// rejection is the client-side throttling probability of the Google SRE
// book for a window's counts.
func (a *Adaptive) rejection(attempts, accepts float64) float64 {
	k := a.opts.Multiplier
	switch {
	case k == 0 || math.IsNaN(k) || math.IsInf(k, 0):
		k = DefaultAdaptiveMultiplier
	case k < 0:
		return 0
	}
	if attempts < minEvidence {
		// A window with a handful of attempts says little: the formula
		// would refuse half the retries of a client whose very first
		// request failed. The streak covers a cold start.
		return 0
	}
	return max(0, (attempts-k*accepts)/(attempts+1))
}

// minEvidence is the attempts a window must hold before client-side
// throttling judges the service by it.
const minEvidence = 10

// cost is what a retry after a failure classified as info takes from the
// quota: nothing without one (see AdaptiveOptions.StandardOptions).
func (a *Adaptive) cost(info Info) int {
	if a.opts.Bucket == nil && a.opts.Capacity <= 0 {
		return 0
	}
	return a.opts.StandardOptions.cost(info)
}

func (a *Adaptive) succeed(bucket Quota, retries, cost int, started int64) {
	sc := bucket.(*adaptiveScope)
	if retries == 0 {
		a.deposit()
		sc.Refund(orDefault(a.opts.SuccessIncrement, 1))
	} else {
		sc.Refund(cost)
		sc.worked.Store(a.now())
	}
	a.firstSucceeded(sc)
	if started != 0 {
		// After the success is counted: the probe's own attempt is then
		// behind the mark that measures what the client sends next.
		now := a.now()
		sc.latency.record(started, now, sc.outcomes.total.Load(), a.window())
		if a.scoped.Load() {
			// A scope that only succeeds consults its window at no
			// failure: the probes keep its judgement current.
			sc.judge(sc.outcomes.count(now, a.window()))
		}
	}
	if sc.limiting.Load() {
		a.tell(sc, a.now(), false)
	}
}

// release takes back a granted attempt that will not be made.
func (a *Adaptive) release(st state) {
	sc, ok := st.bucket.(*adaptiveScope)
	if !ok {
		return
	}
	if st.retries > 0 || st.cost > 0 {
		sc.Refund(st.cost)
		if b := a.opts.Budget; b != nil && st.retries > 0 {
			b.refund()
		}
	}
	if st.limited {
		sc.mu.Lock()
		sc.limiter.cancel()
		sc.mu.Unlock()
	}
}

// deposit counts a request in the Budget, if there is one.
func (a *Adaptive) deposit() {
	if b := a.opts.Budget; b != nil {
		b.Deposit()
	}
}

// tell updates sc's limiter with an answer at now, a throttle or not,
// starts it limiting on a throttle, and stops it once the throttling has
// been over for a while.
func (a *Adaptive) tell(sc *adaptiveScope, now int64, throttled bool) {
	t := seconds(now)
	sc.mu.Lock()
	defer sc.mu.Unlock()
	a.startLimiter(sc, t)
	if throttled && !sc.limiter.enabled {
		// The limiter did not hear the successes while it was off: take
		// what the client sent since the latency probes before last, a
		// tenth of a second or two. The window's counts over the whole
		// window would measure a client younger than the window, or one
		// that just ramped up, at a fraction of its rate, and the cut
		// would take it to a fraction of that. Without a probe yet, the
		// window's attempts over the window.
		rate, ok := sc.latency.sendRate(now, uint32(sc.outcomes.total.Load()>>32))
		if !ok {
			attempts, _ := sc.outcomes.count(now, a.window())
			rate = attempts / a.window().Seconds()
		}
		sc.limiter.measured = rate
	}
	sc.limiter.update(t, throttled)
	switch {
	case sc.limiter.enabled && !sc.limiting.Load():
		sc.limiting.Store(true)
	case !throttled:
		settle(sc, t)
	}
}

// settle stops sc's limiter at t, a reading in seconds, if the throttling
// has been over long enough, and reports whether it is off. Callers hold
// sc.mu.
func settle(sc *adaptiveScope, t float64) bool {
	if sc.limiter.settled(t, quietSeconds) {
		sc.limiter.enabled = false
		sc.limiting.Store(false)
	}
	return !sc.limiter.enabled
}

// quietSeconds is the least time without a throttle after which the
// limiter stops limiting.
const quietSeconds = 2

// reserve takes a limiter token for an attempt now and returns its wait,
// and false if the limiter has stopped limiting instead: the throttling
// has been over long enough, and no answer since has said so (a client
// quiet since it was throttled would otherwise find it still limiting,
// and its next burst would wait).
func (a *Adaptive) reserve(sc *adaptiveScope) (time.Duration, bool) {
	t := seconds(a.now())
	limit := orDuration(a.opts.MaxWait, DefaultAdaptiveMaxWait)
	sc.mu.Lock()
	a.startLimiter(sc, t)
	if settle(sc, t) {
		sc.mu.Unlock()
		return 0, false
	}
	wait := sc.limiter.reserve(t, limit.Seconds()) * float64(time.Second)
	sc.mu.Unlock()
	if wait >= float64(limit) {
		// float64(limit) may round up past the largest Duration, and a
		// conversion that overflows gives a negative one.
		return limit, true
	}
	return time.Duration(wait), true
}

func (a *Adaptive) startLimiter(sc *adaptiveScope, t float64) {
	if !sc.started {
		sc.limiter.start(t, a.opts.MinRate, a.opts.Beta, a.opts.Scale)
		sc.started = true
	}
}

func (a *Adaptive) rand() float64 {
	if a.opts.Rand != nil {
		return a.opts.Rand()
	}
	return rand.Float64()
}

// now reads the strategy's clock (see clock): monotonic, in nanoseconds.
func (a *Adaptive) now() int64 { return a.clock.read(a.opts.Now) }

// seconds is a reading of the strategy's clock in seconds, the limiter's
// unit.
func seconds(t int64) float64 { return float64(t) / 1e9 }

func (a *Adaptive) window() time.Duration { return orDuration(a.opts.Window, DefaultAdaptiveWindow) }

// orDuration returns d, or def if d is zero or negative.
func orDuration(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
