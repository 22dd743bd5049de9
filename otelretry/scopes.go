package otelretry

import (
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// OtherScope is the retry.scope attribute of every scope past the limit (see
// WithMaxScopes): a client that names a scope per host or per user cannot
// grow the metrics without bound.
const OtherScope = "_other"

// DefaultMaxScopes is how many scopes get attribute values of their own.
const DefaultMaxScopes = 100

// scope is what the instrumentation keeps for one scope: the attribute sets
// of its success path, made once, so that recording a success allocates
// nothing.
type scope struct {
	name  string
	attr  attribute.KeyValue
	own   bool                  // a scope of its own, not OtherScope: its gauges are observed
	okAdd []metric.AddOption    // attempts: scope, outcome=success
	okRec []metric.RecordOption // per-call histograms: scope, outcome=success

	// Refusals: scope, first_attempt; and give-ups of refused first
	// attempts: scope, reason=circuit_open. Made once, as a circuit that
	// is open refuses every call of its scope.
	refusedFirst, refusedRetry, openGiveUp []metric.AddOption
}

func newScope(name string, own bool) *scope {
	s := &scope{name: name, attr: keyScope.String(name), own: own}
	s.okAdd = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(s.attr, outcomeSuccess))}
	s.okRec = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(s.attr, outcomeSuccess))}
	s.refusedFirst = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(s.attr, keyFirstAttempt.Bool(true)))}
	s.refusedRetry = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(s.attr, keyFirstAttempt.Bool(false)))}
	s.openGiveUp = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(s.attr, keyReason.String(ReasonCircuitOpen)))}
	return s
}

// refusedAdd returns the attributes of a refusal: of the call's first
// attempt, or of a retry.
func (s *scope) refusedAdd(first bool) []metric.AddOption {
	if first {
		return s.refusedFirst
	}
	return s.refusedRetry
}

// scopes is a bounded table of scopes. Lookups read an immutable map through
// an atomic pointer: no lock and no allocation on the request path. A new
// scope copies the map under a lock, which happens at most max times.
type scopes struct {
	max   int
	m     atomic.Pointer[map[string]*scope]
	mu    sync.Mutex
	other *scope
}

func newScopes(max int) *scopes {
	t := &scopes{max: max, other: newScope(OtherScope, false)}
	m := map[string]*scope{}
	t.m.Store(&m)
	return t
}

// get returns name's scope, or the OtherScope once the table is full.
func (t *scopes) get(name string) *scope {
	if s, ok := (*t.m.Load())[name]; ok {
		return s
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.m.Load()
	if s, ok := old[name]; ok {
		return s
	}
	if len(old) >= t.max {
		return t.other
	}
	m := make(map[string]*scope, len(old)+1)
	for k, v := range old {
		m[k] = v
	}
	s := newScope(name, true)
	m[name] = s
	t.m.Store(&m)
	return s
}

// all returns the scopes seen so far, OtherScope excluded.
func (t *scopes) all() map[string]*scope { return *t.m.Load() }
