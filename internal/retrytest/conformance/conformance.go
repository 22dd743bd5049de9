// Package conformance is the contract every integration of retrykit keeps,
// written once: the tests that httpretry, grpcretry and forrst (and any
// integration after them) run against loopback servers of their own protocol
// through an adapter, an Integration.
//
// The contract, one test each:
//
//   - One layer: an application's retry.Do around a call through the
//     integration makes one attempt of the call per attempt of its own for an
//     answered failure, even when it returns an error of its own that says
//     nothing about retrying; the failure the integration leaves to it
//     crosses a library's loop that cannot retry; told Unmarked, or with an
//     independent integration, the layers multiply.
//   - Outer loop: inside a caller's retries, an answered failure gets one
//     attempt, which reports retry.ErrOuterLoop; an independent integration
//     retries as if alone.
//   - Allowed timeouts: the server's permission to retry a timeout is what
//     makes Adaptive retry it where every attempt times out, and what makes
//     the zero-config integration retry it at all.
//   - Client faults count as accepts: answers that blame the caller show a
//     server at work, so they leave the next server failure its retry and
//     keep a breaker's circuit closed.
//   - Breaker counting: the failures of a server open its circuit, an open
//     circuit refuses calls before any attempt, a failed probe opens it
//     again for twice as long, and successful probes close it.
package conformance

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/retrykit/retry"
)

// Answer is what a server says to one call, in the terms of the contract;
// an Integration says it in its own protocol.
type Answer int

const (
	None           Answer = iota // no answer: the call was refused, or failed before one
	OK                           // success
	Unavailable                  // a server failure any strategy retries: 503, UNAVAILABLE
	Timeout                      // the server's timeout, without its permission to retry: 504, DEADLINE_EXCEEDED
	AllowedTimeout               // a timeout the server allows a retry of at once: a Retry-After, pushback or guidance of 0
	ClientFault                  // the caller's fault: 404, NOT_FOUND
	Other                        // an answer the adapter does not recognise
)

var answerNames = [...]string{"no answer", "OK", "Unavailable", "Timeout", "AllowedTimeout", "ClientFault", "another answer"}

// String names the answer, for test messages.
func (a Answer) String() string {
	if a < 0 || int(a) >= len(answerNames) {
		return fmt.Sprintf("Answer(%d)", int(a))
	}
	return answerNames[a]
}

// Integration is the adapter the suite drives.
type Integration struct {
	// Serve starts a loopback server for the rest of the test whose n-th
	// call (from 1) gets script(n). The suite calls it outside any synctest
	// bubble.
	Serve func(t *testing.T, script func(n int) Answer) Server
	// Virtual runs the client side of every test (the servers stay
	// outside) in a synctest bubble, its clients made inside it, so that
	// the waits of the integration's strategies and of its protocol's
	// guidance pass in virtual time. An integration whose clients cannot
	// live in a bubble (gRPC's connections) runs them in real time.
	Virtual bool
	// Gaps names the tests (as "OneLayer/LibraryLoop") the integration is
	// known not to pass yet, each with the reason: they are skipped, and
	// say why, rather than left out.
	Gaps map[string]string
}

// Server is a loopback server of the integration's protocol.
type Server interface {
	// Calls is the number of calls, attempts included, the server has
	// seen.
	Calls() int
	// Scope is the scope of calls to the server: the circuit a breaker
	// keeps for it.
	Scope() string
	// Client returns a call of the server through the integration, set up
	// as c says. Every call the suite makes may be repeated: a GET, an
	// idempotent method, a call with an idempotency key.
	Client(t *testing.T, c Config) Call
}

// Config is how a client of the integration is set up.
type Config struct {
	Strategy    retry.Strategy // nil: the integration's own (zero configuration)
	Independent bool           // retry as if alone, whatever the caller's retries
	Breaker     *retry.Breaker // nil: none
}

// Call makes one call through the integration.
type Call func(ctx context.Context) Outcome

// Outcome is what one call came to.
type Outcome struct {
	Answer   Answer // the answer the call ended on; None when no attempt was answered
	Err      error  // the error the call returned (httpretry returns a failed response with none)
	Attempts int    // attempts the integration's loop made; -1 when it does not say (a success)
	Reason   error  // why the integration's loop stopped retrying; nil after a success
}

// appErr is the error an application makes of an outcome: the call's own
// error, or one that says only what the answer was.
func (o Outcome) appErr() error {
	switch {
	case o.Answer == OK:
		return nil
	case o.Err != nil:
		return o.Err
	}
	return fmt.Errorf("answered %v", o.Answer)
}

// Run runs the suite against the integration.
func Run(t *testing.T, in Integration) {
	t.Run("OneLayer", func(t *testing.T) { oneLayer(t, in) })
	t.Run("OuterLoop", func(t *testing.T) { outerLoop(t, in) })
	t.Run("AllowedTimeout", func(t *testing.T) { allowedTimeout(t, in) })
	t.Run("ClientFaults", func(t *testing.T) { clientFaults(t, in) })
	t.Run("Breaker", func(t *testing.T) { breaker(t, in) })
	t.Run("BreakerSharedWithTheCaller", func(t *testing.T) { breakerSharedWithTheCaller(t, in) })
}

// gap skips the running test if the integration is known not to pass it.
func (in Integration) gap(t *testing.T) {
	t.Helper()
	name := t.Name()
	if i := strings.Index(name, "/"); i >= 0 {
		name = name[i+1:] // the suite's own name for it
	}
	if why, ok := in.Gaps[name]; ok {
		t.Skip("a known gap: " + why)
	}
}

// inTime runs f in the integration's time: a synctest bubble if it is
// Virtual.
func (in Integration) inTime(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	if in.Virtual {
		synctest.Test(t, f)
		return
	}
	f(t)
}

// simple retries at once, n attempts in all.
func simple(n int) *retry.Simple {
	return &retry.Simple{MaxAttempts: n, Backoff: retry.Constant(0)}
}

// always is a script that answers every call with a.
func always(a Answer) func(int) Answer { return func(int) Answer { return a } }
