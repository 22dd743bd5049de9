package sim

import (
	"cmp"
	"context"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/retrykit/retry"
)

func TestItemKeepsWhatItPacks(t *testing.T) {
	for _, tc := range []struct {
		at        time.Duration
		seq       uint64
		kind, ans uint8
		id        int32
	}{
		{0, 0, 0, 0, 0},
		{maxAt, maxSeq, evAnswer, ansThrottled, maxID},
		{time.Minute + 3, 1<<32 + 5, evAttempt, ansOK, 12345},
		{1, 1<<32 - 1, evAnswer, ansTimeout, 1},
	} {
		e := pack(tc.at, tc.seq, tc.kind, tc.ans, tc.id)
		if e.at() != tc.at || e.kind() != tc.kind || e.ans() != tc.ans || e.id() != tc.id {
			t.Errorf("pack(%v, %d, %d, %d, %d) unpacks to %v, %d, %d, %d", tc.at, tc.seq, tc.kind, tc.ans, tc.id, e.at(), e.kind(), e.ans(), e.id())
		}
	}
}

// The heap hands items back by time and, at the same time, in the order they
// were scheduled, whatever their kinds and ids: that order is the model's
// (a retry scheduled before a client's next request goes first at a tie).
func TestPendingOrdersByTimeThenScheduling(t *testing.T) {
	type ev struct {
		at  time.Duration
		seq uint64
		id  int32
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	var h pending
	var want []ev
	seq := uint64(0)
	popped := 0
	// Enough to span several chunks; few distinct times, so most items tie.
	for range 3 * chunkLen {
		seq += 1 + uint64(rnd.IntN(1<<33)) // crosses the 32-bit boundary inside the sequence
		e := ev{at: time.Duration(rnd.IntN(39)) * time.Hour, seq: seq, id: int32(rnd.IntN(maxID))}
		h.push(pack(e.at, e.seq, uint8(rnd.IntN(3)), uint8(rnd.IntN(4)), e.id))
		want = append(want, e)
		if rnd.IntN(4) == 0 { // interleave pops, as a run does
			slices.SortFunc(want, func(a, b ev) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.seq, b.seq)) })
			got := h.pop()
			if got.at() != want[0].at || got.id() != want[0].id {
				t.Fatalf("pop %d = (%v, id %d), want (%v, id %d)", popped, got.at(), got.id(), want[0].at, want[0].id)
			}
			want = want[1:]
			popped++
		}
	}
	slices.SortFunc(want, func(a, b ev) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.seq, b.seq)) })
	for i, w := range want {
		got := h.pop()
		if got.at() != w.at || got.id() != w.id {
			t.Fatalf("final pop %d = (%v, id %d), want (%v, id %d)", i, got.at(), got.id(), w.at, w.id)
		}
	}
	if h.len() != 0 {
		t.Fatalf("%d items left", h.len())
	}
}

func TestSlotsAreReused(t *testing.T) {
	for _, tokens := range []bool{false, true} {
		s := newSlots(tokens, false)
		var ids []int32
		for range chunkLen + 10 {
			ids = append(ids, s.take())
		}
		if s.used != chunkLen+10 || len(s.issued) != 2 {
			t.Fatalf("tokens %v: %d slots used in %d chunks, want %d in 2", tokens, s.used, len(s.issued), chunkLen+10)
		}
		if tokens {
			c, i := split(ids[3])
			s.toks[c][i] = retry.NewToken(2, time.Second, "state")
		}
		s.release(ids[3])
		s.release(ids[chunkLen+5])
		if tokens {
			c, i := split(ids[3])
			if s.toks[c][i] != (retry.Token{}) {
				t.Errorf("a released slot still holds its token, and the strategy's state for it")
			}
		}
		if a, b, c := s.take(), s.take(), s.take(); a != ids[chunkLen+5] || b != ids[3] || c != chunkLen+10 {
			t.Errorf("tokens %v: took %d, %d, %d after releasing %d and %d; want those two, then a new one", tokens, a, b, c, ids[3], ids[chunkLen+5])
		}
	}
}

