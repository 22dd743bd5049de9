package sim

import "time"

// timer is a call a policy asked the run to make at a time of its virtual
// clock (Env.After): the background work of a library, such as a shared
// store's syncs.
type timer struct {
	at  time.Duration
	seq uint64 // ties of time break on the order of scheduling
	f   func()
}

// timers is a binary min-heap of timers, by time and then scheduling
// order. It is apart from the events' queue, so that a run whose policy
// schedules nothing is the same event for event as before timers were.
type timers struct {
	h   []timer
	seq uint64
}

func (t *timers) push(at time.Duration, f func()) {
	t.seq++
	e := timer{at, t.seq, f}
	i := len(t.h)
	t.h = append(t.h, e)
	for i > 0 {
		parent := (i - 1) / 2
		if !e.before(t.h[parent]) {
			break
		}
		t.h[i] = t.h[parent]
		i = parent
	}
	t.h[i] = e
}

func (t *timers) pop() timer {
	top := t.h[0]
	n := len(t.h) - 1
	last := t.h[n]
	t.h[n] = timer{} // let its function go
	t.h = t.h[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		small := l
		if r := l + 1; r < n && t.h[r].before(t.h[l]) {
			small = r
		}
		if !t.h[small].before(last) {
			break
		}
		t.h[i] = t.h[small]
		i = small
	}
	if n > 0 {
		t.h[i] = last
	}
	return top
}

func (e timer) before(f timer) bool { return e.at < f.at || e.at == f.at && e.seq < f.seq }

// after schedules f d after the clock's reading (Env.After).
func (r *runner) after(d time.Duration, f func()) {
	r.timers.push(r.clock+max(d, 0), f)
}

// runTimers makes the calls scheduled up to at, the time of the next event,
// each at its own time on the clock.
func (r *runner) runTimers(at time.Duration) {
	for len(r.timers.h) > 0 && r.timers.h[0].at <= at {
		e := r.timers.pop()
		r.clock = e.at
		e.f()
	}
}
