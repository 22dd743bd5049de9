package retry

import "time"

// StandardOptions configure a Standard strategy. The zero value gives the
// defaults of AWS retry behavior 2.1; each zero field takes its default.
type StandardOptions struct {
	MaxAttempts      int           // attempts including the first; 0 = 3, negative = 1
	Backoff          Backoff       // nil = Exponential{50ms, 20s, FullJitter}
	ThrottleBackoff  Backoff       // nil = Exponential{1s, 20s, FullJitter}
	Bucket           Quota         // nil = a bucket of 500 per scope; a given quota is shared by all scopes
	MaxRetryAfter    time.Duration // 0 = 5 min; a service hint longer than this refuses the retry
	RetryCost        int           // 0 = 14
	ThrottleCost     int           // 0 = 5
	TimeoutCost      int           // 0 = RetryCost
	SuccessIncrement int           // 0 = 1
	Capacity         int           // capacity of each scope's bucket when Bucket is nil; 0 = 500
	MaxScopes        int           // scopes with their own bucket when Bucket is nil; 0 = 1024
	Budget           *Budget       // nil = none; else a retry needs both the quota and the budget, and every request counts towards it
}

// Defaults of StandardOptions.
const (
	DefaultBucketCapacity = 500
	DefaultRetryCost      = 14
	DefaultThrottleCost   = 5
	defaultMaxScopes      = 1024
)

// LegacyStandardOptions returns the numbers of the AWS SDKs' standard retry
// mode from 2020 to 2026: 3 attempts, full-jitter exponential backoff from 1 s
// capped at 20 s, a retry costs 5 tokens and a timeout retry 10. Callers may
// change the result before passing it to NewStandard.
func LegacyStandardOptions() StandardOptions {
	backoff := Exponential{Base: time.Second, Max: 20 * time.Second, Jitter: FullJitter}
	return StandardOptions{
		Backoff:         backoff,
		ThrottleBackoff: backoff,
		RetryCost:       5,
		ThrottleCost:    5,
		TimeoutCost:     10,
	}
}

// Standard is the token-bucket strategy of the Smithy design and the AWS SDKs:
// bounded attempts, exponential backoff with jitter, and a retry quota. Each
// retry takes tokens from the quota; a first-attempt success adds one back and
// a successful retry refunds what it paid, as does a retry the service
// answers with a client fault (a NotFound, say), which shows it at work. When
// failures outnumber successes the quota drains and retries stop until the
// service recovers, which keeps a fleet of clients from multiplying the load
// on a service that is already failing. With the defaults the quota runs dry at about 22 % transient
// failures (32 % throttling) in steady state.
//
// The first attempt is always allowed, even with an empty quota: the quota
// only limits retries.
//
// A Standard is safe for concurrent use. Its zero value uses the defaults;
// NewStandard sets options. It must not be copied after first use.
type Standard struct {
	opts   StandardOptions
	tokens issuer
	scopes scopes[TokenBucket, *TokenBucket]
}

// NewStandard returns a Standard strategy with the given options.
func NewStandard(opts StandardOptions) *Standard {
	if b, ok := opts.Bucket.(*TokenBucket); ok && b == nil {
		opts.Bucket = nil // a nil *TokenBucket means the default, as it did before Quota
	}
	return &Standard{opts: opts}
}

// AcquireInitialToken returns the token for a request's first attempt. It
// never fails and never charges the quota.
func (s *Standard) AcquireInitialToken(scope string) (Token, error) {
	return s.tokens.acquire(s, scope), nil
}

// RefreshToken spends the token of a failed attempt and returns the token for
// the next one. It checks, in order: the token is valid (ErrInvalidToken), err
// may be retried (ErrNotRetryable: Unsafe never, MaybeSafe only for a server
// fault), an attempt is left (ErrMaxAttempts), the service's RetryAfter is
// within MaxRetryAfter (ErrRetryAfterTooLong), and the quota can pay for the
// retry (ErrQuotaExhausted, as a *QuotaError). The new token's delay is the
// backoff, or the service's RetryAfter if that is longer.
func (s *Standard) RefreshToken(t Token, err error) (Token, error) {
	return s.tokens.refresh(s, t, err)
}

// RecordSuccess spends the token of a successful attempt. A first attempt adds
// SuccessIncrement tokens to the quota; a retry refunds what it paid. The
// quota never grows beyond its capacity.
func (s *Standard) RecordSuccess(t Token) error { return s.tokens.record(s, t) }

