package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// The replica scenarios split the server into Replicas replicas behind a
// load balancer, and their incidents hit some replicas, not the service as
// a whole. The balancer picks a replica for each attempt, retries included,
// and has no health checks: it keeps sending a share of the attempts to a
// replica that refuses them, swallows them or answers them late. Each
// replica is a FIFO queue like the single server's, serving Capacity/Replicas
// attempts per second; every attempt it queues costs it that work, whether
// or not its client still waits (Shed drops the work of a client that gave
// up, as the single server does).
//
// A replica that is down refuses connections: an attempt sent to it fails at
// once and costs nothing. Going down resets the connections it holds: the
// attempts it has queued or is serving fail at that instant, and their work
// is dropped, so that it comes back with an empty queue.
const (
	ReplicaDown      Kind = "replica-down"      // one replica is down for the whole incident
	ReplicaBlackhole Kind = "replica-blackhole" // one replica accepts attempts and never answers
	ReplicaSlow      Kind = "replica-slow"      // one replica adds random latency to its answers
	RollingDeploy    Kind = "rolling-deploy"    // the replicas restart one at a time
	ZoneBlip         Kind = "zone-blip"         // a zone's replicas are down for a moment
	ZoneFlap         Kind = "zone-flap"         // a zone's replicas go down and up again and again
	Blip             Kind = "blip"              // every replica is down for a moment
	Flapping         Kind = "flapping"          // every replica goes down and up again and again
)

// ReplicaKinds returns the replica scenarios, in the order the help lists
// them.
func ReplicaKinds() []Kind {
	return []Kind{ReplicaDown, ReplicaBlackhole, ReplicaSlow, RollingDeploy, ZoneBlip, ZoneFlap, Blip, Flapping}
}

// Replicated reports whether k is a replica scenario.
func (k Kind) Replicated() bool {
	switch k {
	case ReplicaDown, ReplicaBlackhole, ReplicaSlow, RollingDeploy, ZoneBlip, ZoneFlap, Blip, Flapping:
		return true
	}
	return false
}

// Balance is how the load balancer of a replica scenario picks the replica
// of an attempt.
type Balance string

// Balances.
const (
	Random     Balance = "random"      // a replica drawn at random, from a seeded stream of its own
	RoundRobin Balance = "round-robin" // the replicas in turn
)

// DefaultReplicas is how many replicas the replica scenarios have unless
// told otherwise.
const DefaultReplicas = 10

// MaxReplicas bounds Replicas, so that the replicas' own state (a few words
// each) stays far below what the memory guard counts for the requests.
const MaxReplicas = 10_000

// The incidents' numbers, stated in the help and in Incident.
const (
	blipFor    = 2 * time.Second // blip, zone-blip: how long the replicas are down, from the incident's start
	flapPeriod = 2 * time.Second // flapping, zone-flap: down at the start of every period...
	flapDown   = time.Second     // ...for this long
	slowMean   = time.Second     // replica-slow: the mean of the latency it adds
	zoneShare  = 0.3             // zone-blip, zone-flap: the share of the replicas in the zone
	// minSlice is the least time a rolling deploy may give each replica to
	// restart.
	minSlice = time.Millisecond
)

// Hit returns how many replicas the incident of s hits: 1 for the
// replica-* scenarios, 30% of them (at least 1) for the zones', all of them
// otherwise. It is 0 for a scenario without replicas.
func (s Scenario) Hit() int {
	switch s.Kind {
	case ReplicaDown, ReplicaBlackhole, ReplicaSlow:
		return min(1, s.Replicas)
	case ZoneBlip, ZoneFlap:
		return max(1, int(zoneShare*float64(s.Replicas)))
	case RollingDeploy, Blip, Flapping:
		return s.Replicas
	}
	return 0
}

// checkReplicas reports what is wrong with the replicas of s, if anything:
// a replica scenario needs them, any other must have none.
func (s Scenario) checkReplicas() error {
	if !s.Kind.Replicated() {
		if s.Replicas != 0 || s.Balance != "" {
			return errors.New("replicas and balance apply to the replica scenarios only (" + replicaNames() + ")")
		}
		return nil
	}
	switch {
	case s.Replicas < 1 || s.Replicas > MaxReplicas:
		return fmt.Errorf("replicas must be from 1 to %d", MaxReplicas)
	case s.Balance != Random && s.Balance != RoundRobin:
		return fmt.Errorf("balance must be %s or %s, not %q", Random, RoundRobin, s.Balance)
	case s.Kind == RollingDeploy && (s.End-s.Start)/time.Duration(s.Replicas) < minSlice:
		return fmt.Errorf("a rolling deploy gives each replica an equal slice of the incident, which must be at least %v: lengthen the incident or lower the replicas", minSlice)
	}
	return nil
}

