package sim

import (
	"errors"
	"fmt"
	"math"
	"time"
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
	Kind     Kind          `json:"kind"`
	Clients  int           `json:"clients"`     // clients sending requests
	Rate     float64       `json:"rate"`        // requests per second, all clients together
	Duration time.Duration `json:"duration_ns"` // how long clients send new requests
	Capacity float64       `json:"capacity"`    // attempts per second the server serves normally
	Timeout  time.Duration `json:"timeout_ns"`  // how long a client waits for an attempt's answer
	Start    time.Duration `json:"start_ns"`    // when the incident starts
	End      time.Duration `json:"end_ns"`      // when it ends
	Seed     uint64        `json:"seed"`        // the same seed gives the same run
	// Shed makes the server drop, unserved, work whose client has already
	// given up. By default it does the work anyway, as most servers do.
	Shed bool `json:"shed"`

	FailRate         float64       `json:"fail_rate,omitempty"`         // Brownout: share of attempts that fail
	DegradedCapacity float64       `json:"degraded_capacity,omitempty"` // Overload: capacity during the incident
	ThrottleRate     float64       `json:"throttle_rate,omitempty"`     // Throttle: attempts per second accepted during the incident
	RetryAfter       time.Duration `json:"retry_after_ns,omitempty"`    // Throttle: the wait 429 answers ask for
	// RejectCost is, in Throttle, the share of an attempt's work that a
	// 429 costs the server. 0, the default, is a front-door rate limiter
	// that answers at once, before the queue; 1 charges a 429 like any
	// other attempt: it waits its turn in the queue (and may time out
	// there), and takes a whole attempt's work.
	RejectCost float64 `json:"reject_cost,omitempty"`

	// Replicas is, in the replica scenarios (ReplicaKinds), how many
	// replicas share Capacity equally; the others have one server and 0.
	Replicas int `json:"replicas,omitempty"`
	// Balance is how the replica scenarios' load balancer picks a replica
	// for each attempt; "" in the others.
	Balance Balance `json:"balance,omitempty"`
}

// Check reports what is wrong with s, if anything.
func (s Scenario) Check() error {
	switch {
	case s.Clients < 1:
		return errors.New("clients must be at least 1")
	case !(s.Rate > 0) || math.IsInf(s.Rate, 0):
		return errors.New("rate must be a positive number")
	case s.Duration <= 0:
		return errors.New("duration must be positive")
	case !(s.Capacity > 0) || math.IsInf(s.Capacity, 0):
		return errors.New("capacity must be a positive number")
	case s.Timeout <= 0:
		return errors.New("timeout must be positive")
	case s.Clients > 1_000_000:
		return errors.New("at most a million clients")
	case float64(s.Clients)/s.Rate > s.Duration.Seconds():
		return errors.New("each client would send no request in the run: raise the rate or lower the clients")
	case float64(s.Clients)/s.Rate < 1e-6:
		return errors.New("each client would send more than a million requests a second: lower the rate or raise the clients")
	case s.Rate*s.Duration.Seconds()+float64(s.Clients) > maxRequests: // each client's first request may be one more
		// What a run can hold; MaxRequests says what this machine can.
		return fmt.Errorf("too many requests to simulate (rate × duration, and one more per client, above %d)", maxRequests)
	case s.Duration < 2*time.Second:
		return errors.New("duration must be at least 2s")
	case s.Duration > maxDuration:
		return errors.New("duration must be at most 24h") // maxDuration
	case s.Timeout > maxTimeout:
		return errors.New("timeout must be at most 1h") // maxTimeout
	case s.Start < 0 || s.End <= s.Start || s.End >= s.Duration:
		return errors.New("the incident must start at 0 or later, end after it starts, and end before the run does")
	}
	if err := s.checkIncident(); err != nil {
		return err
	}
	return s.checkReplicas()
}

// checkIncident reports what is wrong with the fields of s's kind of
// incident, if anything.
func (s Scenario) checkIncident() error {
	switch s.Kind {
	case Outage:
	case Brownout:
		if s.FailRate < 0 || s.FailRate > 1 {
			return errors.New("fail rate must be between 0 and 1")
		}
	case Overload:
		if !(s.DegradedCapacity > 0) || s.DegradedCapacity >= s.Capacity {
			return fmt.Errorf("the overload's capacity, %.3g/s (0.6 × rate), must be below the server's normal capacity, %.3g/s", s.DegradedCapacity, s.Capacity)
		}
	case Throttle:
		if !(s.ThrottleRate > 0) || s.RetryAfter < 0 {
			return errors.New("throttle rate must be positive and Retry-After not negative")
		}
	case ReplicaDown, ReplicaBlackhole, ReplicaSlow, RollingDeploy, ZoneBlip, ZoneFlap, Blip, Flapping:
		// checkReplicas checks their fields.
	default:
		return errors.New("unknown scenario kind " + string(s.Kind))
	}
	switch {
	case !(s.RejectCost >= 0 && s.RejectCost <= 1):
		return errors.New("reject cost must be between 0 (a 429 costs the server nothing) and 1 (as much as any attempt)")
	case s.RejectCost != 0 && s.Kind != Throttle:
		return errors.New("reject cost applies to the throttle scenario only, whose 429s it prices; in the others every attempt costs the server a whole attempt's work")
	}
	return nil
}

// maxDuration and maxTimeout keep a run's end, and so every event's time,
// within what an item holds.
const (
	maxDuration = 24 * time.Hour
	maxTimeout  = time.Hour
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
// and the replica scenarios (ReplicaKinds), of capacity 1.5 × rate split
// among 10 replicas behind a random balancer:
//
//	replica-down       one replica refuses connections during the incident
//	replica-blackhole  one replica accepts attempts and never answers them
//	replica-slow       one replica adds latency, exponential with mean 1 s, to its answers
//	rolling-deploy     each replica restarts in turn, for an equal slice of the incident
//	zone-blip          30% of the replicas (at least 1) refuse connections for 2 s
//	zone-flap          30% of the replicas refuse connections 1 s in every 2
//	blip               every replica refuses connections for 2 s
//	flapping           every replica refuses connections 1 s in every 2
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
	case ReplicaDown, ReplicaBlackhole, ReplicaSlow, RollingDeploy, ZoneBlip, ZoneFlap, Blip, Flapping:
		s.Replicas, s.Balance = DefaultReplicas, Random
	default:
		return Scenario{}, fmt.Errorf("unknown scenario %q (outage, brownout, overload, throttle, occ, layers, %s)", kind, replicaNames())
	}
	return s, s.Check()
}

// Describe says in a line what s is.
func (s Scenario) Describe() string {
	fleet := fmt.Sprintf("%d clients send", s.Clients)
	if s.Clients == 1 {
		fleet = "1 client sends"
	}
	server := "a server of capacity " + perSecond(s.Capacity) + "/s"
	if s.Replicas > 0 {
		server = s.ReplicaSet()
	}
	return fmt.Sprintf("%s: %s %s req/s for %v to %s; from %v to %v %s; clients time out after %v",
		s.Kind, fleet, perSecond(s.Rate), s.Duration, server, s.Start, s.End, s.Incident(), s.Timeout)
}

// perSecond formats a rate: whole numbers, but the first significant digits
// of a rate below 10 a second, which would otherwise show as 0.
func perSecond(v float64) string {
	if v < 10 {
		return fmt.Sprintf("%.3g", v)
	}
	return fmt.Sprintf("%.0f", v)
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
	return s.replicaIncident()
}
