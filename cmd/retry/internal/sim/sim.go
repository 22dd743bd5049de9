// Package sim simulates a fleet of clients calling a server through
// retrykit's strategies, in virtual time: nothing sleeps, and a minute of
// traffic takes a fraction of a second to run.
//
// The server is one FIFO queue that serves Capacity attempts per second.
// Every attempt it queues costs it the same work, whether it succeeds,
// fails, or arrives after its client gave up waiting: that is why retries
// can keep a server down after the incident that overloaded it is over. A
// 429 in the Throttle scenario comes from a rate limiter in front of the
// queue and costs the server RejectCost of an attempt's work: by default
// nothing. Clients send requests at a steady rate; each request runs
// through a real retry.Strategy (AcquireInitialToken, RefreshToken,
// RecordSuccess), whose delays the simulator waits in virtual time; a
// policy with circuit breakers consults its client's as Do does (Allow
// before each attempt, Done after it, Delay before a wait). Where
// every client shares one retry.Simple, requests go through its Next
// instead, the same decision without a token, so that millions of them fit
// in little memory.
//
// The replica scenarios (ReplicaKinds) split the server into replicas
// behind a load balancer, each a FIFO queue like it with an equal share of
// the capacity, and hit some of them: see replicas.go.
//
// The layered scenario has a model of its own (LayersScenario, RunLayers):
// a chain of tiers that each retry their calls to the next, in front of a
// server like this one.
package sim

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"time"

	"github.com/retrykit/retry"
)

// background is the context of every simulated call: no caller gives up
// on its own.
var background = context.Background()

// Failures as the strategies see them: the answers of an idempotent call.
var (
	errTimeout = retry.WithInfo(errors.New("attempt timed out"), retry.Info{Safety: retry.Safe, Timeout: true, Fault: retry.FaultServer})
	errFailed  = retry.WithInfo(errors.New("503 Service Unavailable"), retry.Info{Safety: retry.Safe, Fault: retry.FaultServer})
	// errThrottled is a 429 as a policy that does not read Retry-After sees it.
	errThrottled = retry.WithInfo(errors.New("429 Too Many Requests"), retry.Info{Safety: retry.Safe, Throttle: true, Fault: retry.FaultClient})
	// A replica's failed connections, as httpretry classifies them: a
	// refused connection never reached the server, and a reset one may
	// have, which an idempotent call may repeat; both are the server's
	// fault, and neither is a timeout.
	errConnRefused = retry.WithInfo(errors.New("connection refused"), retry.Info{Safety: retry.Safe, Fault: retry.FaultServer})
	errConnReset   = retry.WithInfo(errors.New("connection reset by peer"), retry.Info{Safety: retry.Safe, Fault: retry.FaultServer})
)

// event kinds.
const (
	evIssue   = iota // a client issues a request
	evAttempt        // a request sends an attempt
	evAnswer         // an attempt's answer reaches its client
	evBroken         // an attempt's connection fails: refused or reset (a replica's)
)

// Run simulates policy p in scenario s, which must pass Check. It stops
// early, with ctx's error, if ctx is done.
func Run(ctx context.Context, s Scenario, p Policy) (Result, error) {
	return RunWithProgress(ctx, s, p, nil)
}

// RunWithProgress is Run, calling report now and then (every few
// milliseconds of work) with the share of the run's virtual time done, from
// 0 to 1. report may be nil.
func RunWithProgress(ctx context.Context, s Scenario, p Policy, report func(done float64)) (Result, error) {
	r := runner{s: s, p: p, ctx: ctx, report: report}
	return r.run()
}

// maxRequests bounds the requests of any run: a request's slot is an
// item's 28-bit id.
const maxRequests = maxID

// checkEvery is how many events pass between looks at the context.
const checkEvery = 1 << 14

// stepper is a strategy that can decide a retry without a token
// (retry.Simple): its requests' state fits in a few bytes, which lets a run
// hold millions of them. Its first attempts go at once.
type stepper interface {
	Next(retries int, prev time.Duration, err error) (time.Duration, error)
}