func replicaNames() string {
	var names []string
	for _, k := range ReplicaKinds() {
		names = append(names, string(k))
	}
	return strings.Join(names, ", ")
}

// replicaIncident is Incident for the replica scenarios.
func (s Scenario) replicaIncident() string {
	var who string
	if hit := s.Hit(); hit == s.Replicas {
		who = "every replica refuses"
		if s.Replicas > 1 {
			who = fmt.Sprintf("all %d replicas refuse", s.Replicas)
		}
	} else {
		who = fmt.Sprintf("%d of %d replicas refuse", hit, s.Replicas)
		if hit == 1 {
			who = fmt.Sprintf("1 of %d replicas refuses", s.Replicas)
		}
	}
	one := fmt.Sprintf("1 of %d replicas", s.Replicas)
	switch s.Kind {
	case ReplicaDown:
		return one + " refuses connections"
	case ReplicaBlackhole:
		return one + " accepts attempts and never answers them"
	case ReplicaSlow:
		return fmt.Sprintf("%s adds latency to each answer, exponential with mean %v", one, slowMean)
	case RollingDeploy:
		return fmt.Sprintf("the replicas restart one at a time, %v each, refusing connections and resetting the attempts they hold",
			((s.End - s.Start) / time.Duration(s.Replicas)).Round(time.Millisecond))
	case ZoneBlip, Blip:
		return fmt.Sprintf("%s connections for the first %v, resetting the attempts they hold", who, blipFor)
	case ZoneFlap, Flapping:
		return fmt.Sprintf("%s connections %v in every %v, resetting the attempts they hold", who, flapDown, flapPeriod)
	}
	return ""
}

// fleet is the replicas of a run of a replica scenario: their queues, the
// balancer, and what the incident does to them.
type fleet struct {
	capacity float64         // each replica's attempts per second
	free     []time.Duration // per replica: when it finishes the work queued so far

	pick *rand.Rand // Random balance: the draws; nil for RoundRobin
	turn int        // RoundRobin: the replica of the next attempt

	outages schedule
	// Replica 0 swallows attempts (blackhole), or delays its answers
	// (slow), from start to end.
	blackhole, slow bool
	latency         *rand.Rand // slow: the latencies it adds
	start, end      time.Duration

	// What each replica was sent, and what it queued: tests read them.
	sent, queued []int
}

// newFleet makes the replicas of s, a replica scenario that passed Check.
// Its random draws come from streams of their own (4: the balancer, 5: the
// slow replica's latencies), so that the arrivals and the strategies'
// jitter are those of every other scenario with the same seed.
func newFleet(s Scenario) *fleet {
	n := s.Replicas
	f := &fleet{
		capacity: s.Capacity / float64(n),
		free:     make([]time.Duration, n),
		start:    s.Start, end: s.End,
		blackhole: s.Kind == ReplicaBlackhole,
		slow:      s.Kind == ReplicaSlow,
		sent:      make([]int, n),
		queued:    make([]int, n),
		outages:   schedule{first: s.Start, end: s.End},
	}
	if s.Balance == Random {
		f.pick = rand.New(rand.NewPCG(s.Seed, 4))
	}
	if f.slow {
		f.latency = rand.New(rand.NewPCG(s.Seed, 5))
	}
	o := &f.outages
	switch s.Kind {
	case ReplicaDown:
		o.hit, o.length = 1, s.End-s.Start
	case RollingDeploy:
		o.hit, o.length = n, (s.End-s.Start)/time.Duration(n)
		o.stagger = o.length
	case ZoneBlip, Blip:
		o.hit, o.length = s.Hit(), blipFor
	case ZoneFlap, Flapping:
		o.hit, o.length, o.period = s.Hit(), flapDown, flapPeriod
	}
	return f
}