// ReleaseToken spends a token whose attempt will not be made and refunds
// what its retry cost, so that a retry that never happened does not drain the
// quota. It implements Releaser.
func (s *Standard) ReleaseToken(t Token) error { return s.tokens.releaseToken(s, t) }

func (s *Standard) release(st state) {
	refund(st.bucket, st.cost)
	if b := s.opts.Budget; b != nil && st.cost > 0 {
		b.refund()
	}
}

func (s *Standard) begin(scope string) state { return state{bucket: s.quota(scope), scope: scope} }

func (s *Standard) quick() (Quota, bool) {
	if q := s.opts.Bucket; q != nil {
		return q, true
	}
	if b := s.scopes.unscoped.Load(); b != nil {
		return &b.val, true
	}
	return nil, false
}

func (s *Standard) quota(scope string) Quota {
	if s.opts.Bucket != nil {
		return s.opts.Bucket
	}
	if b := s.scopes.unscoped.Load(); b != nil && scope == "" {
		return &b.val
	}
	return s.scopes.get(scope, scopeConfig{capacity: orDefault(s.opts.Capacity, DefaultBucketCapacity)}, orDefault(s.opts.MaxScopes, defaultMaxScopes))
}

func (s *Standard) next(st state, err error) (state, error) {
	if st.retries == 0 && s.opts.Budget != nil {
		s.opts.Budget.Deposit() // the request, counted once, when its first attempt ends
	}
	p := s.policy()
	info, delay, refused := p.decide(&st, err)
	if refused != nil {
		if st.cost > 0 && answeredClientFault(info) {
			// The retry reached a service at work, which answered that
			// the request was at fault: its cost goes back, as a
			// successful retry's does (aws/aws-sdk-go-v2#3186).
			refund(st.bucket, st.cost)
		}
		return st, refused
	}
	cost := s.opts.cost(info)
	if !st.bucket.Take(cost) {
		return st, &QuotaError{Scope: st.scope, Cost: cost, Available: st.bucket.Available(), Delay: delay}
	}
	if b := s.opts.Budget; b != nil && !b.TryWithdraw() {
		refund(st.bucket, cost)
		return st, errBudget
	}
	st.retries++
	st.delay, st.cost = delay, cost
	return st, nil
}

func (s *Standard) succeed(bucket Quota, retries, cost int, _ int64) {
	n := cost
	if retries == 0 {
		n = orDefault(s.opts.SuccessIncrement, 1)
		if b := s.opts.Budget; b != nil {
			b.Deposit()
		}
	}
	// The bucket's own Refund, inlined here: this runs on every success.
	if b, ok := bucket.(*TokenBucket); ok {
		b.Refund(n)
		return
	}
	bucket.Refund(n)
}

// quiet reports whether the success of a first attempt paid from q
// records nothing: q is a full bucket, and no Budget counts requests. The
// fast path (see fastPath) asks before it calls succeed: most successes
// are such.
func (s *Standard) quiet(q Quota) bool {
	b, ok := q.(*TokenBucket)
	return ok && s.opts.Budget == nil && b.full()
}

// Available returns the tokens left in scope's quota: in the shared Bucket if
// one was given, else in the scope's own bucket (full if the scope is unused).
func (s *Standard) Available(scope string) int {
	if s.opts.Bucket != nil {
		return s.opts.Bucket.Available()
	}
	if b := s.scopes.peek(scope); b != nil {
		return b.Available()
	}
	return orDefault(s.opts.Capacity, DefaultBucketCapacity)
}

func (s *Standard) policy() policy {
	return newPolicy(s.opts.MaxAttempts, s.opts.Backoff, s.opts.ThrottleBackoff, s.opts.MaxRetryAfter)
}

// cost is what a retry after a failure classified as info takes from the
// quota, for Standard and for an Adaptive with a quota.
func (o *StandardOptions) cost(info Info) int {
	retry := orDefault(o.RetryCost, DefaultRetryCost)
	switch {
	case info.Throttle:
		return orDefault(o.ThrottleCost, DefaultThrottleCost)
	case info.Timeout:
		return orDefault(o.TimeoutCost, retry)
	}
	return retry
}

// answeredClientFault reports whether a failure classified as info is the
// service's answer that the request was at fault, one that no retry would
// fix: not a throttle or a timeout, which are the service's state.
func answeredClientFault(info Info) bool {
	return info.Fault == FaultClient && !info.Throttle && !info.Timeout && !info.Retryable()
}

// orDefault returns v, or def if v is zero or negative.
func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}
