package callinfo

import (
	"context"
	"testing"
)

// sink records what it is told.
type sink struct {
	outer  Sink
	rpcs   []string
	hedges int
}

func (s *sink) RPC(method, target string) { s.rpcs = append(s.rpcs, method+" "+target) }
func (s *sink) Hedge()                    { s.hedges++ }
func (s *sink) Outer() Sink               { return s.outer }

// add adds a sink to ctx as an instrumentation does.
func add(ctx context.Context) (context.Context, *sink) {
	s := &sink{outer: From(ctx)}
	return With(ctx, s), s
}

// TestTellReachesEverySink: a send is told to the nearest sink and to every
// sink outside it, once each; a context without one tells nothing.
func TestTellReachesEverySink(t *testing.T) {
	if From(context.Background()) != nil {
		t.Fatal("a context without a sink has one")
	}
	TellRPC(From(context.Background()), "a.B/C", "dns:///x") // nothing to tell: must not panic
	ctx, outer := add(context.Background())
	ctx, inner := add(ctx)
	if From(ctx) != Sink(inner) || inner.Outer() != Sink(outer) || outer.Outer() != nil {
		t.Fatal("From does not give the nearest sink, or Outer the one before it")
	}
	TellRPC(From(ctx), "a.B/C", "dns:///x")
	TellHedge(From(ctx))
	for name, s := range map[string]*sink{"inner": inner, "outer": outer} {
		if len(s.rpcs) != 1 || s.rpcs[0] != "a.B/C dns:///x" || s.hedges != 1 {
			t.Errorf("%s sink told %q and %d hedges, want the call once and 1 hedge", name, s.rpcs, s.hedges)
		}
	}
}
