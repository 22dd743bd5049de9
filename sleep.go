package retry

import (
	"context"
	"time"
)

// Sleep waits d, for loops of one's own that wait the way Do does. It does
// not start a wait that could not end before ctx's deadline: it returns
// ErrDeadline at once. It returns ctx's error if ctx is done first or already
// (a zero or negative d waits nothing and reports only that), and nil after a
// full wait. Its timer is stopped before it returns. A nil ctx is
// context.Background.
func Sleep(ctx context.Context, d time.Duration) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if d <= 0 {
		return ctx.Err()
	}
	var t *time.Timer
	err := sleep(ctx, d, &t)
	if t != nil {
		t.Stop()
	}
	return err
}

// sleep waits d, reusing *t across waits. It returns ErrDeadline without
// waiting if the wait could not end before ctx's deadline, and ctx's error if
// ctx is done first.
func sleep(ctx context.Context, d time.Duration, t **time.Timer) error {
	if !fits(ctx, d) {
		return ErrDeadline
	}
	if *t == nil {
		*t = time.NewTimer(d)
	} else {
		(*t).Reset(d)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-(*t).C:
		return nil
	}
}

// pollWait is a poller's wait before its refusal returns (LongPoll): d, or
// until ctx is done, whichever comes first, so that a poller whose deadline
// comes sooner waits until it (sleep, bounded by the deadline itself, would
// not wait at all: a bound read a moment before no longer fits).
func pollWait(ctx context.Context, d time.Duration, t **time.Timer) {
	if d <= 0 {
		return
	}
	if *t == nil {
		*t = time.NewTimer(d)
	} else {
		(*t).Reset(d)
	}
	select {
	case <-ctx.Done():
		(*t).Stop()
	case <-(*t).C:
	}
}

// fits reports whether a wait of d can end before ctx's deadline.
func fits(ctx context.Context, d time.Duration) bool {
	deadline, ok := ctx.Deadline()
	return !ok || d < time.Until(deadline)
}