// The memory of a run grows with the requests in flight at once, not with
// the requests it simulates: the statistics are streamed (counters, series
// per second and a histogram of latencies), and a request's state lives in
// a slot that is reused once it is answered for good or cut off by the end
// of the run. Pending events are small values without pointers, so that
// millions of them cost little to hold and nothing to the garbage collector.
// When every client shares one stepper, requests hold no token at all: that
// is what keeps the rows of policies that retry for minutes, with millions
// of requests in flight, small.
type runner struct {
	s      Scenario
	p      Policy
	ctx    context.Context
	report func(float64)

	q    pending
	seq  uint64
	reqs slots // of the requests in flight
	end  time.Duration

	arrivals *rand.Rand // issue times: the same for every policy
	server   *rand.Rand // brownout failures: the same for every policy
	jitter   *rand.Rand // the strategies' randomness

	strategy   func(int) retry.Strategy
	breaker    func(int) *retry.Breaker // each client's breaker, if the policy has them
	step       stepper                  // every client's strategy, if they share one stepper
	tokens     bool                     // decide through tokens even so (tests compare the two)
	throttled  error                    // the 429 as this policy sees it
	clock      time.Duration            // virtual time: when the event being handled happens
	serverFree time.Duration            // when the server finishes the work queued so far
	fleet      *fleet                   // the replicas, in a replica scenario; nil otherwise
	limiter    float64                  // Throttle: the tokens in the server's rate-limit bucket
	lastRefill time.Duration
	timers     timers // the calls the policy scheduled (Env.After)

	res       Result
	latencies histogram
	attempts  []int // per 1 s bucket: attempts that completed (answered)
	successes []int // per bucket: attempts that succeeded
}

// Answers, as pending events carry them.
const (
	ansOK uint8 = iota
	ansFailed
	ansTimeout
	ansThrottled
	// The answers of a failed connection, which an evBroken carries (as 0
	// and 1): an item holds only four answers of a kind.
	ansRefused
	ansReset
)

const bucket = time.Second

func (r *runner) run() (Result, error) {
	s := r.s
	r.setup()
	// The world ends a little after the last request is issued: requests
	// still waiting then count as failed, with the latency they had so far.
	r.end = s.Duration + Grace(s)
	// Each client sends at a steady interval, starting at a random phase.
	interval := time.Duration(float64(s.Clients) / s.Rate * float64(time.Second))
	for c := range s.Clients {
		r.push(time.Duration(r.arrivals.Float64()*float64(interval)), evIssue, 0, int32(c))
	}
	for n := 0; r.q.len() > 0; n++ {
		if n%checkEvery == 0 {
			if r.ctx.Err() != nil {
				return Result{}, r.ctx.Err()
			}
			if r.report != nil {
				r.report(float64(r.clock) / float64(r.end))
			}
		}
		e := r.q.pop()
		at, id := e.at(), e.id()
		r.runTimers(at)
		r.clock = at
		switch e.kind() {
		case evIssue:
			if at >= s.Duration {
				continue
			}
			r.issue(int(id), at)
			r.push(at+interval, evIssue, 0, id)
		case evAttempt:
			r.attempt(id, at)
		case evAnswer:
			r.answer(id, at, e.ans())
		case evBroken:
			r.answer(id, at, ansRefused+e.ans())
		}
	}
	r.finish()
	return r.res, nil
}

