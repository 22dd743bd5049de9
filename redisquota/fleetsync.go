package redisquota

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// fleetSync is the background machinery of what a fleet shares through
// Redis beside the quota (a FleetBreaker's circuits, a FleetAdaptive's
// evidence): a goroutine that syncs every FlushInterval, or sooner when
// nudged; calls to Redis that no caller waits on for longer than Timeout;
// and the fallback while Redis cannot be reached, which logs one Warn
// record, tries Redis again with the quota's jittered backoff, and logs
// one Info record when an answer comes back.
type fleetSync struct {
	run    redis.Scripter
	name   string
	opts   Options
	logger *slog.Logger
	// sync makes the background call, at now, and reports whether
	// another is wanted at once.
	sync func(now time.Time) (again bool)
	// what the fleet shares, for the log records: the Warn record says
	// down, the Info record up.
	down, up, of string

	shared atomic.Bool
	wake   chan struct{}
	done   chan struct{}
	wg     sync.WaitGroup // the background loop
	calls  sync.WaitGroup // goroutines of calls to Redis
	busy   atomic.Bool    // a sync call given up on is still running

	gate   sync.RWMutex // close holds it to stop new calls; calls read closed under it
	closed bool

	mu       sync.Mutex // guards what follows
	failures int        // failed calls in a row
	retryAt  time.Time  // while fallen back: when to try Redis again
	once     sync.Once
}

// start starts the background goroutine, shared until a call fails.
func (f *fleetSync) start() {
	f.wake = make(chan struct{}, 1)
	f.done = make(chan struct{})
	f.shared.Store(true)
	f.wg.Add(1)
	go f.loop()
}

// close stops the background goroutine and waits for the calls to Redis
// under way; it may be called more than once.
func (f *fleetSync) close() {
	f.once.Do(func() {
		f.gate.Lock()
		f.closed = true
		f.shared.Store(false)
		f.gate.Unlock()
		close(f.done)
		f.wg.Wait()
		f.calls.Wait()
	})
}

// call runs script on a goroutine of its own and waits for its answer for
// at most Timeout, whatever the client does with deadlines; ok is false
// after close. after, if not nil, runs when the goroutine is done, answered
// in time or not.
func (f *fleetSync) call(script *redis.Script, keys []string, args []any, after func()) (v []int64, err error, ok bool) {
	f.gate.RLock()
	if f.closed {
		f.gate.RUnlock()
		return nil, nil, false
	}
	type answer struct {
		v   []int64
		err error
	}
	c := make(chan answer, 1)
	f.calls.Add(1)
	f.gate.RUnlock()
	start := time.Now()
	go func() {
		defer f.calls.Done()
		ctx, cancel := context.WithTimeout(context.Background(), f.opts.Timeout)
		defer cancel()
		v, err := script.Run(ctx, f.run, keys, args...).Int64Slice()
		if after != nil {
			after()
		}
		c <- answer{v, err}
	}()
	t := time.NewTimer(f.opts.Timeout)
	defer t.Stop()
	select {
	case a := <-c:
		return a.v, a.err, true
	case <-t.C:
		return nil, fmt.Errorf("no answer within %v", time.Since(start).Round(time.Millisecond)), true
	}
}

// syncCall is call for the background sync: one at a time, a call given
// up on at its deadline holding the next back until it ends.
func (f *fleetSync) syncCall(script *redis.Script, keys []string, args []any) (v []int64, err error, ok bool) {
	f.busy.Store(true)
	v, err, ok = f.call(script, keys, args, func() { f.busy.Store(false) })
	if !ok {
		f.busy.Store(false)
	}
	return v, err, ok
}

func (f *fleetSync) nudge() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// loop syncs in the background until close.
func (f *fleetSync) loop() {
	defer f.wg.Done()
	t := time.NewTimer(f.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-f.done:
			return
		case <-f.wake:
		case <-t.C:
		}
		t.Reset(f.tick(time.Now()))
	}
}

// tick makes the background call if one is due, and returns when to look
// again.
func (f *fleetSync) tick(now time.Time) time.Duration {
	f.mu.Lock()
	if !f.shared.Load() && now.Before(f.retryAt) {
		defer f.mu.Unlock()
		return f.retryAt.Sub(now)
	}
	f.mu.Unlock()
	if f.busy.Load() {
		return f.opts.FlushInterval // a call given up on is still running: one at a time
	}
	if again := f.sync(now); again {
		return 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.shared.Load() {
		return max(f.retryAt.Sub(time.Now()), 0)
	}
	return f.opts.FlushInterval
}

// fail falls back to the process's own state after a failed call, logging
// once per outage, and schedules the next try.
func (f *fleetSync) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures++
	f.retryAt = time.Now().Add(f.opts.reconnectDelay(f.failures))
	f.gate.RLock()
	closed := f.closed
	f.gate.RUnlock()
	if f.shared.Swap(false) && !closed {
		f.logger.Warn("redisquota: Redis is unavailable; "+f.down,
			"name", f.name, "error", fmt.Errorf("redisquota: %s %s: %w", f.of, f.name, err))
	}
	f.nudge()
}

// rejoin takes the fleet's state back after an answer.
func (f *fleetSync) rejoin() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures = 0
	f.gate.RLock()
	defer f.gate.RUnlock()
	if !f.closed && !f.shared.Swap(true) {
		f.logger.Info("redisquota: Redis is back; "+f.up, "name", f.name)
	}
}
