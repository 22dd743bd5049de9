package retry

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// FuzzDo runs the loop with arbitrary options, strategy settings and
// operation behaviour in virtual time, and checks the promises that hold
// whatever the input: it returns, it never makes more attempts than allowed,
// it never runs past a deadline, its error accounts for what happened, and
// the quota stays within its bounds.
func FuzzDo(f *testing.F) {
	f.Add(int8(3), uint8(2), int64(0), int64(0), int64(0), int64(time.Second), int64(0), false, false, int16(500))
	f.Add(int8(3), uint8(0), int64(0), int64(0), int64(0), int64(0), int64(0), false, false, int16(500))
	f.Add(int8(4), uint8(1), int64(0), int64(0), int64(2*time.Second), int64(time.Second), int64(0), false, false, int16(0))
	f.Add(int8(5), uint8(9), int64(time.Second), int64(0), int64(0), int64(0), int64(0), true, false, int16(500))
	f.Add(int8(0), uint8(1), int64(0), int64(5*time.Second), int64(0), int64(2*time.Second), int64(time.Hour), false, true, int16(14))
	f.Add(int8(-1), uint8(255), int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), true, true, int16(-1))
	f.Add(int8(127), uint8(200), int64(1), int64(1<<62), int64(3*time.Second), int64(1<<62), int64(1<<62), true, true, int16(0))
	f.Fuzz(func(t *testing.T, maxAttempts int8, failures uint8, attemptTimeout, maxElapsed, ctxTimeout, backoff, retryAfter int64,
		hang, longPoll bool, capacity int16) {
		synctest.Test(t, func(t *testing.T) {
			if hang && attemptTimeout <= 0 && maxElapsed <= 0 && ctxTimeout <= 0 {
				ctxTimeout = int64(time.Minute) // a hanging op needs something to end it
			}
			bucket := NewTokenBucket(int(capacity))
			s := NewStandard(StandardOptions{
				MaxAttempts: int(maxAttempts),
				Backoff:     Constant(backoff),
				Bucket:      bucket,
			})
			ctx := context.Background()
			if ctxTimeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Duration(ctxTimeout))
				defer cancel()
			}
			// Without options, Do takes its fast path for the first attempt.
			var opts []Option
			if attemptTimeout != 0 || maxElapsed != 0 {
				opts = append(opts, AttemptTimeout(time.Duration(attemptTimeout)), MaxElapsed(time.Duration(maxElapsed)))
			}
			if longPoll {
				opts = append(opts, LongPoll())
			}
			errFuzz := RetryAfter(errors.New("fuzz"), time.Duration(retryAfter))
			calls := 0
			start := time.Now()
			err := Do(ctx, s, func(ctx context.Context) error {
				calls++
				if calls > int(failures) {
					return nil
				}
				if hang {
					<-ctx.Done()
				}
				return errFuzz
			}, opts...)
			elapsed := time.Since(start)

			allowed := int(maxAttempts)
			switch {
			case allowed == 0:
				allowed = 3
			case allowed < 0:
				allowed = 1
			}
			if calls > allowed {
				t.Fatalf("%d calls, at most %d allowed", calls, allowed)
			}
			for _, limit := range []int64{ctxTimeout, maxElapsed} {
				if limit > 0 && elapsed > time.Duration(limit) {
					t.Fatalf("ran %v, past a limit of %v", elapsed, time.Duration(limit))
				}
			}
			if v := bucket.Available(); v < 0 || v > max(int(capacity), 0) {
				t.Fatalf("bucket at %d, capacity %d", v, capacity)
			}
			if err == nil {
				if calls != int(failures)+1 {
					t.Fatalf("success after %d calls, but the op fails %d times first", calls, failures)
				}
				return
			}
			var re *Error
			if !errors.As(err, &re) {
				t.Fatalf("err = %T %v, want *Error", err, err)
			}
			if re.Attempts != calls || re.Reason == nil || (calls > 0 && !errors.Is(err, errFuzz)) {
				t.Fatalf("err = %+v after %d calls", re, calls)
			}
			if calls > int(failures) {
				t.Fatalf("gave up (%v) although attempt %d succeeded", err, calls)
			}
		})
	})
}
