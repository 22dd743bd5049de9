package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/retrykit/retry"
)

// Layers is the kind of the layered scenario, whose model is its own
// (LayersScenario, RunLayers): a chain of tiers, each retrying its calls to
// the next.
const Layers Kind = "layers"

// Tiers is the number of tiers in the layered scenario: front, middle and
// back.
const Tiers = 3

// TierNames names the tiers, front first.
var TierNames = [Tiers]string{"front", "middle", "back"}

// LayersScenario is a chain of three tiers, front → middle → back, and the
// database behind the back: retries nest. Users send Rate requests per
// second to the front; users do not retry. Each tier is a fleet of Clients
// instances, each with a strategy of its own; an instance serves an attempt
// it receives with TierCapacity/Clients attempts per second of its own work
// (a FIFO queue per instance), then calls the next tier through its strategy
// (the back calls the database), and answers success if that call succeeded
// and failure if it gave up. Each user sends to a front instance of its
// own; the other tiers take attempts at their instances in turn. The
// database is one FIFO queue that serves Capacity attempts per second; from
// Start to End every attempt it serves fails, and a failure costs it the
// same work as a success. Every tier waits Timeout for an attempt's answer
// (users wait for the front's, however long it takes); a tier whose caller
// stopped waiting does not learn it, and finishes the work, retries
// included, as a server without deadline propagation does (with Shed, a
// queue drops work whose caller has already given up, unserved).
type LayersScenario struct {
	Kind     Kind          `json:"kind"` // Layers
	Clients  int           `json:"clients"`
	Rate     float64       `json:"rate"`
	Duration time.Duration `json:"duration_ns"`
	// TierCapacity is the attempts per second each tier's fleet serves.
	TierCapacity float64       `json:"tier_capacity"`
	Capacity     float64       `json:"capacity"` // the database's attempts per second
	Timeout      time.Duration `json:"timeout_ns"`
	Start        time.Duration `json:"start_ns"` // when the database's outage starts
	End          time.Duration `json:"end_ns"`   // and ends
	Seed         uint64        `json:"seed"`
	Shed         bool          `json:"shed"`
}

// DefaultLayers returns the layered scenario: the database's capacity is 1.5
// × rate, as the server's of the outage scenario, and its outage lasts from
// a sixth of the run to its half; each tier's fleet serves 10 × rate, room
// for the retries of the tier above it (an instance's own work takes
// Clients/(10 × rate): 10 ms at the defaults), so that the retry storm hurts
// where the outage is. Callers wait 1 s.
func DefaultLayers(clients int, rate float64, duration time.Duration, seed uint64) LayersScenario {
	return LayersScenario{
		Kind: Layers, Clients: clients, Rate: rate, Duration: duration, Seed: seed,
		TierCapacity: 10 * rate, Capacity: 1.5 * rate, Timeout: time.Second,
		Start: duration / 6, End: duration / 2,
	}
}

// Check reports what is wrong with s, if anything.
func (s LayersScenario) Check() error {
	// The fleet, load, capacity, timeout and incident follow the rules of
	// the other scenarios.
	err := Scenario{Kind: Outage, Clients: s.Clients, Rate: s.Rate, Duration: s.Duration, Capacity: s.Capacity,
		Timeout: s.Timeout, Start: s.Start, End: s.End}.Check()
	switch {
	case err != nil:
		return err
	case !(s.TierCapacity > 0) || s.TierCapacity > 1e12:
		return errors.New("tier capacity must be positive")
	}
	return nil
}

// Describe says in two lines what s is.
func (s LayersScenario) Describe() string {
	return fmt.Sprintf("layers: users send %.0f req/s for %v to front → middle → back → a database; each tier is %d instances serving %.0f attempts/s in all;\n"+
		"the database serves %.0f/s and from %v to %v fails every attempt; callers time out after %v",
		s.Rate, s.Duration, s.Clients, s.TierCapacity, s.Capacity, s.Start, s.End, s.Timeout)
}

