package sim

import (
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/sharedevidence"
)

// The rows "Adaptive, fleet-shared" give each client (a process of a fleet)
// the default strategy bound, through the real sharedevidence binding, to
// one store of the fleet's evidence that every client shares:
// redisquota's FleetAdaptive, with Redis replaced by sharedevidence.Memory
// (the rule its script follows) on the run's clock. A client's evidence
// reaches the store, and the fleet's view reaches the client, only at the
// client's syncs, every sync interval (FleetAdaptive's FlushInterval); a
// view is used for sharedevidence.Fresh of it. A call to the store takes
// no virtual time and never fails: the fallback to a process's own
// evidence is redisquota's to test, against real Redis.

// FleetAdaptive names the rows of the default strategy whose evidence the
// fleet shares through a store (redisquota.FleetAdaptive).
const FleetAdaptive = "Adaptive, fleet-shared"

// fleetAdaptive returns the strategies of a fleet-shared row: each client's
// is made on its first request and synced with one store for the run
// every sync interval.
func fleetAdaptive(sync time.Duration) func(env Env) func(int) retry.Strategy {
	return func(env Env) func(int) retry.Strategy {
		if env.After == nil {
			panic("sim: a fleet-shared row needs a run with timers (Env.After)")
		}
		store := &sharedevidence.Memory{}
		fresh := sharedevidence.Fresh(sync, storeTimeout)
		var views []sharedevidence.View
		byClient := map[int]retry.Strategy{}
		return func(c int) retry.Strategy {
			s, ok := byClient[c]
			if ok {
				return s
			}
			s = adaptive(env)
			p := sharedevidence.NewProcess(sharedevidence.Bind(s))
			var tick func()
			tick = func() {
				views = store.Sync(env.Now().Sub(Epoch), p.Window(), p.Reports(), views[:0])
				p.Sent()
				p.Apply(views, fresh)
				env.After(sync, tick)
			}
			env.After(sync, tick) // as NewFleetAdaptive starts its loop
			byClient[c] = s
			return s
		}
	}
}
