package retry

import (
	"context"
	"time"
)

// state is what this package's strategies know about one request.
type state struct {
	retries int           // attempts made before the next one
	delay   time.Duration // wait before the next attempt
	cost    int           // tokens paid to the quota for the next attempt
	bucket  Quota         // the quota this request pays into; nil for none
	scope   string
	limited bool  // the attempt holds a token of an Adaptive's send-rate limiter
	started int64 // when the attempt began, if an Adaptive times it (a clock reading); 0 = not timed
}

// engine is the one protocol between the loop and this package's
// strategies. Their Strategy methods wrap it in single-use tokens (see
// issuer); Do and DoValue drive it directly with the request's state on
// their own stack, where no token can be reused: the fast path (fastPath)
// with quick and succeed, called without an interface call, and the loop
// (driver) with the rest, so that the path where nothing fails costs a few
// nanoseconds.
type engine interface {
	// begin returns the state of a request's first attempt in scope: the
	// quota that pays for its retries, and any wait before it.
	begin(scope string) state
	// quick returns the quota of the empty scope and true if a request's
	// first attempt there may go at once, without begin: the fast path
	// (see fastPath), where even returning a state costs more than the
	// rest. It reads no clock and creates nothing: false sends the call to
	// the loop, whose begin does.
	quick() (Quota, bool)
	// next decides on a retry after err and, if granted, returns the state
	// of the next attempt. (States pass by value: a pointer handed to an
	// interface method would move the loop's state to the heap.)
	next(st state, err error) (state, error)
	// succeed records that the attempt st is for succeeded. It takes the
	// fields it needs rather than the state: copying a state that was just
	// written field by field stalls the CPU (store forwarding fails) for
	// longer than the whole success path takes otherwise.
	succeed(bucket Quota, retries, cost int, started int64)
	// release takes back a granted attempt that will not be made.
	release(st state)
}

// driver runs a request through a strategy: directly for this package's
// strategies (e non-nil), through single-use tokens for any other.
type driver struct {
	e       engine
	st      state
	s       Strategy
	tok     Token
	noToken error       // why the strategy granted no first token: one attempt, then give up
	timer   *time.Timer // created by the first wait, reused by later ones
}

// begin starts the request in scope, or sets noToken.
func (d *driver) begin(scope string) {
	if d.e != nil {
		d.st = d.e.begin(scope)
		return
	}
	tok, err := d.s.AcquireInitialToken(scope)
	if err != nil {
		d.noToken = err
		return
	}
	d.tok = tok
}

func (d *driver) delay() time.Duration {
	if d.e != nil {
		return d.st.delay
	}
	return d.tok.Delay()
}

func (d *driver) retry(err error) error {
	if d.e != nil {
		st, refused := d.e.next(d.st, err)
		if refused == nil {
			d.st = st
		}
		return refused
	}
	next, refused := d.s.RefreshToken(d.tok, err)
	if refused == nil {
		d.tok = next
	}
	return refused
}

func (d *driver) success() {
	switch {
	case d.e != nil:
		d.e.succeed(d.st.bucket, d.st.retries, d.st.cost, d.st.started)
	case d.noToken == nil:
		_ = d.s.RecordSuccess(d.tok) // the call succeeded whatever the strategy thinks of its token
	}
}

// refuse tells the strategy of a failure that a BeforeRetry check refused to
// retry, so that what it learns of the service's health (an Adaptive's
// failure counts and throttling) misses no failure. The failure comes to it
// marked Unsafe, which no strategy retries or charges for; a strategy that
// grants a retry anyway gets it back.
func (d *driver) refuse(err error) {
	if d.retry(refusedError{err}) == nil {
		d.release()
	}
}

// refusedError is a failure the loop will not retry, whatever the strategy
// says: it classifies as err does, but Unsafe.
type refusedError struct{ err error }

func (e refusedError) Error() string { return e.err.Error() }

func (e refusedError) Unwrap() error { return e.err }

func (e refusedError) RetryInfo() Info {
	info := Classify(e.err)
	info.Safety = Unsafe
	return info
}

// release hands back a granted retry the loop will not make.
func (d *driver) release() {
	switch {
	case d.e != nil:
		d.e.release(d.st)
		d.st.cost, d.st.limited = 0, false
	case d.noToken == nil:
		if r, ok := d.s.(Releaser); ok {
			_ = r.ReleaseToken(d.tok)
		}
	}
}

// sleep waits d, reusing the driver's timer.
func (d *driver) sleep(ctx context.Context, delay time.Duration) error {
	return sleep(ctx, delay, &d.timer)
}

// builtin returns s as an engine if it is exactly one of this package's
// strategies: a caller's type that embeds one of them has the engine's
// methods too, but may override the Strategy methods.
func builtin(s Strategy) engine {
	switch e := s.(type) {
	case *Standard:
		return e
	case *Simple:
		return e
	case *No:
		return e
	case *Adaptive:
		return e
	}
	return nil
}