// LayerRule is when a tier leaves the retries of an answered failure to its
// caller: what retry.CallerRetries says in the tier's work.
type LayerRule uint8

// Layer rules.
const (
	// Alone: every tier retries as if it were the only one.
	Alone LayerRule = iota
	// RetriesMarked is retrykit today: a request that says it is a retry
	// (Retry-Attempt 2 or more, as httpretry.Transport and forrst.Client
	// send) is marked by the server (httpretry.Handler, forrst.Server), and
	// in its work an integration makes one attempt for an answered failure
	// and returns it (retry.ErrOuterLoop); timeouts and first attempts' work
	// retry as usual.
	RetriesMarked
	// AllMarked marks every request from a caller that retries, first
	// attempts too: what the library would do if retry.Do marked its
	// operation's context and the mark travelled with every attempt.
	AllMarked
)

// LayerPolicy is a row of the layered scenario: the strategy of every
// tier's instances and the rule by which the tiers share their retries.
type LayerPolicy struct {
	Policy
	Rule LayerRule
}

// LayerPolicies returns the rows of the layered scenario, in table order,
// each built from the row of Policies with the same strategy.
func LayerPolicies() []LayerPolicy {
	byName := make(map[string]Policy)
	for _, p := range Policies() {
		byName[p.Name] = p
	}
	row := func(name, from string, rule LayerRule) LayerPolicy {
		p := byName[from]
		p.Name = name
		return LayerPolicy{p, rule}
	}
	return []LayerPolicy{
		row("naive: 3 attempts at every tier", "exp 100ms-10s full jitter, 3 att.", Alone),
		row("Standard at every tier", "Standard, quota per client", Alone),
		row("Adaptive at every tier, no layer rule", Default+", per client", Alone),
		row(LayerDefault, Default+", per client", RetriesMarked),
		row("layer-aware, every attempt marked", Default+", per client", AllMarked),
	}
}

// LayerDefault names the row of what a user of retrykit gets today when
// every tier uses its integrations with their defaults.
const LayerDefault = "layer-aware default (today)"

// LayersResult is what one policy did in the layered scenario.
type LayersResult struct {
	Policy   string `json:"policy"`
	Requests int    `json:"requests"` // requests users sent
	// Attempts counts the attempts each tier sent to the next (the back's
	// to the database), on behalf of any request.
	Attempts [Tiers]int `json:"attempts"`
	// IncidentRequests are the requests sent during the outage, and
	// IncidentAttempts the attempts each tier sent on their behalf,
	// whenever it sent them: a tier's amplification during the outage.
	IncidentRequests int           `json:"incident_requests"`
	IncidentAttempts [Tiers]int    `json:"incident_attempts"`
	Succeeded        int           `json:"succeeded"`   // requests answered with success
	Unfinished       int           `json:"unfinished"`  // requests unanswered when the run ended
	Recovered        bool          `json:"recovered"`   // users were served again after the outage
	Recovery         time.Duration `json:"recovery_ns"` // how long after the outage

	Step    float64   `json:"step_s"`  // seconds per point of the series
	Offered []float64 `json:"offered"` // attempts the back sent to the database per second
	Goodput []float64 `json:"goodput"` // requests that succeeded per second
}

// Amplification is the attempts tier sent per request, overall.
func (r LayersResult) Amplification(tier int) float64 { return ratio(r.Attempts[tier], r.Requests) }

// IncidentAmplification is the attempts tier sent per request sent during
// the outage.
func (r LayersResult) IncidentAmplification(tier int) float64 {
	return ratio(r.IncidentAttempts[tier], r.IncidentRequests)
}

// SuccessRate is the share of requests that succeeded.
func (r LayersResult) SuccessRate() float64 { return ratio(r.Succeeded, r.Requests) }

// InFlight bounds the user requests s holds in flight at once: those sent
// within a request's longest life, 30 attempt timeouts and the minute the
// rows' backoffs can add (three attempts at each tier, waits of up to 20 s).
// Memory follows it, not the requests of the whole run.
func (s LayersScenario) InFlight() float64 {
	return s.Rate * min(s.Duration, 30*s.Timeout+time.Minute).Seconds()
}

