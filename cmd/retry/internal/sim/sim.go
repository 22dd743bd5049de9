// Package sim simulates a fleet of clients calling a server through
// retrykit's strategies, in virtual time: nothing sleeps, and a minute of
// traffic takes a fraction of a second to run.
//
// The server is one FIFO queue that serves Capacity attempts per second.
// Every attempt costs it the same work, whether it succeeds, fails, or
// arrives after its client gave up waiting: that is why retries can keep a
// server down after the incident that overloaded it is over. Clients send
// requests at a steady rate; each request runs through a real
// retry.Strategy (AcquireInitialToken, RefreshToken, RecordSuccess), whose
// delays the simulator waits in virtual time.
package sim

import (
	"container/heap"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/retrykit/retry"
)

// Kind is the kind of incident a scenario has.
type Kind string

// Incidents.
const (
	Outage   Kind = "outage"   // every attempt fails during the incident
	Brownout Kind = "brownout" // a share of attempts fail at random during the incident
	Overload Kind = "overload" // the server's capacity drops below the offered load
	Throttle Kind = "throttle" // attempts beyond a rate limit get 429 with Retry-After
)

// Scenario is a server, a fleet of clients, and an incident.
type Scenario struct {
	Kind     Kind
	Clients  int           // clients sending requests
	Rate     float64       // requests per second, all clients together
	Duration time.Duration // how long clients send new requests
	Capacity float64       // attempts per second the server serves normally
	Timeout  time.Duration // how long a client waits for an attempt's answer
	Start    time.Duration // when the incident starts
	End      time.Duration // when it ends
	Seed     uint64        // the same seed gives the same run

	FailRate         float64       // Brownout: share of attempts that fail
	DegradedCapacity float64       // Overload: capacity during the incident
	ThrottleRate     float64       // Throttle: attempts per second accepted during the incident
	RetryAfter       time.Duration // Throttle: the wait 429 answers ask for
}

// Policy is how clients retry: a strategy per client, which may share state
// with the other clients' (one quota for the whole process).
type Policy struct {
	Name string
	// New returns the strategies of a run: strategy(i) is client i's. rnd is
	// the run's seeded randomness for backoff jitter.
	New func(rnd func() float64) (strategy func(client int) retry.Strategy)
	// MaxElapsed, if set, abandons a request this long after it was issued
	// (some libraries bound the time spent retrying rather than attempts).
	MaxElapsed time.Duration
}

// Result is what one policy did in one scenario.
type Result struct {
	Policy   string `json:"policy"`
	Requests int    `json:"requests"` // requests issued
	Attempts int    `json:"attempts"` // attempts sent
	// During the incident: requests issued, and attempts sent, within it.
	IncidentRequests int `json:"incident_requests"`
	IncidentAttempts int `json:"incident_attempts"`
	Succeeded        int `json:"succeeded"` // requests that succeeded before the run ended

	P50       time.Duration `json:"p50_ns"` // latency of requests, issue to final answer
	P99       time.Duration `json:"p99_ns"`
	Recovered bool          `json:"recovered"`   // the server was healthy again after the incident
	Recovery  time.Duration `json:"recovery_ns"` // how long after the incident's end

	Step    float64   `json:"step_s"`  // seconds per point of the series
	Offered []float64 `json:"offered"` // attempts sent per second
	Goodput []float64 `json:"goodput"` // requests that succeeded per second
}

// Amplification is attempts per request, overall.
func (r Result) Amplification() float64 { return ratio(r.Attempts, r.Requests) }

// IncidentAmplification is attempts per request during the incident.
func (r Result) IncidentAmplification() float64 { return ratio(r.IncidentAttempts, r.IncidentRequests) }

