package retry

import (
	"math"
	"time"
)

// Simple retries a bounded number of times with a backoff and no quota. It
// suits a single client, a batch job, or a caller that enforces its own retry
// budget; for clients of a shared service prefer Standard, whose quota stops
// retries when the service is failing.
//
// The zero value is ready to use: 3 attempts and Standard's backoff. A Simple
// is safe for concurrent use and must not be copied after first use.
type Simple struct {
	MaxAttempts   int           // attempts including the first; 0 = 3, negative = 1
	Backoff       Backoff       // nil = Exponential{50ms, 20s, FullJitter}, 1 s base for throttling errors
	MaxRetryAfter time.Duration // 0 = 5 min; a service hint longer than this refuses the retry

	tokens issuer
}

// AcquireInitialToken returns the token for a request's first attempt. It
// never fails.
func (s *Simple) AcquireInitialToken(scope string) (Token, error) {
	return s.tokens.acquire(s, scope), nil
}

// RefreshToken spends the token of a failed attempt and returns the token for
// the next one, making the same checks as Standard except the quota.
func (s *Simple) RefreshToken(t Token, err error) (Token, error) {
	return s.tokens.refresh(s, t, err)
}

// RecordSuccess spends the token of a successful attempt.
func (s *Simple) RecordSuccess(t Token) error { return s.tokens.record(s, t) }

// Next is the decision RefreshToken makes, taken without a token: for state
// that cannot live in one, such as a job kept in a database between its
// attempts, or millions of requests in a simulation. Given the retries made
// before the attempt that failed with err and the wait before that attempt
// (0 for a first attempt, which goes at once), it returns the wait before the
// next attempt, or why there is none, exactly as RefreshToken would for a
// token with that RetryCount and Delay. The caller keeps count: the next
// attempt has made retries+1 retries.
//
// Next keeps no state, so nothing stops a caller asking twice about the same
// attempt; the single use that tokens enforce is the caller's to keep.
// Negative arguments count as 0.
func (s *Simple) Next(retries int, prev time.Duration, err error) (time.Duration, error) {
	// Bounded so that counting the failed attempt cannot overflow.
	st := state{retries: min(max(retries, 0), math.MaxInt-1), delay: max(prev, 0)}
	next, refused := s.next(st, err)
	if refused != nil {
		return 0, refused
	}
	return next.delay, nil
}

func (s *Simple) begin(scope string) state { return state{scope: scope} }

func (s *Simple) quick() (Quota, bool) { return nil, true }

func (s *Simple) next(st state, err error) (state, error) {
	p := newPolicy(s.MaxAttempts, s.Backoff, s.Backoff, s.MaxRetryAfter)
	return advance(&p, st, err)
}

func (s *Simple) succeed(Quota, int, int, int64) {}

// ReleaseToken spends a token whose attempt will not be made. It implements
// Releaser.
func (s *Simple) ReleaseToken(t Token) error { return s.tokens.releaseToken(s, t) }

func (s *Simple) release(state) {}

// No never retries: every request gets exactly one attempt. Its refusals still
// say why (ErrNotRetryable or ErrMaxAttempts), and its tokens are single-use
// like every strategy's. The zero value is ready to use; it must not be copied
// after first use.
type No struct {
	tokens issuer
}

// AcquireInitialToken returns the token for the only attempt.
func (n *No) AcquireInitialToken(scope string) (Token, error) {
	return n.tokens.acquire(n, scope), nil
}

// RefreshToken spends t and refuses the retry.
func (n *No) RefreshToken(t Token, err error) (Token, error) { return n.tokens.refresh(n, t, err) }

// RecordSuccess spends t.
func (n *No) RecordSuccess(t Token) error { return n.tokens.record(n, t) }

func (n *No) begin(scope string) state { return state{scope: scope} }

func (n *No) quick() (Quota, bool) { return nil, true }

func (n *No) next(st state, err error) (state, error) {
	p := newPolicy(1, nil, nil, 0)
	return advance(&p, st, err)
}

func (n *No) succeed(Quota, int, int, int64) {}

// ReleaseToken spends a token whose attempt will not be made. It implements
// Releaser.
func (n *No) ReleaseToken(t Token) error { return n.tokens.releaseToken(n, t) }

func (n *No) release(state) {}

// advance is next for a strategy without a quota.
func advance(p *policy, st state, err error) (state, error) {
	_, delay, refused := p.decide(&st, err)
	if refused != nil {
		return st, refused
	}
	st.retries++
	st.delay = delay
	return st, nil
}