// Footprint is about the most memory a run of s holds, in bytes: its user
// requests in flight, each with the calls it makes at every tier, and the
// tiers' instances, each with its own strategy.
func (s LayersScenario) Footprint() float64 {
	return s.InFlight()*LayerBytesPerRequest + float64(s.Clients)*LayerBytesPerClient
}

// LayersGrace is how long a layered run goes on after its last request is
// sent: the work a request leaves below the front (each tier's attempts and
// their retries, done whether or not anyone still waits for them) can take
// several timeouts.
func LayersGrace(s LayersScenario) time.Duration { return 10 * s.Timeout }

// RunLayers simulates p in s, which must pass Check. It stops early, with
// ctx's error, if ctx is done, and calls report, if not nil, now and then
// with the share of the run's virtual time done.
func RunLayers(ctx context.Context, s LayersScenario, p LayerPolicy, report func(done float64)) (LayersResult, error) {
	r := &layers{s: s, p: p, res: LayersResult{Policy: p.Name}}
	return r.run(ctx, report)
}

// A layerCall is one call a tier makes to the next through its strategy,
// for one attempt it serves (the front's: for a user's request).
type layerCall struct {
	parent   *layerCall // whose attempt this call serves; nil at the front
	pn       int32      // that attempt's number
	tier     uint8
	marked   bool          // the caller retries: retry.CallerRetries in this call's work
	incident bool          // serves a request sent during the outage
	n        int32         // attempts made so far
	pending  int32         // the attempt whose answer the call awaits; 0 if none
	issued   time.Duration // the user's request's, at the front
	strat    retry.Strategy
	tok      retry.Token
}

// Events of a layered run.
const (
	lvIssue   = iota // a user sends a request
	lvStart          // a tier has done its own work for an attempt and starts its call
	lvAttempt        // a call sends an attempt
	lvAnswer         // an attempt's answer, or its timeout, reaches its caller
)

type layerEvent struct {
	at   time.Duration
	seq  uint64
	c    *layerCall
	n    int32 // lvAnswer: the attempt answered; lvIssue: the user
	kind uint8
	ans  uint8
}

// layerQueue is a binary min-heap of events by time, then order scheduled.
type layerQueue []layerEvent

func (h *layerQueue) push(e layerEvent) {
	q := append(*h, e)
	for i := len(q) - 1; i > 0; {
		parent := (i - 1) / 2
		if !q[i].before(q[parent]) {
			break
		}
		q[i], q[parent] = q[parent], q[i]
		i = parent
	}
	*h = q
}

func (a layerEvent) before(b layerEvent) bool { return a.at < b.at || a.at == b.at && a.seq < b.seq }

func (h *layerQueue) pop() layerEvent {
	q := *h
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q[last] = layerEvent{}
	q = q[:last]
	for i := 0; ; {
		small, l, r := i, 2*i+1, 2*i+2
		if l < len(q) && q[l].before(q[small]) {
			small = l
		}
		if r < len(q) && q[r].before(q[small]) {
			small = r
		}
		if small == i {
			break
		}
		q[i], q[small] = q[small], q[i]
		i = small
	}
	*h = q
	return top
}

type layers struct {
	s   LayersScenario
	p   LayerPolicy
	res LayersResult

	q     layerQueue
	seq   uint64
	clock time.Duration
	end   time.Duration

	strategy [Tiers]func(int) retry.Strategy
	free     [Tiers][]time.Duration // when each instance of a tier is free
	next     [Tiers]int             // the instance the next attempt goes to
	work     time.Duration          // an instance's own work for an attempt
	dbFree   time.Duration          // when the database is free

	answered  int
	answers   []int // per second: requests answered
	successes []int // per second: requests answered with success
}

func (r *layers) push(e layerEvent) {
	if e.at > r.end {
		return // the run is over by then: its request is unfinished
	}
	r.seq++
	e.seq = r.seq
	r.q.push(e)
}