// setup makes what a run starts with: its randomness, its strategies and
// the store for their requests, the 429 as the policy sees it, and the
// series of its result.
func (r *runner) setup() {
	s := r.s
	r.arrivals = rand.New(rand.NewPCG(s.Seed, 1))
	r.server = rand.New(rand.NewPCG(s.Seed, 2))
	r.jitter = rand.New(rand.NewPCG(s.Seed, 3))
	env := Env{Rand: r.jitter.Float64, Now: func() time.Time { return Epoch.Add(r.clock) }, After: r.after}
	r.strategy = r.p.New(env)
	if r.p.Breaker != nil {
		r.breaker = r.p.Breaker(env)
	}
	if !r.tokens && r.breaker == nil {
		r.step = sharedStepper(r.strategy, s.Clients)
	}
	r.reqs = newSlots(r.step == nil, r.breaker != nil)
	if s.Kind.Replicated() {
		r.fleet = newFleet(s)
	}
	r.limiter = s.ThrottleRate
	r.throttled = errThrottled
	if r.p.RetryAfter == ObeyRetryAfter {
		r.throttled = retry.WithInfo(errors.New("429 Too Many Requests"),
			retry.Info{Safety: retry.Safe, Throttle: true, RetryAfter: s.RetryAfter, Fault: retry.FaultClient})
	}
	n := int(s.Duration / bucket)
	r.res = Result{Policy: r.p.Name, Step: bucket.Seconds(), Offered: make([]float64, n), Goodput: make([]float64, n)}
	r.attempts = make([]int, n)
	r.successes = make([]int, n)
}

// Grace is how long a run goes on after its last request is issued, so that
// requests answered promptly are not cut off: twice the attempt timeout.
func Grace(s Scenario) time.Duration { return 2 * s.Timeout }

// sharedStepper returns the strategy of every client if they all share one
// that can decide without tokens, and nil otherwise.
func sharedStepper(strategy func(int) retry.Strategy, clients int) stepper {
	first := strategy(0)
	step, ok := first.(stepper)
	if !ok {
		return nil
	}
	for c := 1; c < clients; c++ {
		if strategy(c) != first {
			return nil
		}
	}
	return step
}

// push schedules an event of request (or, for evIssue, client) id. An event
// after the end of the run would never be handled: its request is counted
// unfinished at once, with the latency it has when the run ends, and its
// slot is free again.
func (r *runner) push(at time.Duration, kind, ans uint8, id int32) {
	r.seq++ // below maxSeq: 2^48 events would take a core years
	if at <= r.end {
		r.q.push(pack(at, r.seq, kind, ans, id))
		return
	}
	if kind != evIssue {
		r.res.Unfinished++
		r.latencies.add(r.end-r.issued(id), true)
		r.reqs.release(id)
	}
}

func (r *runner) issued(id int32) time.Duration {
	c, i := split(id)
	return r.reqs.issued[c][i]
}

func (r *runner) issue(client int, at time.Duration) {
	r.res.Requests++
	if r.inIncident(at) {
		r.res.IncidentRequests++
	}
	id := r.reqs.take()
	c, i := split(id)
	r.reqs.issued[c][i] = at
	if r.step != nil {
		r.reqs.n[c][i], r.reqs.delay[c][i] = 0, 0
		r.push(at, evAttempt, 0, id)
		return
	}
	r.reqs.n[c][i] = int32(client)
	if r.breaker != nil && r.breaker(client).Delay("") > 0 {
		// As Do: while the circuit is open, the strategy is not even
		// asked, and the request fails at once.
		r.over(id, 0)
		return
	}
	tok, err := r.strategy(client).AcquireInitialToken("")
	if err != nil {
		tok = retry.Token{} // no token: one attempt, as the Smithy retry guide says
	}
	r.reqs.toks[c][i] = tok
	r.push(at+tok.Delay(), evAttempt, 0, id)
}

// over ends request id, which failed, latency after it was issued.
func (r *runner) over(id int32, latency time.Duration) {
	r.latencies.add(latency, false)
	r.reqs.release(id)
}

// allowed asks the breaker of request id's client, if it has one, for the
// attempt the request is about to send. If it refuses, the request fails
// there, its token handed back, as Do gives up with ErrCircuitOpen.
func (r *runner) allowed(id int32, at time.Duration) bool {
	if r.breaker == nil {
		return true
	}
	c, i := split(id)
	client := int(r.reqs.n[c][i])
	ticket, err := r.breaker(client).Allow("")
	if err != nil {
		r.release(client, r.reqs.toks[c][i])
		r.over(id, at-r.reqs.issued[c][i])
		return false
	}
	r.reqs.tickets[c][i] = ticket
	return true
}

