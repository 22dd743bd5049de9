package otelretry

import (
	"context"
	"math"

	"github.com/retrykit/retry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// scopedQuota is a strategy with a quota per scope: *retry.Standard and
// *retry.Adaptive.
type scopedQuota interface {
	Available(scope string) int
}

// sendRate is a strategy with a send-rate limiter per scope: *retry.Adaptive.
type sendRate interface {
	Rate(scope string) (rate float64, limiting bool)
}

type namedQuota struct {
	name string
	q    retry.Quota
}

type namedBudget struct {
	name string
	b    *retry.Budget
}

type namedStrategy struct {
	name string
	s    retry.Strategy
}

type namedBreaker struct {
	name string
	b    *retry.Breaker
}

// gauges are the sources of the observable gauges.
type gauges struct {
	strategies []namedStrategy
	quotas     []namedQuota
	budgets    []namedBudget
	breakers   []namedBreaker
}

// WithStrategy observes s's state, with retry.strategy = name, in every
// scope the instrumentation has seen (OtherScope excepted: its scopes have
// no one value): the tokens left in its quota (retry.client.quota.available)
// if it has Available(scope) as *retry.Standard and *retry.Adaptive do and a
// quota, and the send rate its limiter allows (retry.client.send_rate) while
// it is limiting, if it has Rate(scope) as *retry.Adaptive does. Each
// strategy is observed in every scope seen, since the hooks of a call are
// not told its strategy: an instrumentation per strategy keeps the gauges
// to the scopes each one serves.
func WithStrategy(name string, s retry.Strategy) Option {
	return func(c *config) { c.gauges.strategies = append(c.gauges.strategies, namedStrategy{name, s}) }
}

// WithQuota observes the tokens q holds (retry.client.quota.available), with
// retry.quota = name: a quota shared by all scopes, such as a
// redisquota.Quota or a retry.TokenBucket given to several strategies.
func WithQuota(name string, q retry.Quota) Option {
	return func(c *config) { c.gauges.quotas = append(c.gauges.quotas, namedQuota{name, q}) }
}

// WithBudget observes the retries b allows now (retry.client.budget.available),
// with retry.budget = name.
func WithBudget(name string, b *retry.Budget) Option {
	return func(c *config) { c.gauges.budgets = append(c.gauges.budgets, namedBudget{name, b}) }
}

// WithBreaker observes the state of b's circuit (retry.client.breaker.status),
// with retry.breaker.name = name, in every scope the instrumentation has seen
// (OtherScope excepted), as b.State reports it. Each breaker is observed in
// every scope seen, closed where it has refused nothing, since the hooks of a
// call are not told its breaker: an instrumentation per breaker keeps the
// observations to the scopes each one serves. A nil b is ignored.
//
// A circuit a fleet shares through Redis (redisquota.FleetBreaker; pass its
// Breaker) is observed the same way: b.State reports the fleet's circuit as
// this process last synchronised it (within FlushInterval, 100 ms), open
// where other processes' failures opened it, and the process's own circuit
// while Redis cannot be reached. Summed over the fleet's processes, the
// open series then counts the processes that see the circuit open.
//
// The state is a state metric as the OpenTelemetry semantic conventions
// design one ("State Metrics", how-to-write-conventions): an observable
// UpDownCounter with unit 1 and one series per state, retry.breaker.state =
// closed, open or half_open, which is 1 for the circuit's state and 0 for the
// other two. A dashboard plots the open series as it is and an alert reads
// open > 0; summed over scopes or processes each series counts the circuits
// in its state. A single series coding the states as 0, 1 and 2 would need a
// legend to read, and its sums and averages mean nothing (the average of a
// closed and a half-open circuit would read as an open one).
func WithBreaker(name string, b *retry.Breaker) Option {
	return func(c *config) {
		if b != nil {
			c.gauges.breakers = append(c.gauges.breakers, namedBreaker{name, b})
		}
	}
}

// Values of retry.breaker.state, one per retry.BreakerState: the semantic
// conventions write enumerated values in snake_case.
const (
	CircuitClosed   = "closed"    // retry.BreakerClosed: attempts go through
	CircuitOpen     = "open"      // retry.BreakerOpen: attempts are refused
	CircuitHalfOpen = "half_open" // retry.BreakerHalfOpen: the next attempts are probes
)

// circuitStates are the states in retry.BreakerState's order.
var circuitStates = [...]string{retry.BreakerClosed: CircuitClosed, retry.BreakerOpen: CircuitOpen, retry.BreakerHalfOpen: CircuitHalfOpen}

// register makes the gauges and their callback; nil if there is nothing to
// observe.
func (g *gauges) register(m metric.Meter, t *scopes) metric.Registration {
	if len(g.strategies) == 0 && len(g.quotas) == 0 && len(g.budgets) == 0 && len(g.breakers) == 0 {
		return nil
	}
	quota, err := m.Int64ObservableGauge("retry.client.quota.available", metric.WithUnit("{token}"),
		metric.WithDescription("Tokens left in a retry quota: a retry takes its cost from it."))
	handle(err)
	budget, err := m.Int64ObservableGauge("retry.client.budget.available", metric.WithUnit("{retry}"),
		metric.WithDescription("Retries a retry budget allows now."))
	handle(err)
	rate, err := m.Float64ObservableGauge("retry.client.send_rate", metric.WithUnit("{attempt}/s"),
		metric.WithDescription("The send rate an adaptive strategy's limiter allows in a scope, while it is limiting."))
	handle(err)
	status, err := m.Int64ObservableUpDownCounter("retry.client.breaker.status", metric.WithUnit("1"),
		metric.WithDescription("The state of a circuit breaker in a scope: 1 for its state (retry.breaker.state), 0 for the others."))
	handle(err)
	reg, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		g.observe(o, t, quota, budget, rate)
		g.observeBreakers(o, t, status)
		return nil
	}, quota, budget, rate, status)
	handle(err)
	return reg
}