func (r *layers) run(ctx context.Context, report func(float64)) (LayersResult, error) {
	s := r.s
	arrivals := rand.New(rand.NewPCG(s.Seed, 1))
	jitter := rand.New(rand.NewPCG(s.Seed, 3))
	env := Env{Rand: jitter.Float64, Now: func() time.Time { return Epoch.Add(r.clock) }}
	for t := range Tiers {
		r.strategy[t] = r.p.New(env) // each tier's instances have strategies of their own
		r.free[t] = make([]time.Duration, s.Clients)
	}
	r.work = time.Duration(float64(s.Clients) / s.TierCapacity * float64(time.Second))
	r.end = s.Duration + LayersGrace(s)
	n := int(s.Duration / bucket)
	r.answers, r.successes = make([]int, n), make([]int, n)
	r.res.Step, r.res.Offered, r.res.Goodput = bucket.Seconds(), make([]float64, n), make([]float64, n)

	// Users send at a steady interval each, from a random phase; user i's
	// requests go to front instance i.
	interval := time.Duration(float64(s.Clients) / s.Rate * float64(time.Second))
	for u := range s.Clients {
		r.push(layerEvent{at: time.Duration(arrivals.Float64() * float64(interval)), kind: lvIssue, n: int32(u)})
	}
	for i := 0; len(r.q) > 0; i++ {
		if i%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return LayersResult{}, err
			}
			if report != nil {
				report(float64(r.clock) / float64(r.end))
			}
		}
		e := r.q.pop()
		r.clock = e.at
		switch e.kind {
		case lvIssue:
			if e.at >= s.Duration {
				continue
			}
			r.issue(int(e.n), e.at)
			r.push(layerEvent{at: e.at + interval, kind: lvIssue, n: e.n})
		case lvStart:
			r.start(e.c, e.at)
		case lvAttempt:
			r.attempt(e.c, e.at)
		case lvAnswer:
			r.answer(e.c, e.n, e.ans, e.at)
		}
	}
	r.res.Unfinished = r.res.Requests - r.answered
	r.finish()
	return r.res, nil
}

func (r *layers) inOutage(at time.Duration) bool { return at >= r.s.Start && at < r.s.End }

// issue sends a user's request to front instance user.
func (r *layers) issue(user int, at time.Duration) {
	r.res.Requests++
	incident := r.inOutage(at)
	if incident {
		r.res.IncidentRequests++
	}
	c := &layerCall{tier: 0, incident: incident, issued: at, strat: r.strategy[0](user)}
	r.serve(c, user, at)
}

// serve queues c's tier's own work for the attempt c serves at instance inst,
// then starts c, unless the tier sheds the work of a caller that gave up.
func (r *layers) serve(c *layerCall, inst int, at time.Duration) {
	free := &r.free[c.tier][inst]
	begin := max(at, *free)
	if r.s.Shed && c.parent != nil && begin-at >= r.s.Timeout {
		return // the caller's timeout answers it
	}
	*free = begin + r.work
	r.push(layerEvent{at: *free, kind: lvStart, c: c})
}

// start begins call c: its strategy's first token, then its first attempt.
func (r *layers) start(c *layerCall, at time.Duration) {
	tok, err := c.strat.AcquireInitialToken("")
	if err != nil {
		tok = retry.Token{} // no token: one attempt, as the Smithy retry guide says
	}
	c.tok = tok
	r.push(layerEvent{at: at + tok.Delay(), kind: lvAttempt, c: c})
}