// release hands back to client's strategy a token its request will not use.
func (r *runner) release(client int, tok retry.Token) {
	if rel, ok := r.strategy(client).(retry.Releaser); ok {
		_ = rel.ReleaseToken(tok)
	}
}

// attempt sends one attempt of request id at time at and schedules its
// answer.
func (r *runner) attempt(id int32, at time.Duration) {
	s := r.s
	if !r.allowed(id, at) {
		return
	}
	r.res.Attempts++
	if r.inIncident(at) {
		r.res.IncidentAttempts++
	}
	if i := int(at / bucket); i < len(r.res.Offered) {
		r.res.Offered[i]++
	}
	if r.fleet != nil {
		r.toReplica(id, at)
		return
	}
	answer := func(when time.Duration, ans uint8) { r.push(when, evAnswer, ans, id) }

	// The rate limiter decides as the attempt arrives. By default it
	// answers at once, before the queue; with a RejectCost the 429 takes
	// its turn in the queue and that share of an attempt's work.
	if s.Kind == Throttle && r.inIncident(at) && !r.admit(at) {
		answered := at
		if s.RejectCost > 0 {
			var timedOut bool
			if answered, timedOut = r.enqueue(at, s.RejectCost); timedOut {
				answer(at+s.Timeout, ansTimeout)
				return
			}
		}
		answer(answered, ansThrottled)
		return
	}
	done, timedOut := r.enqueue(at, 1)
	if timedOut {
		answer(at+s.Timeout, ansTimeout)
		return
	}
	failed := false
	switch {
	case s.Kind == Outage && r.inIncident(done):
		failed = true
	case s.Kind == Brownout && r.inIncident(done):
		failed = r.server.Float64() < s.FailRate
	}
	if failed {
		answer(done, ansFailed)
		return
	}
	answer(done, ansOK)
}

// enqueue puts work, a share of an attempt's, arriving at time at, in the
// server's queue and returns when it is done, or that its client stopped
// waiting first.
func (r *runner) enqueue(at time.Duration, work float64) (done time.Duration, timedOut bool) {
	s := r.s
	capacity := s.Capacity
	if s.Kind == Overload && r.inIncident(max(at, r.serverFree)) {
		capacity = s.DegradedCapacity // the capacity when the work is done
	}
	done, queued := r.queue(&r.serverFree, at, work, capacity)
	return done, !queued || done-at > s.Timeout
}

// queue puts work arriving at time at in a FIFO queue that serves capacity
// attempts per second and is busy until *free, and returns when the work is
// done. The work is done whether or not anyone still waits for it, unless
// the server sheds: then work whose client has given up by the time its
// turn comes is dropped, unserved (queued is false).
func (r *runner) queue(free *time.Duration, at time.Duration, work, capacity float64) (done time.Duration, queued bool) {
	start := max(at, *free)
	if r.s.Shed && start-at >= r.s.Timeout {
		return 0, false
	}
	done = later(start, work/capacity)
	*free = done
	return done, true
}

// later returns the time seconds after t, saturating at maxAt, past any
// run's end: a server slow enough to overflow the clock answers no one in
// the run (where a wrapped time would pass for an early answer).
func later(t time.Duration, seconds float64) time.Duration {
	if d := seconds * float64(time.Second); d < float64(maxAt-t) {
		return t + time.Duration(d)
	}
	return maxAt
}

// admit takes a token from the throttling server's rate limiter.
func (r *runner) admit(at time.Duration) bool {
	r.limiter = min(r.s.ThrottleRate, r.limiter+(at-r.lastRefill).Seconds()*r.s.ThrottleRate)
	r.lastRefill = at
	if r.limiter >= 1 {
		r.limiter--
		return true
	}
	return false
}