// SuccessRate is the share of requests that succeeded.
func (r Result) SuccessRate() float64 { return ratio(r.Succeeded, r.Requests) }

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Check reports what is wrong with s, if anything.
func (s Scenario) Check() error {
	switch {
	case s.Clients < 1:
		return errors.New("clients must be at least 1")
	case !(s.Rate > 0) || math.IsInf(s.Rate, 0):
		return errors.New("rate must be positive")
	case s.Duration <= 0:
		return errors.New("duration must be positive")
	case !(s.Capacity > 0) || math.IsInf(s.Capacity, 0):
		return errors.New("capacity must be positive")
	case s.Timeout <= 0:
		return errors.New("timeout must be positive")
	case s.Start < 0 || s.End < s.Start:
		return errors.New("the incident must start at 0 or later and end after it starts")
	case s.Rate*s.Duration.Seconds() > 5e7:
		return errors.New("too many requests to simulate (rate × duration above 50 million)")
	}
	switch s.Kind {
	case Outage:
	case Brownout:
		if s.FailRate < 0 || s.FailRate > 1 {
			return errors.New("fail rate must be between 0 and 1")
		}
	case Overload:
		if !(s.DegradedCapacity > 0) {
			return errors.New("degraded capacity must be positive")
		}
	case Throttle:
		if !(s.ThrottleRate > 0) || s.RetryAfter < 0 {
			return errors.New("throttle rate must be positive and Retry-After not negative")
		}
	default:
		return errors.New("unknown scenario kind " + string(s.Kind))
	}
	return nil
}

// Failures as the strategies see them: the answers of an idempotent call.
var (
	errTimeout = retry.WithInfo(errors.New("attempt timed out"), retry.Info{Safety: retry.Safe, Timeout: true, Fault: retry.FaultServer})
	errFailed  = retry.WithInfo(errors.New("503 Service Unavailable"), retry.Info{Safety: retry.Safe, Fault: retry.FaultServer})
)

// event kinds.
const (
	evIssue   = iota // a client issues a request
	evAttempt        // a request sends an attempt
	evAnswer         // an attempt's answer reaches its client
)

type event struct {
	at   time.Duration
	seq  uint64 // ties break in the order events were scheduled: determinism
	kind int
	c    int // client, for evIssue
	r    *request
	ok   bool  // for evAnswer
	err  error // for a failed evAnswer
}

type request struct {
	client int
	issued time.Duration
	tok    retry.Token
}

type queue []*event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// Run simulates policy p in scenario s. s must pass Check.
func Run(s Scenario, p Policy) Result {
	r := runner{s: s, p: p}
	return r.run()
}

type runner struct {
	s Scenario
	p Policy

	q   queue
	seq uint64

	arrivals *rand.Rand // issue times: the same for every policy
	server   *rand.Rand // brownout failures: the same for every policy
	jitter   *rand.Rand // the strategies' randomness

	strategy   func(int) retry.Strategy
	serverFree time.Duration // when the server finishes the work queued so far
	tokens     float64       // Throttle: the server's rate-limit bucket
	lastRefill time.Duration

	res       Result
	latencies []time.Duration
	attempts  []int // per 1 s bucket: attempts that completed (answered)
	successes []int // per bucket: attempts that succeeded
}

const bucket = time.Second

func (r *runner) run() Result {
	s := r.s
	r.arrivals = rand.New(rand.NewPCG(s.Seed, 1))
	r.server = rand.New(rand.NewPCG(s.Seed, 2))
	r.jitter = rand.New(rand.NewPCG(s.Seed, 3))
	r.strategy = r.p.New(r.jitter.Float64)
	r.tokens = s.ThrottleRate

	n := int(s.Duration / bucket)
	r.res = Result{Policy: r.p.Name, Step: bucket.Seconds(), Offered: make([]float64, n), Goodput: make([]float64, n)}
	r.attempts = make([]int, n)
	r.successes = make([]int, n)

	// Each client sends at a steady interval, starting at a random phase.
	interval := time.Duration(float64(s.Clients) / s.Rate * float64(time.Second))
	for c := range s.Clients {
		r.push(&event{at: time.Duration(r.arrivals.Float64() * float64(interval)), kind: evIssue, c: c})
	}
	// The world ends a little after the last request is issued: requests
	// still waiting then count as failed, with the latency they had so far.
	end := s.Duration + Grace(s)
	for r.q.Len() > 0 {
		e := heap.Pop(&r.q).(*event)
		if e.at > end {
			r.unfinished(e, end)
			continue
		}
		switch e.kind {
		case evIssue:
			if e.at >= s.Duration {
				continue
			}
			r.issue(e.c, e.at)
			r.push(&event{at: e.at + interval, kind: evIssue, c: e.c})
		case evAttempt:
			r.attempt(e.r, e.at)
		case evAnswer:
			r.answer(e.r, e.at, e.ok, e.err)
		}
	}
	r.finish()
	return r.res
}

// Grace is how long a run goes on after its last request is issued, so that
// requests answered promptly are not cut off: twice the attempt timeout.
func Grace(s Scenario) time.Duration { return 2 * s.Timeout }

