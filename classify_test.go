package retry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/retrykit/retry/internal/errchain"
)

// ctInfoErr is an error that classifies itself with a RetryInfo method.
type ctInfoErr struct {
	msg  string
	info Info
}

func (e *ctInfoErr) Error() string   { return e.msg }
func (e *ctInfoErr) RetryInfo() Info { return e.info }

// ctWrap wraps an error without building a message, so that very deep chains
// stay cheap to build.
type ctWrap struct{ err error }

func (w *ctWrap) Error() string { return "wrap" }
func (w *ctWrap) Unwrap() error { return w.err }

// ctValve is how many Unwrap calls the cyclic errors below allow before they
// break their own cycle. It keeps a Classify that does not bound its walk from
// hanging the test binary: such a Classify ends by the valve, and the test
// sees that the valve was reached.
const ctValve = 1_000_000

// ctCycle is an error whose Unwrap returns itself.
type ctCycle struct{ calls atomic.Int64 }

func (c *ctCycle) Error() string { return "cycle" }
func (c *ctCycle) Unwrap() error {
	if c.calls.Add(1) > ctValve {
		return nil
	}
	return c
}

// ctJoinCycle is a multi-error whose Unwrap lists itself twice.
type ctJoinCycle struct{ calls atomic.Int64 }

func (c *ctJoinCycle) Error() string { return "join cycle" }
func (c *ctJoinCycle) Unwrap() []error {
	if c.calls.Add(1) > ctValve {
		return nil
	}
	return []error{c, c}
}

func TestClassifyNilAndPlain(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"nil", nil},
		{"errors.New", errors.New("boom")},
		{"fmt.Errorf without %w", fmt.Errorf("boom %d", 1)},
		{"wrapped plain", fmt.Errorf("op: %w", errors.New("boom"))},
		{"join of plain", errors.Join(errors.New("a"), errors.New("b"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.err)
			if got != (Info{}) {
				t.Errorf("Classify(%v) = %+v, want the zero Info", tt.err, got)
			}
			if got.Retryable() {
				t.Errorf("Classify(%v).Retryable() = true, want false", tt.err)
			}
		})
	}
	if (Info{}).Retryable() {
		t.Error("the zero Info is Retryable")
	}
}