func (r *runner) answer(id int32, at time.Duration, ans uint8) {
	c, i := split(id)
	issued := r.reqs.issued[c][i]
	b := int(at / bucket)
	if b < len(r.attempts) {
		r.attempts[b]++
	}
	if ans == ansOK {
		if r.breaker != nil {
			r.reqs.tickets[c][i].Done(background, nil)
		}
		if r.step == nil {
			_ = r.strategy(int(r.reqs.n[c][i])).RecordSuccess(r.reqs.toks[c][i])
		}
		r.res.Succeeded++
		if b < len(r.successes) {
			r.successes[b]++
			r.res.Goodput[b]++
		}
		r.latencies.add(at-issued, false)
		r.reqs.release(id)
		return
	}
	var err error
	var hint time.Duration // the Retry-After of a 429 answer
	switch ans {
	case ansFailed:
		err = errFailed
	case ansRefused:
		err = errConnRefused
	case ansReset:
		err = errConnReset
	case ansTimeout:
		err = errTimeout
	case ansThrottled:
		err, hint = r.throttled, r.s.RetryAfter
	}
	if r.breaker != nil {
		r.reqs.tickets[c][i].Done(background, err)
	}
	delay, granted := r.decide(c, i, at-issued, err)
	if !granted {
		r.over(id, at-issued)
		return
	}
	if r.p.RetryAfter == ReplaceWithRetryAfter && hint > 0 {
		delay = hint // the library waits what the server asked instead of its backoff
	}
	r.push(at+delay, evAttempt, 0, id)
}

// decide asks the strategy of the request in slot (c, i), which has been
// in flight for elapsed, whether to retry after err, and how long to wait
// first; a policy with MaxElapsed refuses a retry that would start after it.
// A granted retry is recorded in the slot.
func (r *runner) decide(c, i int, elapsed time.Duration, err error) (time.Duration, bool) {
	tooLate := func(delay time.Duration) bool { return r.p.MaxElapsed > 0 && elapsed+delay > r.p.MaxElapsed }
	if r.step != nil {
		retries := r.reqs.n[c][i]
		delay, refused := r.step.Next(int(retries), r.reqs.delay[c][i], err)
		if refused != nil || tooLate(delay) || retries == math.MaxInt32 {
			return 0, false
		}
		r.reqs.n[c][i], r.reqs.delay[c][i] = retries+1, delay
		return delay, true
	}
	client := int(r.reqs.n[c][i])
	next, refused := r.strategy(client).RefreshToken(r.reqs.toks[c][i], err)
	if refused == nil && (tooLate(next.Delay()) || r.breaker != nil && r.breaker(client).Delay("") > next.Delay()) {
		// Past MaxElapsed, or refused by the breaker after the wait, as
		// Do refuses it before the wait: the retry is handed back.
		r.release(client, next)
		refused = retry.ErrMaxAttempts
	}
	if refused != nil {
		return 0, false
	}
	r.reqs.toks[c][i] = next
	return next.Delay(), true
}

func (r *runner) inIncident(at time.Duration) bool { return at >= r.s.Start && at < r.s.End }

// finish computes latency percentiles and recovery.
func (r *runner) finish() {
	r.res.P50, r.res.P50Cut = r.latencies.percentile(0.50)
	r.res.P99, r.res.P99Cut = r.latencies.percentile(0.99)

	// Healthy: at least 90 % of the attempts answered in a second succeed
	// (a second without answers counts as neither), and it stays so until
	// the end of the run.
	first := -1
	for i := len(r.attempts) - 1; i >= int(r.s.End/bucket); i-- {
		if r.attempts[i] > 0 && float64(r.successes[i]) < 0.9*float64(r.attempts[i]) {
			break
		}
		first = i
	}
	if first >= 0 {
		r.res.Recovered = true
		r.res.Recovery = max(time.Duration(first)*bucket-r.s.End, 0)
	}
}