// unfinished counts a request still in flight when the run ends.
func (r *runner) unfinished(e *event, end time.Duration) {
	if e.kind == evIssue || e.r == nil {
		return
	}
	r.latencies = append(r.latencies, end-e.r.issued)
}

func (r *runner) push(e *event) {
	r.seq++
	e.seq = r.seq
	heap.Push(&r.q, e)
}

func (r *runner) issue(client int, at time.Duration) {
	r.res.Requests++
	if r.inIncident(at) {
		r.res.IncidentRequests++
	}
	req := &request{client: client, issued: at}
	tok, err := r.strategy(client).AcquireInitialToken("")
	if err != nil {
		tok = retry.Token{} // no token: one attempt (seed 001)
	}
	req.tok = tok
	r.push(&event{at: at + tok.Delay(), kind: evAttempt, r: req})
}

// attempt sends one attempt of req at time at and schedules its answer.
func (r *runner) attempt(req *request, at time.Duration) {
	s := r.s
	r.res.Attempts++
	if r.inIncident(at) {
		r.res.IncidentAttempts++
	}
	if i := int(at / bucket); i < len(r.res.Offered) {
		r.res.Offered[i]++
	}

	// The rate limiter answers at once, before the queue.
	if s.Kind == Throttle && r.inIncident(at) && !r.admit(at) {
		err := retry.WithInfo(errors.New("429 Too Many Requests"),
			retry.Info{Safety: retry.Safe, Throttle: true, RetryAfter: s.RetryAfter, Fault: retry.FaultClient})
		r.push(&event{at: at, kind: evAnswer, r: req, err: err})
		return
	}
	capacity := s.Capacity
	if s.Kind == Overload && r.inIncident(at) {
		capacity = s.DegradedCapacity
	}
	start := max(at, r.serverFree)
	done := start + time.Duration(float64(time.Second)/capacity)
	r.serverFree = done // the work is done whether or not anyone still waits for it
	if done-at > s.Timeout {
		r.push(&event{at: at + s.Timeout, kind: evAnswer, r: req, err: errTimeout})
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
		r.push(&event{at: done, kind: evAnswer, r: req, err: errFailed})
		return
	}
	r.push(&event{at: done, kind: evAnswer, r: req, ok: true})
}

// admit takes a token from the throttling server's rate limiter.
func (r *runner) admit(at time.Duration) bool {
	r.tokens = min(r.s.ThrottleRate, r.tokens+(at-r.lastRefill).Seconds()*r.s.ThrottleRate)
	r.lastRefill = at
	if r.tokens >= 1 {
		r.tokens--
		return true
	}
	return false
}

func (r *runner) answer(req *request, at time.Duration, ok bool, err error) {
	i := int(at / bucket)
	if i < len(r.attempts) {
		r.attempts[i]++
	}
	s := r.strategy(req.client)
	if ok {
		_ = s.RecordSuccess(req.tok)
		r.res.Succeeded++
		if i < len(r.successes) {
			r.successes[i]++
			r.res.Goodput[i]++
		}
		r.latencies = append(r.latencies, at-req.issued)
		return
	}
	next, refused := s.RefreshToken(req.tok, err)
	if refused == nil && r.p.MaxElapsed > 0 && at+next.Delay()-req.issued > r.p.MaxElapsed {
		if rel, isRel := s.(retry.Releaser); isRel {
			_ = rel.ReleaseToken(next)
		}
		refused = retry.ErrMaxAttempts
	}
	if refused != nil {
		r.latencies = append(r.latencies, at-req.issued)
		return
	}
	req.tok = next
	r.push(&event{at: at + next.Delay(), kind: evAttempt, r: req})
}

func (r *runner) inIncident(at time.Duration) bool { return at >= r.s.Start && at < r.s.End }

// finish computes latency percentiles and recovery.
func (r *runner) finish() {
	slices.Sort(r.latencies)
	r.res.P50 = percentile(r.latencies, 0.50)
	r.res.P99 = percentile(r.latencies, 0.99)

	// Healthy: at least 90 % of the attempts answered in a second succeed,
	// and it stays so until the end of the run.
	first := -1
	for i := len(r.attempts) - 1; i >= int(r.s.End/bucket); i-- {
		if r.attempts[i] == 0 || float64(r.successes[i]) < 0.9*float64(r.attempts[i]) {
			break
		}
		first = i
	}
	if first >= 0 {
		r.res.Recovered = true
		r.res.Recovery = max(time.Duration(first)*bucket-r.s.End, 0)
	}
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