func TestClassifyRetryInfoMethod(t *testing.T) {
	throttled := Info{Safety: Safe, Throttle: true, RetryAfter: 3 * time.Second, Fault: FaultServer}
	leaf := &ctInfoErr{msg: "leaf", info: throttled}

	deep := error(leaf)
	for i := range 20 {
		deep = fmt.Errorf("level %d: %w", i, deep)
	}

	tests := []struct {
		name string
		err  error
		want Info
	}{
		{"direct", leaf, throttled},
		{"wrapped once", fmt.Errorf("op: %w", leaf), throttled},
		{"wrapped twice", fmt.Errorf("a: %w", fmt.Errorf("b: %w", leaf)), throttled},
		{"wrapped 20 levels", deep, throttled},
		{"custom wrapper", &ctWrap{&ctWrap{leaf}}, throttled},
		{"in a join", errors.Join(leaf), throttled},
		{"join, only one branch classified", errors.Join(errors.New("plain"), leaf, errors.New("plain 2")), throttled},
		{"join, classified branch wrapped", errors.Join(errors.New("plain"), fmt.Errorf("w: %w", leaf)), throttled},
		{"nested joins", errors.Join(errors.New("x"), errors.Join(errors.New("y"), errors.Join(fmt.Errorf("z: %w", leaf)))), throttled},
		{"wrapped join", fmt.Errorf("outer: %w", errors.Join(errors.New("x"), leaf)), throttled},
		{"multi %w", fmt.Errorf("%w and %w", errors.New("x"), leaf), throttled},
		{"join with nils", errors.Join(nil, leaf, nil), throttled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.err); got != tt.want {
				t.Errorf("Classify = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestClassifyOuterOverridesInner(t *testing.T) {
	base := errors.New("base")
	tests := []struct {
		name string
		err  error
		want Safety
	}{
		{"Permanent(Transient)", Permanent(Transient(base)), Unsafe},
		{"Transient(Permanent)", Transient(Permanent(base)), Safe},
		{"Permanent(wrapped Transient)", Permanent(fmt.Errorf("w: %w", Transient(base))), Unsafe},
		{"wrapped Transient(Permanent)", fmt.Errorf("w: %w", Transient(Permanent(base))), Safe},
		{"WithInfo(MaybeSafe) over Transient", WithInfo(Transient(base), Info{}), MaybeSafe},
		{"WithInfo(Safe) over Permanent", WithInfo(Permanent(base), Info{Safety: Safe}), Safe},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.err).Safety; got != tt.want {
				t.Errorf("Safety = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestClassifyJoinMerge(t *testing.T) {
	a, b, c := errors.New("a"), errors.New("b"), errors.New("c")
	server := func(e error) error { return WithInfo(e, Info{Safety: Safe, Fault: FaultServer}) }
	client := func(e error) error { return WithInfo(e, Info{Safety: Safe, Fault: FaultClient}) }
	tests := []struct {
		name string
		err  error
		want Info
	}{
		{"Transient + Permanent is Unsafe", errors.Join(Transient(a), Permanent(b)), Info{Safety: Unsafe}},
		{"Permanent + Transient is Unsafe", errors.Join(Permanent(a), Transient(b)), Info{Safety: Unsafe}},
		{"Unsafe in a nested join", errors.Join(Transient(a), errors.Join(b, fmt.Errorf("w: %w", Permanent(c)))), Info{Safety: Unsafe}},
		{"multi %w with Unsafe", fmt.Errorf("%w / %w", Transient(a), Permanent(b)), Info{Safety: Unsafe}},
		{"Throttle OR'd", errors.Join(Transient(a), Throttled(b)), Info{Safety: Safe, Throttle: true}},
		{"Throttle kept when Unsafe", errors.Join(Throttled(a), Permanent(b)), Info{Safety: Unsafe, Throttle: true}},
		{"Timeout OR'd", errors.Join(WithInfo(a, Info{Safety: Safe, Timeout: true}), Transient(b)), Info{Safety: Safe, Timeout: true}},
		{"Throttle and Timeout from different branches",
			errors.Join(Throttled(a), WithInfo(b, Info{Safety: Safe, Timeout: true})),
			Info{Safety: Safe, Throttle: true, Timeout: true}},
		{"RetryAfter is the max",
			errors.Join(RetryAfter(a, 2*time.Second), RetryAfter(b, 5*time.Second), RetryAfter(c, time.Second)),
			Info{Safety: Safe, RetryAfter: 5 * time.Second}},
		{"RetryAfter max with a hintless branch",
			errors.Join(Transient(a), RetryAfter(b, 7*time.Millisecond)),
			Info{Safety: Safe, RetryAfter: 7 * time.Millisecond}},
		{"client beats server", errors.Join(server(a), client(b)), Info{Safety: Safe, Fault: FaultClient}},
		{"client beats server, reversed", errors.Join(client(a), server(b)), Info{Safety: Safe, Fault: FaultClient}},
		{"client beats server, nested", errors.Join(server(a), errors.Join(server(b), client(c))), Info{Safety: Safe, Fault: FaultClient}},
		{"Safe + MaybeSafe is MaybeSafe (cautious)",
			errors.Join(Transient(a), WithInfo(b, Info{Fault: FaultServer})),
			Info{Safety: MaybeSafe, Fault: FaultServer}},
		{"unclassified branches ignored", errors.Join(a, RetryAfter(b, time.Second), c), Info{Safety: Safe, RetryAfter: time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.err); got != tt.want {
				t.Errorf("Classify = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestClassifyContextErrors(t *testing.T) {
	canceledCtx, cancel := context.WithCancel(context.Background())
	cancel()
	expiredCtx, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Hour))
	defer cancel2()

	callerGaveUp := Info{Safety: Unsafe, Fault: FaultClient}
	tests := []struct {
		name string
		err  error
		want Info
	}{
		{"Canceled", context.Canceled, callerGaveUp},
		{"DeadlineExceeded", context.DeadlineExceeded, callerGaveUp},
		{"wrapped Canceled", fmt.Errorf("op: %w", context.Canceled), callerGaveUp},
		{"wrapped DeadlineExceeded", fmt.Errorf("a: %w", fmt.Errorf("b: %w", context.DeadlineExceeded)), callerGaveUp},
		{"Canceled in a join", errors.Join(errors.New("x"), context.Canceled), callerGaveUp},
		{"real cancelled context", canceledCtx.Err(), callerGaveUp},
		{"real expired context", expiredCtx.Err(), callerGaveUp},
		// An explicit classification wins: the loop, not Classify, guards the
		// caller's own cancellation.
		{"Transient(Canceled)", Transient(context.Canceled), Info{Safety: Safe, Fault: FaultClient}},
		{"Transient(wrapped DeadlineExceeded)", Transient(fmt.Errorf("w: %w", context.DeadlineExceeded)), Info{Safety: Safe, Fault: FaultClient}},
		{"WithInfo(DeadlineExceeded)", WithInfo(context.DeadlineExceeded, Info{Safety: Safe, Timeout: true}), Info{Safety: Safe, Timeout: true}},
		{"wrapped Throttled(Canceled)", fmt.Errorf("w: %w", Throttled(context.Canceled)), Info{Safety: Safe, Throttle: true, Fault: FaultClient}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.err)
			if got != tt.want {
				t.Errorf("Classify(%v) = %+v, want %+v", tt.err, got, tt.want)
			}
			if want := tt.want.Safety == Safe; got.Retryable() != want {
				t.Errorf("Retryable() = %v, want %v", got.Retryable(), want)
			}
		})
	}
}

// ctListen opens a TCP listener on loopback.
func ctListen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	return ln
}

func TestClassifyNetTimeout(t *testing.T) {
	ln := ctListen(t)
	defer ln.Close()

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	// A deadline already in the past makes Read return at once: no sleeping.
	if err := conn.SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	_, readErr := conn.Read(make([]byte, 1))
	if readErr == nil {
		t.Fatal("Read with an expired deadline returned no error")
	}
	var ne net.Error
	if !errors.As(readErr, &ne) || !ne.Timeout() {
		t.Fatalf("Read error %v (%T) is not a net.Error timeout", readErr, readErr)
	}

	want := Info{Safety: MaybeSafe, Timeout: true, Fault: FaultServer}
	tests := []struct {
		name string
		err  error
		want Info
	}{
		{"bare", readErr, want},
		{"wrapped", fmt.Errorf("read response: %w", readErr), want},
		{"in a join", errors.Join(errors.New("x"), readErr), want},
		{"Permanent keeps Timeout", Permanent(readErr), Info{Safety: Unsafe, Timeout: true, Fault: FaultServer}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.err)
			if got != tt.want {
				t.Errorf("Classify(%v) = %+v, want %+v", tt.err, got, tt.want)
			}
			if wantR := tt.want.Safety != Unsafe; got.Retryable() != wantR {
				t.Errorf("Retryable() = %v, want %v", got.Retryable(), wantR)
			}
		})
	}
}

func TestClassifyDialRefused(t *testing.T) {
	var dialErr error
	// The freed port could in principle be taken by someone else between
	// Close and Dial; try a few fresh ports before giving up.
	for range 5 {
		ln := ctListen(t)
		addr := ln.Addr().String()
		ln.Close()
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
			continue
		}
		dialErr = err
		break
	}
	if dialErr == nil {
		t.Fatal("could not get a refused dial on loopback")
	}
	if !errors.Is(dialErr, syscall.ECONNREFUSED) {
		t.Logf("dial error is %v (not ECONNREFUSED); checking it anyway", dialErr)
	}
	for _, err := range []error{dialErr, fmt.Errorf("connect: %w", dialErr)} {
		got := Classify(err)
		if got.Safety != Safe {
			t.Errorf("Classify(%v).Safety = %v, want safe (the request never left)", err, got.Safety)
		}
		if got.Timeout {
			t.Errorf("Classify(%v).Timeout = true for a refused dial", err)
		}
		if !got.Retryable() {
			t.Errorf("Classify(%v) = %+v is not Retryable", err, got)
		}
	}
}

// TestClassifyCyclicChain: an error whose Unwrap returns itself must not hang
// Classify. The error breaks its own cycle after ctValve calls so that a
// failing Classify cannot hang the test binary; reaching the valve means
// Classify did not bound its walk.
func TestClassifyCyclicChain(t *testing.T) {
	t.Run("Unwrap() error", func(t *testing.T) {
		c := &ctCycle{}
		got := Classify(c)
		if n := c.calls.Load(); n >= ctValve {
			t.Errorf("Classify walked %d Unwrap calls of a cyclic chain (the test's safety valve stopped it); it must bound its walk", n)
		}
		if got != (Info{Safety: Unsafe}) { // cut short: never more permissive than unseen errors
			t.Errorf("Classify(cycle) = %+v, want Unsafe", got)
		}
	})
	t.Run("Unwrap() []error", func(t *testing.T) {
		c := &ctJoinCycle{}
		got := Classify(c)
		if n := c.calls.Load(); n >= ctValve {
			t.Errorf("Classify walked %d Unwrap calls of a cyclic join (the test's safety valve stopped it); it must bound its walk", n)
		}
		if got != (Info{Safety: Unsafe}) {
			t.Errorf("Classify(join cycle) = %+v, want Unsafe", got)
		}
	})
	t.Run("classified cycle", func(t *testing.T) {
		// An outer classification is found before the cycle is entered.
		c := &ctCycle{}
		if got := Classify(Transient(c)); got.Safety != Safe {
			t.Errorf("Classify(Transient(cycle)).Safety = %v, want safe", got.Safety)
		}
	})
}

// ctDAG is a multi-error node that lists the same child twice: a finite,
// acyclic tree of errors.Join(e, e) levels, whose number of paths doubles with
// every level. All nodes of one DAG share the Unwrap counter and the valve.
type ctDAG struct {
	child error
	calls *atomic.Int64
}

func (d *ctDAG) Error() string { return "dag" }
func (d *ctDAG) Unwrap() []error {
	if d.calls.Add(1) > ctValve {
		return nil
	}
	return []error{d.child, d.child}
}

// TestClassifyWideDAG: 40 levels of Join(e, e) hold 41 distinct errors but
// 2^40 paths. A walk bounded only by depth visits every path and never ends.
func TestClassifyWideDAG(t *testing.T) {
	var calls atomic.Int64
	err := error(errors.New("leaf"))
	for range 40 {
		err = &ctDAG{child: err, calls: &calls}
	}
	got := Classify(err)
	if n := calls.Load(); n >= ctValve {
		t.Errorf("Classify made %d Unwrap calls on a 41-node DAG (the test's safety valve stopped it); it must bound the nodes it visits, not only the depth", n)
	}
	if got != (Info{Safety: Unsafe}) { // 2^40 paths: the walk is cut short
		t.Errorf("Classify(DAG of plain errors) = %+v, want Unsafe", got)
	}
}

func TestClassifyDeepChain(t *testing.T) {
	const depth = 10_000
	leafInfo := Info{Safety: Safe, Throttle: true}
	tests := []struct {
		name  string
		build func(error) error
	}{
		{"Unwrap() error", func(e error) error { return &ctWrap{e} }},
		{"nested joins", func(e error) error { return errors.Join(e) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, leaf := range []error{errors.New("plain"), &ctInfoErr{"leaf", leafInfo}} {
				err := leaf
				for range depth {
					err = tt.build(err)
				}
				got := Classify(err) // must return, and not panic
				// Either the walk reaches the leaf or it is cut short: nothing else.
				if got != (Info{Safety: Unsafe}) && got != Classify(leaf) {
					t.Errorf("Classify(%d-deep chain of %v) = %+v, want %+v or Unsafe", depth, leaf, got, Classify(leaf))
				}
			}
		})
	}
	// A moderately deep chain is walked to the end.
	err := error(&ctInfoErr{"leaf", leafInfo})
	for range 50 {
		err = &ctWrap{err}
	}
	if got := Classify(err); got != leafInfo {
		t.Errorf("Classify(50-deep chain) = %+v, want %+v", got, leafInfo)
	}
}

func TestInfoRetryable(t *testing.T) {
	tests := []struct {
		safety Safety
		fault  Fault
		want   bool
	}{
		{MaybeSafe, FaultUnknown, false},
		{MaybeSafe, FaultClient, false},
		{MaybeSafe, FaultServer, true},
		{MaybeSafe, Fault(9), false},
		{Safe, FaultUnknown, true},
		{Safe, FaultClient, true},
		{Safe, FaultServer, true},
		{Safe, Fault(9), true},
		{Unsafe, FaultUnknown, false},
		{Unsafe, FaultClient, false},
		{Unsafe, FaultServer, false},
		{Unsafe, Fault(9), false},
		{Safety(9), FaultUnknown, false},
		{Safety(9), FaultServer, false},
	}
	for _, tt := range tests {
		for _, extras := range []Info{{}, {Throttle: true, Timeout: true, RetryAfter: time.Second}} {
			info := extras
			info.Safety, info.Fault = tt.safety, tt.fault
			t.Run(fmt.Sprintf("%v/%v/throttle=%v", tt.safety, tt.fault, info.Throttle), func(t *testing.T) {
				if got := info.Retryable(); got != tt.want {
					t.Errorf("%+v.Retryable() = %v, want %v", info, got, tt.want)
				}
			})
		}
	}
}

func TestSafetyString(t *testing.T) {
	tests := []struct {
		s    Safety
		want string
	}{
		{MaybeSafe, "maybe-safe"},
		{Safe, "safe"},
		{Unsafe, "unsafe"},
		{Safety(3), "Safety(3)"},
		{Safety(9), "Safety(9)"},
		{Safety(255), "Safety(255)"},
	}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("Safety(%d).String() = %q, want %q", uint8(tt.s), got, tt.want)
		}
	}
}

