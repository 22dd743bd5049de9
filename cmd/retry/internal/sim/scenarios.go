package sim

import (
	"fmt"
	"time"
)

// Defaults returns the scenario of the given kind for a fleet sending rate
// requests per second in all for duration, with the incident in its second
// sixth to its half (10 s to 30 s of a minute; to a third for overload):
//
//	outage    capacity 1.5 × rate; every attempt fails during the incident
//	brownout  capacity 1.5 × rate; 30 % of attempts fail during the incident
//	overload  capacity 1.25 × rate, down to 0.6 × rate during the incident
//	throttle  capacity 1.5 × rate; beyond 0.5 × rate, 429 with Retry-After: 1
//
// Clients wait 1 s for an answer. Every attempt the server queues costs it
// the same work, whether it succeeds, fails, or is answered after its client
// gave up; a 429 costs it nothing (RejectCost 0: a front-door limiter).
func Defaults(kind Kind, clients int, rate float64, duration time.Duration, seed uint64) (Scenario, error) {
	s := Scenario{
		Kind: kind, Clients: clients, Rate: rate, Duration: duration, Seed: seed,
		Capacity: 1.5 * rate, Timeout: time.Second,
		Start: duration / 6, End: duration / 2,
	}
	switch kind {
	case Outage:
	case Brownout:
		s.FailRate = 0.3
	case Overload:
		s.Capacity, s.DegradedCapacity = 1.25*rate, 0.6*rate
		s.End = duration / 3
	case Throttle:
		s.ThrottleRate, s.RetryAfter = 0.5*rate, time.Second
	default:
		return Scenario{}, fmt.Errorf("unknown scenario %q (outage, brownout, overload, throttle, occ, layers)", kind)
	}
	return s, s.Check()
}

// Describe says in a line what s is.
func (s Scenario) Describe() string {
	return fmt.Sprintf("%s: %d clients send %.0f req/s for %v to a server of capacity %.0f/s; from %v to %v %s; clients time out after %v",
		s.Kind, s.Clients, s.Rate, s.Duration, s.Capacity, s.Start, s.End, s.Incident(), s.Timeout)
}

// Incident says what happens during the incident of s, e.g. "every attempt
// fails".
func (s Scenario) Incident() string {
	switch s.Kind {
	case Outage:
		return "every attempt fails"
	case Brownout:
		return fmt.Sprintf("%.0f%% of attempts fail", 100*s.FailRate)
	case Overload:
		return fmt.Sprintf("capacity drops to %.0f/s", s.DegradedCapacity)
	case Throttle:
		cost := "nothing (a front-door limiter)"
		switch {
		case s.RejectCost == 1:
			cost = "as much as any attempt"
		case s.RejectCost > 0:
			cost = fmt.Sprintf("%.3g%% of an attempt's work", 100*s.RejectCost)
		}
		return fmt.Sprintf("beyond %.0f/s: 429, Retry-After %v, costing the server %s", s.ThrottleRate, s.RetryAfter, cost)
	}
	return ""
}
