package redisquota

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/sharedevidence"
)

// A FleetAdaptive is a retry.Adaptive whose evidence is shared by every
// process that uses the same name on the same Redis, so that each decides
// its retries as one Adaptive that saw the whole fleet would: a fleet of
// quiet processes (thousands of pods or workers, each sending a request
// every few seconds) in which no process sees enough on its own to stop
// retrying an outage, or to tell one black-holed replica's timeout from an
// overload. Its Strategy is a *retry.Adaptive like any other, taken
// unchanged by retry.Do, httpretry.Transport, grpcretry.WithStrategy, the
// Forrst client, sqlretry and awsretry.
//
// Per scope, the fleet shares what Adaptive's signals read: the attempts,
// accepts and timeouts of the window that client-side throttling and the
// timeout rule read, the failures in a row, when a retry last worked (a
// brownout), and the latency of the successes that were timed (the
// process's own latency probes, taken on the success path when due). While
// a scope's fleet view is fresh, a failure is judged on the fleet's
// evidence plus what the process counted since its last report. What
// stays the process's own: the send-rate limiter (it paces what this
// process sends), the judgement across scopes (a scope whose own window
// does not show it healthy is throttled with the process's other scopes),
// and the optional quota and Budget.
//
// The request path never calls Redis. A background goroutine makes one
// script call per FlushInterval (100 ms), whatever the request rate and
// however many scopes: it sends what each scope counted since the last
// call and takes the fleet's views back, fresh for two FlushIntervals plus
// Timeout. Each scope is a hash, EvidenceKey(name, scope), whose keys share
// the hash tag {name} (a Cluster keeps them in one slot); every call
// renews its TTL to twice the Window, so that the evidence of a process
// that dies leaves the fleet's window a Window after its last report and
// the key goes within two. Redis's clock (TIME) is the fleet's.
//
// Redis unreachable, slow or paused: no call waits on it for longer than
// Timeout (100 ms), and none of them is on the request path. The views go
// stale and the process decides on its own evidence, as an unbound
// retry.Adaptive does; it logs one Warn record, tries Redis again with the
// quota's jittered backoff, and on the first answer rejoins the fleet's
// evidence and logs one Info record. It then sends what it counted
// meanwhile, so that the fleet learns what it saw alone; away for longer
// than the window, only its failures in a row, which are now.
type FleetAdaptive struct {
	a  *retry.Adaptive
	p  *sharedevidence.Process
	fs fleetSync
	// applied counts the syncs whose views were applied, for tests to
	// wait on.
	applied atomic.Uint64

	// The sync's buffers, reused: only the background goroutine uses them.
	keys  []string
	args  []any
	zero  []sharedevidence.Report
	views []sharedevidence.View
	// sentAt is when the last reports reached Redis.
	sentAt time.Time
}

// NewFleetAdaptive returns a FleetAdaptive with opts, whose evidence is
// shared by every process that calls it with the same name on the same
// Redis, and starts its background goroutine; call Close when done.
// Processes sharing a name should use the same Window. The client may be a
// standalone, Sentinel or Cluster client. NewFleetAdaptive does not
// contact Redis; it fails only for a nil client or an empty name.
func NewFleetAdaptive(rdb redis.UniversalClient, name string, opts retry.AdaptiveOptions) (*FleetAdaptive, error) {
	return newFleetAdaptive(rdb, name, opts, Options{})
}

// newFleetAdaptive is NewFleetAdaptive with the FlushInterval, Timeout,
// ReconnectMax, Logger and Rand of o; its other fields do not apply.
func newFleetAdaptive(rdb redis.UniversalClient, name string, opts retry.AdaptiveOptions, o Options) (*FleetAdaptive, error) {
	if isNil(rdb) {
		return nil, errors.New("redisquota: NewFleetAdaptive: nil Redis client")
	}
	if name == "" {
		return nil, errors.New("redisquota: NewFleetAdaptive: empty name")
	}
	o = o.withDefaults()
	a := retry.NewAdaptive(opts)
	f := &FleetAdaptive{a: a, p: sharedevidence.NewProcess(sharedevidence.Bind(a)), sentAt: time.Now()}
	f.fs = fleetSync{
		run: bounded(rdb, o.Timeout), name: name, opts: o, logger: o.Logger, sync: f.sync,
		down: "the strategy decides on its own evidence", up: "rejoined the fleet's evidence", of: "evidence of",
	}
	f.fs.start()
	return f, nil
}

// Strategy returns the strategy that decides on the fleet's evidence: a
// *retry.Adaptive. After Close it goes on with its own evidence.
func (f *FleetAdaptive) Strategy() retry.Strategy { return f.a }

// Shared reports whether the strategy is taking the fleet's evidence from
// Redis, as opposed to deciding on its own while Redis cannot be reached.
func (f *FleetAdaptive) Shared() bool { return f.fs.shared.Load() }

// Close stops the background goroutine and waits for the call to Redis
// under way, which a *redis.Client ends within Timeout. The strategy then
// decides on its own evidence once the last views go stale. Close returns
// nil; it may be called more than once.
func (f *FleetAdaptive) Close() error {
	f.fs.close()
	return nil
}

// sync makes the background call: every scope's report in one.
func (f *FleetAdaptive) sync(now time.Time) bool {
	reports := f.p.Reports()
	sharing := f.fs.shared.Load()
	if len(reports) == 0 && sharing {
		return false
	}
	if !sharing {
		// While Redis is away the call only asks whether it is back:
		// what the process counts meanwhile is sent once it is.
		f.zero = f.zero[:0]
		for _, r := range reports {
			f.zero = append(f.zero, sharedevidence.Report{Scope: r.Scope, WorkedAgo: -1})
		}
		reports = f.zero
	}
	f.keys = f.keys[:0]
	for _, r := range reports {
		f.keys = append(f.keys, EvidenceKey(f.fs.name, r.Scope))
	}
	f.args = evidenceArgs(f.args[:0], 0, f.p.Window(), reports)
	v, err, ok := f.fs.syncCall(evidenceSyncScript, f.keys, f.args)
	if sharing {
		// Sent or not, a report is not sent again: a call given up on
		// may have been counted.
		f.p.Sent()
	}
	if !ok {
		return false
	}
	if err == nil {
		f.views, err = evidenceViews(f.views[:0], v, len(reports))
	}
	if err != nil {
		f.fs.fail(err)
		return false
	}
	f.fs.rejoin()
	if !sharing {
		// Back: the next sync sends what was counted meanwhile, and
		// takes views that answer it. Counts older than the fleet's
		// window would crowd one tenth of it: then only the failures in
		// a row, which are now, go.
		if now.Sub(f.sentAt) > f.p.Window() {
			f.p.Forget()
		}
		return false
	}
	f.sentAt = now
	f.p.Apply(f.views, sharedevidence.Fresh(f.fs.opts.FlushInterval, f.fs.opts.Timeout))
	f.applied.Add(1)
	return false
}
