package sim

import (
	"time"
)

// Result is what one policy did in one scenario.
type Result struct {
	Policy   string `json:"policy"`
	Requests int    `json:"requests"` // requests issued
	Attempts int    `json:"attempts"` // attempts sent
	// During the incident: requests issued, and attempts sent, within it.
	IncidentRequests int `json:"incident_requests"`
	IncidentAttempts int `json:"incident_attempts"`
	Succeeded        int `json:"succeeded"` // requests that succeeded before the run ended

	// Unfinished requests were still retrying when the run ended: they
	// count as failed, and their latency is cut off there.
	Unfinished int `json:"unfinished"`

	P50       time.Duration `json:"p50_ns"` // latency of requests, issue to final answer
	P99       time.Duration `json:"p99_ns"`
	P50Cut    bool          `json:"p50_cut"` // the percentile falls among cut-off latencies: at least P50
	P99Cut    bool          `json:"p99_cut"`
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
