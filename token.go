package retry

import (
	"sync"
	"sync/atomic"
	"time"
)

// Token is one request's retry state, handed from attempt to attempt. A
// strategy creates it; the request loop only reads RetryCount and Delay and
// gives it back. A Token is a small value, but it can be spent once: after a
// token has been refreshed or recorded, a strategy rejects it, and any copy of
// it, with ErrInvalidToken.
//
// Strategies outside this package make tokens with NewToken and keep their own
// per-request state in its value.
type Token struct {
	st    state
	value any    // a strategy's own state; the built-ins keep their *cell here
	gen   uint64 // which use of the cell this token stands for
}

// NewToken returns a token for the attempt after retryCount retries, to be
// made after delay, carrying a strategy's own state in value.
func NewToken(retryCount int, delay time.Duration, value any) Token {
	return Token{st: state{retries: max(retryCount, 0), delay: max(delay, 0)}, value: value}
}

// RetryCount returns the number of attempts made before the one this token is
// for: 0 for the first attempt.
func (t Token) RetryCount() int { return t.st.retries }

// Delay returns the wait before the attempt this token is for.
func (t Token) Delay() time.Duration { return t.st.delay }

// Value returns the state a strategy stored with NewToken.
func (t Token) Value() any { return t.value }

// issuer hands out single-use tokens without allocating. Each request borrows
// a cell from a pool; the cell's generation advances every time a token is
// spent, so a stale copy of a token, even one whose cell has since been
// reused by another request, no longer matches. The zero value is ready.
type issuer struct {
	cells sync.Pool
}

// cell is the per-request state that must be shared by every copy of a token.
type cell struct {
	owner *issuer
	gen   atomic.Uint64
}

// acquire starts a request: AcquireInitialToken for engine e.
func (is *issuer) acquire(e engine, scope string) Token {
	c, _ := is.cells.Get().(*cell)
	if c == nil {
		c = &cell{owner: is}
	}
	return Token{st: e.begin(scope), value: c, gen: c.gen.Load()}
}

// refresh is RefreshToken for engine e.
func (is *issuer) refresh(e engine, t Token, err error) (Token, error) {
	c, ok := is.spend(t)
	if !ok {
		return Token{}, errForeignToken
	}
	st, refused := e.next(t.st, err)
	if refused != nil {
		is.cells.Put(c)
		return Token{}, refused
	}
	return Token{st: st, value: c, gen: t.gen + 1}, nil
}

// record is RecordSuccess for engine e.
func (is *issuer) record(e engine, t Token) error {
	c, ok := is.spend(t)
	if !ok {
		return errForeignToken
	}
	e.succeed(t.st.bucket, t.st.retries, t.st.cost, t.st.started)
	is.cells.Put(c)
	return nil
}

// releaseToken is ReleaseToken for engine e.
func (is *issuer) releaseToken(e engine, t Token) error {
	c, ok := is.spend(t)
	if !ok {
		return errForeignToken
	}
	e.release(t.st)
	is.cells.Put(c)
	return nil
}

// spend marks t as used. It reports the token's cell, or false if t was not
// issued by is or was spent before.
func (is *issuer) spend(t Token) (*cell, bool) {
	c, ok := t.value.(*cell)
	if !ok || c.owner != is || !c.gen.CompareAndSwap(t.gen, t.gen+1) {
		return nil, false
	}
	return c, true
}
