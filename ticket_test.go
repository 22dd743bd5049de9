package retry

import (
	"context"
	"testing"
)

// TestWithTicketTwiceTheSameTicket: the same ticket given twice (an
// integration appending the caller's options and its own WithTicket of the
// same probe) must not free the probe's place before its attempt is made:
// with Probes 1, a second caller is let through beside it, and the probe's
// success must still be counted.
func TestWithTicketTwiceTheSameTicket(t *testing.T) {
	k := newBrk(t, BreakerOptions{Probes: 1})
	k.probing()
	tk, _ := k.b.Allow("")
	if !tk.Probe() {
		t.Fatal("not a probe")
	}
	others := 0
	err := Do(context.Background(), &No{}, func(context.Context) error {
		// While the probe's attempt runs, its place is held.
		if o, err := k.b.Allow(""); err == nil {
			others++
			o.Release()
		}
		return nil
	}, WithBreaker(k.b), WithTicket(tk), WithTicket(tk))
	if err != nil {
		t.Fatal(err)
	}
	if others != 0 {
		t.Errorf("%d other attempts let through while the only probe ran", others)
	}
	k.want("", BreakerClosed)
}

// TestWithTicketGivenAgainAfterAnother: WithTicket(a), WithTicket(b),
// WithTicket(a): a applies and must not have been released.
func TestWithTicketGivenAgainAfterAnother(t *testing.T) {
	k := newBrk(t, BreakerOptions{Probes: 2})
	k.probing()
	a, _ := k.b.Allow("")
	b, _ := k.b.Allow("")
	others := 0
	err := Do(context.Background(), &No{}, func(context.Context) error {
		var got []BreakerTicket
		for range 3 {
			if o, err := k.b.Allow(""); err == nil {
				others++
				got = append(got, o)
			}
		}
		for _, o := range got {
			o.Release()
		}
		return nil
	}, WithBreaker(k.b), WithTicket(a), WithTicket(b), WithTicket(a))
	if err != nil {
		t.Fatal(err)
	}
	if others != 1 {
		t.Errorf("%d other attempts let through while a probe ran, want 1 (b's place)", others)
	}
}
