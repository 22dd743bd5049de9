package retry

import (
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// Adaptive is the strategy to use when nothing else is known: it adapts to
// the health of the service in every process on its own, so that a fleet of
// clients that each run it cannot turn an outage, an overload or throttling
// into a retry storm, and it still retries whatever a retry would fix: a
// brownout, one bad replica of many, one slow attempt. It is the default of
// httpretry.Transport, of the Forrst client and of the gRPC interceptors.
//
// Per scope, a retry must pass four signals, and the quota and Budget if
// the options give them (ErrBudgetExhausted, ErrNotRetryable or
// ErrQuotaExhausted otherwise):
//
//   - Failure streaks: after Streak (3) attempts in a row fail, the scope's
//     retries stop until an attempt succeeds; 2·Streak+2 while retries are
//     working (one succeeded within Window), except after throttling.
//   - Client-side throttling (Google SRE book): a retry is refused with
//     probability (attempts − Multiplier·accepts)/(attempts + 1) over Window,
//     once the window holds at least 10 attempts, and across scopes for a
//     scope whose own window does not show it healthy.
//   - Timeouts: an attempt that timed out is retried only when the scope's
//     recent attempts show the rest of the service healthy (fewer than half
//     timed out, and a recent success took at most 4 times the typical
//     latency), or with RetryTimeouts.
//   - A send-rate limiter (AWS's adaptive mode, on the CUBIC curve) that a
//     throttle starts and that stops once the throttling is over: its wait,
//     at most MaxWait, is the token's Delay, first attempts included; a
//     retry that would wait that long is refused.
//
// An answer that blames the client counts as accepted; a throttle, a
// timeout and a client fault the service said may be retried count as
// failures; the caller's own cancellation or deadline counts as nothing. A
// deadline of the attempt's own (AttemptTimeout, an http.Client's Timeout)
// met while the caller waits is the service's timeout. The service's
// explicit permission (Info.Allowed) lifts the refusal of a timeout and
// nothing else. The windows and the limiter run on the monotonic clock.
//
// The first attempt is never refused, only delayed by the limiter. With
// the defaults there is no token quota (see AdaptiveOptions.StandardOptions).
// The success path allocates nothing and reads no clock while the limiter
// is not limiting and no latency probe is due. docs/adaptive.md tells what
// each signal reads and why these, with the simulator's measurements.
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
	// bound is set when the strategy is bound to a fleet's evidence
	// (sharedadaptive.go): its scopes then keep a fleetScope.
	bound atomic.Bool
	clock clock
}

// NewAdaptive returns an Adaptive strategy with the given options.
func NewAdaptive(opts AdaptiveOptions) *Adaptive {
	if b, ok := opts.Bucket.(*TokenBucket); ok && b == nil {
		opts.Bucket = nil
	}
	return &Adaptive{opts: opts}
}

// AcquireInitialToken returns the token for a request's first attempt. It
// never fails; its Delay is the wait the send-rate limiter imposes, if it is
// limiting.
func (a *Adaptive) AcquireInitialToken(scope string) (Token, error) {
	return a.tokens.acquire(a, scope), nil
}

// success counts a success in sc's signals: what every success does,
// whatever it paid (see succeed).
func (a *Adaptive) success(sc *adaptiveScope) {
	if sc.streak.Load() != 0 {
		sc.streak.Store(0)
	}
	total := sc.outcomes.success()
	if full(total) {
		sc.outcomes.count(a.now(), a.window())
	}
	sc.latency.sawSuccess(uint32(total))
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

func (a *Adaptive) quick() (Quota, bool) {
	b := a.scopes.unscoped.Load()
	if b == nil {
		return nil, false
	}
	sc := &b.val
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
		sc = a.scopes.get(scope, scopeConfig{capacity: a.opts.Capacity, shared: a.opts.Bucket, clock: &a.clock, now: a.opts.Now, fleet: a.bound.Load()}, orDefault(a.opts.MaxScopes, defaultMaxScopes))
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
		if st.cost > 0 && answeredClientFault(info) {
			// As Standard: the retry reached a service at work
			// (aws/aws-sdk-go-v2#3186).
			sc.Refund(st.cost)
		}
		return st, refused
	case e.answer != answerFailed:
		// A Safe answer of a client fault the service did not ask to have
		// retried, or a Safe error of the caller's own context (which Do
		// does not retry, but a loop of its own may ask about): the
		// service is not failing, so its signals have nothing to refuse.
	case info.Timeout && !a.opts.RetryTimeouts && !info.Allowed && a.overloaded(sc, e, now):
		return st, errTimeoutNotRetried
	case a.streakTooLong(e, info, now):
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
			// of, and its limiter starts from the floor: it retries. In
			// a fleet sharing its evidence the attempts are the fleet's,
			// though the limiter paces this process alone: a quiet
			// process of a throttled fleet is refused as a busy one is.
			// Counting its own instead, retry sim's throttle scenario at
			// 10,000 clients sends 1.38x the load during the incident
			// where this sends 1.15x, for the same success.)
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
	if retries == 0 && started == 0 && sc.quota == nil && a.opts.Budget == nil {
		// The common case, first: nothing to refund.
		a.success(sc)
		if sc.limiting.Load() {
			a.tell(sc, a.now(), false)
		}
		return
	}
	a.succeedSlow(sc, retries, cost, started)
}

// succeedSlow is succeed but for its common case.
func (a *Adaptive) succeedSlow(sc *adaptiveScope, retries, cost int, started int64) {
	if retries == 0 {
		a.deposit()
		sc.Refund(orDefault(a.opts.SuccessIncrement, 1))
	} else {
		sc.Refund(cost)
		sc.worked.Store(a.now())
	}
	a.success(sc)
	if started != 0 {
		// After the success is counted: the probe's own attempt is then
		// behind the mark that measures what the client sends next.
		now := a.now()
		sc.latency.record(started, now, sc.outcomes.total.Load(), a.window())
		if f := sc.fleet; f != nil {
			f.probed(now - started)
		}
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

func (a *Adaptive) rand() float64 {
	if a.opts.Rand != nil {
		return a.opts.Rand()
	}
	return rand.Float64()
}

// now reads the strategy's clock (see clock): monotonic, in nanoseconds.
func (a *Adaptive) now() int64 { return a.clock.read(a.opts.Now) }

func (a *Adaptive) window() time.Duration { return orDuration(a.opts.Window, DefaultAdaptiveWindow) }

// orDuration returns d, or def if d is zero or negative.
func orDuration(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