// attempt sends c's next attempt: to the next tier, or from the back to the
// database.
func (r *layers) attempt(c *layerCall, at time.Duration) {
	s := r.s
	c.n++
	c.pending = c.n
	r.res.Attempts[c.tier]++
	if c.incident {
		r.res.IncidentAttempts[c.tier]++
	}
	answer := func(when time.Duration, ans uint8) {
		r.push(layerEvent{at: when, kind: lvAnswer, c: c, n: c.n, ans: ans})
	}
	if int(c.tier) == Tiers-1 {
		if i := int(at / bucket); i < len(r.res.Offered) {
			r.res.Offered[i]++
		}
		begin := max(at, r.dbFree)
		if s.Shed && begin-at >= s.Timeout {
			answer(at+s.Timeout, ansTimeout)
			return
		}
		done := later(begin, 1/s.Capacity)
		r.dbFree = done
		switch {
		case done-at > s.Timeout:
			answer(at+s.Timeout, ansTimeout)
		case r.inOutage(done):
			answer(done, ansFailed)
		default:
			answer(done, ansOK)
		}
		return
	}
	answer(at+s.Timeout, ansTimeout) // unless the next tier answers first
	tier := c.tier + 1
	inst := r.next[tier]
	r.next[tier] = (inst + 1) % s.Clients
	marked := false
	switch r.p.Rule {
	case RetriesMarked:
		marked = c.n >= 2 // Retry-Attempt: 2 or more
	case AllMarked:
		marked = true
	}
	child := &layerCall{parent: c, pn: c.n, tier: tier, marked: marked, incident: c.incident, strat: r.strategy[tier](inst)}
	r.serve(child, inst, at)
}

// answer hands c the answer of its attempt n, unless c stopped waiting for
// it.
func (r *layers) answer(c *layerCall, n int32, ans uint8, at time.Duration) {
	if c.pending != n {
		return // a late answer, or the timeout of an attempt answered in time
	}
	c.pending = 0
	if ans == ansOK {
		_ = c.strat.RecordSuccess(c.tok)
		r.done(c, true, at)
		return
	}
	if ans == ansFailed && c.marked {
		// retry.ErrOuterLoop: the failed answer goes back to the caller,
		// who retries it. As retry.Do does after a BeforeRetry refusal, the
		// strategy still hears of the failure, marked Unsafe so that it
		// neither retries nor charges for it: its health signals miss none.
		if next, refused := c.strat.RefreshToken(c.tok, errRefused); refused == nil {
			if rel, ok := c.strat.(retry.Releaser); ok {
				_ = rel.ReleaseToken(next) // granted against the rules: given back
			}
		}
		r.done(c, false, at)
		return
	}
	err := errFailed
	if ans == ansTimeout {
		err = errTimeout
	}
	next, refused := c.strat.RefreshToken(c.tok, err)
	if refused != nil {
		r.done(c, false, at)
		return
	}
	c.tok = next
	r.push(layerEvent{at: at + next.Delay(), kind: lvAttempt, c: c})
}

// done ends call c: its tier answers the attempt it served (the front, the
// user).
func (r *layers) done(c *layerCall, ok bool, at time.Duration) {
	if c.parent != nil {
		ans := ansFailed // an answered failure: the call gave up
		if ok {
			ans = ansOK
		}
		r.answer(c.parent, c.pn, ans, at)
		return
	}
	r.answered++
	i := int(at / bucket)
	if i < len(r.answers) {
		r.answers[i]++
	}
	if ok {
		r.res.Succeeded++
		if i < len(r.successes) {
			r.successes[i]++
			r.res.Goodput[i]++
		}
	}
}

// finish computes recovery: the users were served again once at least 90 %
// of the requests answered in each second succeeded, to the end of the run.
func (r *layers) finish() {
	first := -1
	for i := len(r.answers) - 1; i >= int(r.s.End/bucket); i-- {
		if r.answers[i] > 0 && float64(r.successes[i]) < 0.9*float64(r.answers[i]) {
			break
		}
		first = i
	}
	if first >= 0 {
		r.res.Recovered = true
		r.res.Recovery = max(time.Duration(first)*bucket-r.s.End, 0)
	}
}

// errRefused is errFailed as retry.Do hands it to the strategy after a
// BeforeRetry refusal: Unsafe, so that it is counted but not retried.
var errRefused = retry.WithInfo(errFailed, retry.Info{Safety: retry.Unsafe, Fault: retry.FaultServer})