func (g *gauges) observe(o metric.Observer, t *scopes, quota, budget metric.Int64Observable, rate metric.Float64Observable) {
	for _, q := range g.quotas {
		o.ObserveInt64(quota, int64(q.q.Available()), metric.WithAttributes(keyQuota.String(q.name)))
	}
	for _, b := range g.budgets {
		o.ObserveInt64(budget, int64(b.b.Available()), metric.WithAttributes(keyBudget.String(b.name)))
	}
	if len(g.strategies) == 0 {
		return
	}
	for name, s := range t.all() {
		for _, st := range g.strategies {
			attrs := metric.WithAttributeSet(attribute.NewSet(s.attr, keyStrategy.String(st.name)))
			if sq, ok := st.s.(scopedQuota); ok {
				// math.MaxInt is "no quota" (an Adaptive without one).
				if n := sq.Available(name); n != math.MaxInt {
					o.ObserveInt64(quota, int64(n), attrs)
				}
			}
			if sr, ok := st.s.(sendRate); ok {
				if r, limiting := sr.Rate(name); limiting {
					o.ObserveFloat64(rate, r, attrs)
				}
			}
		}
	}
}

// observeBreakers observes each breaker's state in every scope seen: three
// series per scope and breaker, bounded as the scopes are.
func (g *gauges) observeBreakers(o metric.Observer, t *scopes, status metric.Int64Observable) {
	if len(g.breakers) == 0 {
		return
	}
	for name, s := range t.all() {
		for _, br := range g.breakers {
			st := br.b.State(name)
			for i, state := range circuitStates {
				v := int64(0)
				if retry.BreakerState(i) == st {
					v = 1
				}
				o.ObserveInt64(status, v, metric.WithAttributeSet(attribute.NewSet(
					s.attr, keyBreakerName.String(br.name), keyBreakerState.String(state))))
			}
		}
	}
}
