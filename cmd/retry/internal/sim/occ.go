package sim

import (
	"container/heap"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"time"

	"github.com/retrykit/retry"
)

// OCCScenario is AWS's "Exponential Backoff And Jitter" experiment: Clients
// each make one write to a single resource under optimistic concurrency. A
// client reads the resource, works for Work, then sends its commit; the
// commit fails if another client committed since the read, and the client
// retries after its backoff. Every trip over the network takes a random
// |N(Hop, Hop/5)|, as in AWS's simulator: without that spread, clients that
// collide once would collide forever.
type OCCScenario struct {
	Clients int           `json:"clients"`
	Work    time.Duration `json:"work_ns"` // from read to commit
	Hop     time.Duration `json:"hop_ns"`  // mean network delay of one trip
	Base    time.Duration `json:"base_ns"` // backoff base
	Max     time.Duration `json:"max_ns"`  // backoff cap
	Seed    uint64        `json:"seed"`
}

// DefaultOCC returns AWS's parameters: 5 ms base, 2 s cap, 10 ms per network
// trip, and an instant write.
func DefaultOCC(clients int, seed uint64) OCCScenario {
	return OCCScenario{Clients: clients, Hop: 10 * time.Millisecond, Base: 5 * time.Millisecond, Max: 2 * time.Second, Seed: seed}
}

// OCCResult is what one backoff did in the OCC scenario.
type OCCResult struct {
	Policy     string        `json:"policy"`
	Calls      int           `json:"calls"`         // writes attempted, by all clients
	Completion time.Duration `json:"completion_ns"` // when the last client's write committed
	GaveUp     int           `json:"gave_up"`       // clients whose strategy stopped first
}

var errConflict = retry.Transient(errors.New("conflict: the resource changed since it was read"))

// RunOCC simulates policy p in the OCC scenario. It stops early, with ctx's
// error, if ctx is done.
func RunOCC(ctx context.Context, s OCCScenario, p Policy) (OCCResult, error) {
	var clock time.Duration // when the strategy is consulted
	strategy := p.New(Env{Rand: rand.New(rand.NewPCG(s.Seed, 3)).Float64, Now: func() time.Time { return Epoch.Add(clock) }})
	network := rand.New(rand.NewPCG(s.Seed, 4))
	hop := func() time.Duration {
		return time.Duration(math.Abs(network.NormFloat64()*float64(s.Hop)/5 + float64(s.Hop)))
	}
	res := OCCResult{Policy: p.Name}
	var (
		q          queue
		seq        uint64
		lastCommit = time.Duration(-1)
	)
	push := func(e *event) {
		seq++
		e.seq = seq
		heap.Push(&q, e)
	}
	// An attempt sent at `at` reads the resource one trip later; its commit
	// reaches the resource after the answer's trip back, the work, and the
	// commit's trip. The event is the commit; it remembers when it read.
	send := func(c int, at time.Duration, req *request) {
		read := at + hop()
		push(&event{at: read + hop() + s.Work + hop(), read: read, c: c, r: req})
	}
	for c := range max(s.Clients, 0) {
		tok, err := strategy(c).AcquireInitialToken("")
		if err != nil {
			tok = retry.Token{}
		}
		send(c, tok.Delay(), &request{tok: tok})
	}
	for n := 0; q.Len() > 0; n++ {
		if n%checkEvery == 0 && ctx.Err() != nil {
			return OCCResult{}, ctx.Err()
		}
		e := heap.Pop(&q).(*event)
		res.Calls++
		answered := e.at + hop() // when the client hears the outcome
		clock = answered
		st := strategy(e.c)
		if lastCommit <= e.read {
			lastCommit = e.at
			_ = st.RecordSuccess(e.r.tok)
			res.Completion = max(res.Completion, answered)
			continue
		}
		next, err := st.RefreshToken(e.r.tok, errConflict)
		if err != nil {
			res.GaveUp++
			continue
		}
		e.r.tok = next
		send(e.c, answered+next.Delay(), e.r)
	}
	return res, nil
}

// Check reports what is wrong with s, if anything.
func (s OCCScenario) Check() error {
	switch {
	case s.Clients < 1 || s.Clients > 10000:
		return errors.New("occ needs between 1 and 10000 clients")
	case s.Work < 0 || s.Hop < 0 || s.Base < 0 || s.Max < 0:
		return errors.New("occ durations must not be negative")
	}
	return nil
}

// event is an OCC attempt's commit reaching the resource.
type event struct {
	at   time.Duration
	seq  uint64 // ties break in the order events were scheduled: determinism
	c    int    // the client
	r    *request
	read time.Duration // when the attempt read the resource
}

// request is an OCC client's write, retried until it commits.
type request struct {
	tok retry.Token
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

func (q *queue) Push(x any) { *q = append(*q, x.(*event)) }

func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}