// A run whose clients share a strategy that decides without tokens holds no
// token per request; it must give exactly the results the tokens give, in
// every scenario, for every policy that takes that path.
func TestTokenlessRunsMatchTokens(t *testing.T) {
	type variant struct {
		name string
		s    Scenario
	}
	var variants []variant
	for _, kind := range []Kind{Outage, Brownout, Overload, Throttle} {
		s, err := Defaults(kind, 20, 400, 30*time.Second, 3)
		if err != nil {
			t.Fatal(err)
		}
		variants = append(variants, variant{string(kind), s})
		if kind == Throttle {
			s.RejectCost = 1
			variants = append(variants, variant{"throttle, 429s queued", s})
		}
		if kind == Overload {
			s.Shed = true
			variants = append(variants, variant{"overload, shedding", s})
		}
	}
	// A policy of none of the rows: a time limit that ends retries within
	// the run, and a jitter that reads the previous wait.
	bounded := Policy{Name: "decorrelated for 4s", MaxElapsed: 4 * time.Second, New: func(env Env) func(int) retry.Strategy {
		s := &retry.Simple{MaxAttempts: 50, Backoff: retry.Exponential{Base: 20 * time.Millisecond, Max: 2 * time.Second, Jitter: retry.DecorrelatedJitter, Rand: env.Rand}}
		return func(int) retry.Strategy { return s }
	}}
	tokenless := 0
	for _, p := range append(Policies(), bounded) {
		step := sharedStepper(p.New(Env{Rand: rand.New(rand.NewPCG(1, 1)).Float64, Now: func() time.Time { return Epoch }, After: func(time.Duration, func()) {}}), 20)
		if step == nil {
			continue
		}
		tokenless++
		for _, v := range variants {
			fast := runner{s: v.s, p: p, ctx: context.Background()}
			want := runner{s: v.s, p: p, ctx: context.Background(), tokens: true}
			got, err1 := fast.run()
			exp, err2 := want.run()
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			if fast.step == nil || want.step != nil || len(fast.reqs.toks) != 0 {
				t.Fatalf("%s: the runs did not take the two paths", p.Name)
			}
			if !reflect.DeepEqual(got, exp) {
				t.Errorf("%s, %s: without tokens %+v\nwith tokens %+v", p.Name, v.name, summary(got), summary(exp))
			}
		}
	}
	// The simple policies, the libraries' defaults among them: those that
	// keep millions of requests in flight in a big run.
	if tokenless != 7 {
		t.Errorf("%d policies run without tokens, want the 6 rows built on retry.Simple and the test's", tokenless)
	}
}

func summary(r Result) Result {
	r.Offered, r.Goodput = nil, nil
	return r
}

// A server too slow to serve one attempt within the run answers no one:
// its clock saturates rather than wrapping round to an early answer.
func TestServerTooSlowForTheRunAnswersNoOne(t *testing.T) {
	for _, capacity := range []float64{1e-3, 1e-8, 1e-10, 1e-300} {
		for _, p := range []Policy{Policies()[0], Policies()[1]} {
			s, err := Defaults(Outage, 100, 1000, 12*time.Second, 1)
			if err != nil {
				t.Fatal(err)
			}
			s.Capacity = capacity
			if err := s.Check(); err != nil {
				t.Fatal(err)
			}
			res, err := Run(context.Background(), s, p)
			if err != nil {
				t.Fatal(err)
			}
			end := s.Duration + Grace(s)
			if res.Succeeded > 0 || res.P50 > end || res.P99 > end {
				t.Errorf("capacity %g/s, %s: %d of %d requests succeeded, p50 %v, p99 %v; the run ends at %v",
					capacity, p.Name, res.Succeeded, res.Requests, res.P50, res.P99, end)
			}
		}
	}
}

// The layered model's database too: too slow to answer within the run, it
// answers no one, for every row.
func TestLayersDatabaseTooSlowForTheRunAnswersNoOne(t *testing.T) {
	s := DefaultLayers(10, 100, 10*time.Second, 1)
	s.Capacity = 1e-8
	for _, p := range LayerPolicies() {
		res := runLayers(t, s, p)
		if res.Succeeded > 0 || res.Requests == 0 {
			t.Errorf("%s: %d of %d requests succeeded through a database that serves one attempt in three years",
				p.Name, res.Succeeded, res.Requests)
		}
	}
}
