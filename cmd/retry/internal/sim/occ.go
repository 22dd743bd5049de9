package sim

import (
	"container/heap"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/retrykit/retry"
)

// OCCScenario is AWS's "Exponential Backoff And Jitter" experiment: Clients
// each make one write to a single resource under optimistic concurrency. A
// write reads, works for Work, then commits; the commit fails if another
// client committed since the read, and the client retries after its backoff.
type OCCScenario struct {
	Clients int
	Work    time.Duration // from read to commit
	Seed    uint64
}

// OCCResult is what one backoff did in the OCC scenario.
type OCCResult struct {
	Policy     string        `json:"policy"`
	Calls      int           `json:"calls"`         // writes attempted, by all clients
	Completion time.Duration `json:"completion_ns"` // when the last client's write committed
	GaveUp     int           `json:"gave_up"`       // clients whose strategy stopped first
}

var errConflict = retry.Transient(errors.New("conflict: the resource changed since it was read"))

// RunOCC simulates policy p in the OCC scenario.
func RunOCC(s OCCScenario, p Policy) OCCResult {
	strategy := p.New(rand.New(rand.NewPCG(s.Seed, 3)).Float64)
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
	// Every client reads at time 0; the event is the commit.
	for c := range max(s.Clients, 0) {
		tok, err := strategy(c).AcquireInitialToken("")
		if err != nil {
			tok = retry.Token{}
		}
		push(&event{at: tok.Delay() + s.Work, kind: evAttempt, c: c, r: &request{client: c, tok: tok}})
	}
	for q.Len() > 0 {
		e := heap.Pop(&q).(*event)
		res.Calls++
		read := e.at - s.Work
		st := strategy(e.c)
		if lastCommit <= read {
			lastCommit = e.at
			_ = st.RecordSuccess(e.r.tok)
			res.Completion = max(res.Completion, e.at)
			continue
		}
		next, err := st.RefreshToken(e.r.tok, errConflict)
		if err != nil {
			res.GaveUp++
			continue
		}
		e.r.tok = next
		push(&event{at: e.at + next.Delay() + s.Work, kind: evAttempt, c: e.c, r: e.r})
	}
	return res
}