func TestFaultString(t *testing.T) {
	tests := []struct {
		f    Fault
		want string
	}{
		{FaultUnknown, "unknown"},
		{FaultClient, "client"},
		{FaultServer, "server"},
		{Fault(3), "Fault(3)"},
		{Fault(9), "Fault(9)"},
		{Fault(255), "Fault(255)"},
	}
	for _, tt := range tests {
		if got := tt.f.String(); got != tt.want {
			t.Errorf("Fault(%d).String() = %q, want %q", uint8(tt.f), got, tt.want)
		}
	}
}

// TestClassifySelfWrappingError: an *Error whose Err is itself must not make
// Classify recurse without bound.
func TestClassifySelfWrappingError(t *testing.T) {
	e := &Error{Reason: ErrMaxAttempts}
	e.Err = e
	if got := Classify(e); got.Safety != Unsafe {
		t.Fatalf("Classify = %+v, want Unsafe", got)
	}
	if got := Classify(errors.Join(errBoom, e)); got.Safety != Unsafe { // Join does not format until asked
		t.Fatalf("wrapped: Classify = %+v, want Unsafe", got)
	}
}

// A walk cut short by the visit budget has not seen the whole tree, and what
// it missed may be a Permanent mark: its answer must never be retryable.
func TestClassifyCutShortIsNeverRetryable(t *testing.T) {
	permanent := Permanent(errors.New("404"))
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	wide := make([]error, 5000)
	for i := range wide {
		wide[i] = errTransient
	}
	wide[len(wide)-1] = permanent
	deep := permanent
	for range 300 {
		deep = &ctWrap{deep}
	}
	deepUnderDial := error(&net.OpError{Op: "dial", Net: "tcp", Err: deep}) // the dial rule would say Safe
	cases := map[string]error{
		"join of 5000, last Permanent":   errors.Join(wide...),
		"that join, wrapped with %w":     fmt.Errorf("call: %w", errors.Join(wide...)),
		"300 deep, Permanent at the end": deep,
		"dial error over that chain":     deepUnderDial,
		"join of a dial error and that":  errors.Join(dial, deep),
	}
	for name, err := range cases {
		got := Classify(err)
		if got.Retryable() || got.Safety != Unsafe {
			t.Errorf("%s: Classify = %+v, want Unsafe (not retryable)", name, got)
		}
		s := NewStandard(StandardOptions{Backoff: Constant(0)})
		calls := 0
		_ = Do(context.Background(), s, func(context.Context) error { calls++; return err })
		if calls != 1 {
			t.Errorf("%s: Do made %d attempts, want 1", name, calls)
		}
	}
	// What the walk saw is kept: a throttle before the cut still shows.
	wide[0] = Throttled(errBoom)
	if got := Classify(errors.Join(wide...)); !got.Throttle || got.Safety != Unsafe {
		t.Errorf("throttle then cut: Classify = %+v, want Unsafe with Throttle", got)
	}
	// A complete walk is not affected: a tree of exactly the budget is walked to the end.
	exact := make([]error, errchain.Limit-1)
	for i := range exact {
		exact[i] = errTransient
	}
	if got := Classify(errors.Join(exact...)); got.Safety != Safe {
		t.Errorf("join of %d transient errors: Classify = %+v, want Safe", len(exact), got)
	}
}

// TestClassifyMergesAllowed: a join is allowed only if every branch was.
func TestClassifyMergesAllowed(t *testing.T) {
	allowed := WithInfo(errors.New("a"), Info{Safety: Safe, Fault: FaultServer, Allowed: true})
	plain := WithInfo(errors.New("b"), Info{Safety: Safe, Fault: FaultServer})
	if !Classify(errors.Join(allowed, allowed)).Allowed {
		t.Fatal("two allowed branches: not allowed")
	}
	if Classify(errors.Join(allowed, plain)).Allowed {
		t.Fatal("one branch without the server's permission: allowed")
	}
}