// choose returns the replica the balancer sends the next attempt to.
func (f *fleet) choose() int {
	if f.pick != nil {
		return f.pick.IntN(len(f.free))
	}
	i := f.turn
	if f.turn++; f.turn == len(f.free) {
		f.turn = 0
	}
	return i
}

// schedule is when replicas are down: replicas 0 to hit-1, each from first
// plus stagger times its index, for length, again every period if period is
// not 0. No window starts at or after end, and none lasts past it. Times
// are computed, not listed, so that a long incident of flapping costs no
// memory.
type schedule struct {
	hit            int
	first, stagger time.Duration
	length, period time.Duration
	end            time.Duration
}

// last returns when the latest down window of replica i that started at or
// before t started, if one did.
func (d *schedule) last(i int, t time.Duration) (time.Duration, bool) {
	if i >= d.hit {
		return 0, false
	}
	base := d.first + time.Duration(i)*d.stagger
	if t < base || base >= d.end {
		return 0, false
	}
	if d.period == 0 {
		return base, true
	}
	return base + (min(t, d.end-1)-base)/d.period*d.period, true
}

// down reports whether replica i is down at t.
func (d *schedule) down(i int, t time.Duration) bool {
	from, ok := d.last(i, t)
	return ok && t < min(from+d.length, d.end)
}

// next returns when replica i next goes down after t, or maxAt if it does
// not.
func (d *schedule) next(i int, t time.Duration) time.Duration {
	if i >= d.hit {
		return maxAt
	}
	base := d.first + time.Duration(i)*d.stagger
	at := base
	if t >= base {
		if d.period == 0 {
			return maxAt
		}
		at = base + ((t-base)/d.period+1)*d.period
	}
	if at >= d.end {
		return maxAt
	}
	return at
}

// toReplica sends attempt of request id, at time at, to the replica the
// balancer picks, and schedules its answer.
func (r *runner) toReplica(id int32, at time.Duration) {
	s, f := r.s, r.fleet
	i := f.choose()
	f.sent[i]++
	if f.outages.down(i, at) {
		r.reply(id, at, ansRefused) // no connection: no work
		return
	}
	swallowed := f.blackhole && i == 0
	if swallowed && r.inIncident(at) {
		// Accepted, and never answered nor worked on: the client's
		// timeout is all it learns.
		r.reply(id, at+s.Timeout, ansTimeout)
		return
	}
	reset := f.outages.next(i, at)
	done, queued := r.queue(&f.free[i], at, 1, f.capacity)
	if !queued {
		r.reply(id, at+s.Timeout, ansTimeout) // shed: its client had given up
		return
	}
	f.queued[i]++
	if done > reset {
		// The replica goes down before it answers: the connection is
		// reset, and the work it had queued is gone with it.
		f.free[i] = reset
		if reset-at > s.Timeout {
			r.reply(id, at+s.Timeout, ansTimeout) // its client had stopped waiting
			return
		}
		r.reply(id, reset, ansReset)
		return
	}
	if swallowed && r.inIncident(done) {
		// Queued before the incident, but the answer falls into the
		// hole.
		r.reply(id, at+s.Timeout, ansTimeout)
		return
	}
	if f.slow && i == 0 && r.inIncident(done) {
		done = later(done, f.latency.ExpFloat64()*slowMean.Seconds())
	}
	if done-at > s.Timeout {
		r.reply(id, at+s.Timeout, ansTimeout)
		return
	}
	r.reply(id, done, ansOK)
}

// reply schedules an answer of request id at time at: an evAnswer for the
// server's answers, an evBroken for a failed connection's (an item holds
// only four answers of a kind).
func (r *runner) reply(id int32, at time.Duration, ans uint8) {
	if ans >= ansRefused {
		r.push(at, evBroken, ans-ansRefused, id)
		return
	}
	r.push(at, evAnswer, ans, id)
}

// ReplicaSet says what the replicas of s are, e.g. "10 replicas of capacity
// 150/s each (1500/s in all) behind a random balancer".
func (s Scenario) ReplicaSet() string {
	each := perSecond(s.Capacity / float64(s.Replicas))
	if s.Replicas == 1 {
		return fmt.Sprintf("1 replica of capacity %s/s behind a %s balancer", each, s.Balance)
	}
	return fmt.Sprintf("%d replicas of capacity %s/s each (%s/s in all) behind a %s balancer",
		s.Replicas, each, perSecond(s.Capacity), s.Balance)
}
