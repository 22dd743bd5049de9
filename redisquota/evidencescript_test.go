package redisquota_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/retrykit/retry/internal/sharedevidence"
	"github.com/retrykit/retry/redisquota"
)

// TestEvidenceScriptIsMemory plays one random sequence of reports, from
// many scopes at random times (within a tenth of the window, across
// tenths, past a window and past two), to the evidence script in Redis and
// to sharedevidence.Memory, the store's rule in Go, at the same times: every
// view they answer is the same, to the nanosecond.
func TestEvidenceScriptIsMemory(t *testing.T) {
	c := client(t)
	for _, window := range []time.Duration{time.Second, 730 * time.Millisecond, 10 * time.Second} {
		t.Run(window.String(), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(uint64(window), 43))
			name := uniqueName("twin")
			var m sharedevidence.Memory
			scopes := make([]string, 12)
			for i := range scopes {
				scopes[i] = fmt.Sprintf("scope-%d", i)
			}
			now := time.Duration(time.Now().UnixMicro()) * time.Microsecond
			var compared, withLatency, withWorked, withStreak int
			for step := range 400 {
				switch rnd.IntN(10) {
				case 0:
					now += window + time.Duration(rnd.IntN(int(2*window/time.Microsecond)))*time.Microsecond
				case 1, 2, 3:
					now += time.Duration(rnd.IntN(int(window/10/time.Microsecond))) * time.Microsecond
				default:
					now += time.Duration(rnd.IntN(int(window/4/time.Microsecond))) * time.Microsecond
				}
				var reports []sharedevidence.Report
				for _, i := range rnd.Perm(len(scopes))[:1+rnd.IntN(len(scopes))] {
					reports = append(reports, randomReport(rnd, scopes[i], window))
				}
				want := m.Sync(now, window, reports, nil)
				got, err := redisquota.RunEvidenceScript(t.Context(), c, name, now, window, reports)
				if err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				if len(got) != len(want) {
					t.Fatalf("step %d: %d views from the script, %d from Memory", step, len(got), len(want))
				}
				for i := range want {
					if got[i] != want[i] {
						t.Fatalf("step %d, %+v:\nscript %+v\nMemory %+v", step, reports[i], got[i], want[i])
					}
					compared++
					if want[i].Typical > 0 {
						withLatency++
					}
					if want[i].WorkedAgo >= 0 {
						withWorked++
					}
					if want[i].Streak > 0 {
						withStreak++
					}
				}
			}
			// The sequence must reach every part of the rule, or the
			// comparison proves little.
			if withLatency < compared/10 || withWorked < compared/10 || withStreak < compared/10 {
				t.Errorf("of %d views, %d had a typical latency, %d a retry that worked, %d a streak: too few to compare the rule",
					compared, withLatency, withWorked, withStreak)
			}
			t.Logf("%d views compared (%d with latency, %d with a retry that worked, %d with a streak)", compared, withLatency, withWorked, withStreak)
		})
	}
}

// randomReport is a report a process could send, at microsecond
// resolution (the script's).
func randomReport(rnd *rand.Rand, scope string, window time.Duration) sharedevidence.Report {
	r := sharedevidence.Report{Scope: scope, WorkedAgo: -1}
	r.Attempts = uint64(rnd.IntN(20))
	if r.Attempts > 0 && rnd.IntN(3) > 0 {
		r.Accepts = uint64(rnd.IntN(int(r.Attempts) + 1))
	}
	r.Timeouts = uint64(rnd.IntN(int(r.Attempts-r.Accepts) + 1))
	r.Reset = r.Accepts > 0
	r.Tail = int64(rnd.IntN(5))
	if rnd.IntN(3) == 0 {
		r.WorkedAgo = time.Duration(rnd.IntN(int(2*window/time.Microsecond))) * time.Microsecond
	}
	if rnd.IntN(2) == 0 {
		r.Probes = uint64(1 + rnd.IntN(5))
		r.ProbeNanos = r.Probes * uint64(1+rnd.IntN(int(time.Second)))
	}
	return r
}
