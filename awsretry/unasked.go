package awsretry

import (
	"fmt"
	"time"

	"github.com/retrykit/retry"
)

// The SDK asks GetRetryToken for a retry right after the attempt's release
// parked the call, on the same goroutine, unless it ends the call itself:
// with the client's RetryMaxAttempts (AWS_MAX_ATTEMPTS, max_attempts in the
// shared config, or an operation's option), the SDK wraps the Retryer in a
// retryer of its own whose MaxAttempts ends the call, once that many
// attempts were made, without asking. Such a call would stay parked for
// good: its entry held, the strategy never told of its last failure, the
// hooks never told it ended. So a call parked for longer than unaskedAfter
// is taken for ended by the SDK: it is ended here, as a refusal of its
// retry would end it, when the next call starts or the next failure parks.

// unaskedAfter is how long a parked call waits for GetRetryToken before it
// is taken for ended. The SDK asks within microseconds; a call ended by
// mistake (its goroutine held up for longer) fails with ErrInvalidToken
// rather than being retried.
const unaskedAfter = time.Second

// errUnasked is the reason a call ends that the SDK ended without asking
// for a retry.
var errUnasked = fmt.Errorf("%w: the SDK ended the call without asking the Retryer for a retry (the client's RetryMaxAttempts, below the strategy's)", retry.ErrMaxAttempts)

// parking is a call parked after a failed attempt, in the order parked;
// gen tells it from a later parking of the same call, pooled and reused.
type parking struct {
	err error
	c   *call
	gen uint64
	at  int64 // Retryer.now()
}

// park parks c, whose attempt failed with ce, until GetRetryToken asks, and
// ends the calls parked for longer than unaskedAfter. Those are ended
// first, and c's time starts after them: their hooks and strategy may take
// their time, which is not c's waiting for the SDK.
func (r *Retryer) park(c *call, ce *classified) {
	r.mu.Lock()
	if unasked := r.sweep(r.now()); len(unasked) > 0 {
		r.mu.Unlock()
		endUnasked(unasked)
		r.mu.Lock()
	}
	c.gen++
	c.failed = ce
	r.parked[ce.err] = c
	r.queue = append(r.queue, parking{ce.err, c, c.gen, r.now()})
	if r.oldest.Load() == 0 {
		r.oldest.Store(r.queue[r.head].at)
	}
	r.mu.Unlock()
}

// now is the time since the Retryer was made, on the monotonic clock, which
// a change of the system's clock does not move; never 0, which oldest
// keeps for none.
func (r *Retryer) now() int64 { return int64(time.Since(r.epoch)) + 1 }

// sweepUnasked ends the calls parked for longer than unaskedAfter, if any:
// it costs a load when there is none.
func (r *Retryer) sweepUnasked() {
	oldest := r.oldest.Load()
	if oldest == 0 {
		return
	}
	now := r.now()
	if now-oldest < int64(unaskedAfter) {
		return
	}
	r.mu.Lock()
	unasked := r.sweep(now)
	r.mu.Unlock()
	endUnasked(unasked)
}

// sweep drops from the queue's front the parkings that GetRetryToken took,
// and takes out of parked, and returns, those older than unaskedAfter. It
// runs under r.mu.
func (r *Retryer) sweep(now int64) (unasked []parking) {
	for r.head < len(r.queue) {
		p := r.queue[r.head]
		if c, ok := r.parked[p.err]; !ok || c != p.c || c.gen != p.gen {
			r.drop() // asked for, or parked again under another error
			continue
		}
		if now-p.at < int64(unaskedAfter) {
			break
		}
		delete(r.parked, p.err)
		unasked = append(unasked, p)
		r.drop()
	}
	if r.head < len(r.queue) {
		r.oldest.Store(r.queue[r.head].at)
	} else {
		r.oldest.Store(0)
	}
	return unasked
}

// drop takes the queue's first parking off it. The queue's array is kept
// for the next parkings: emptied, it starts again at its beginning; else
// once most of it is behind the head, the rest moves down.
func (r *Retryer) drop() {
	r.queue[r.head] = parking{}
	r.head++
	switch {
	case r.head == len(r.queue):
		r.queue, r.head = r.queue[:0], 0
	case r.head >= 64 && 2*r.head >= len(r.queue):
		n := copy(r.queue, r.queue[r.head:])
		clear(r.queue[n:])
		r.queue, r.head = r.queue[:n], 0
	}
}

// endUnasked ends the calls the SDK ended without asking: the strategy is
// told of the last failure as of one it will not retry, and the hooks that
// the call gave up.
func endUnasked(unasked []parking) {
	for _, p := range unasked {
		c := p.c
		if c.acquired == nil {
			c.r.refuse(c, c.failed)
		}
		_ = c.giveUp(c.failed, errUnasked)
	}
}
