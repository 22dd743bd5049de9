package forrst_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/forrst"
	"github.com/retrykit/retry/internal/retrytest/conformance"
)

// TestConformance runs the contract every integration keeps against the
// Client: calls of a hostile server's scripted documents. It holds what
// were the caller's-retries half of TestForrstLayersDoNotMultiply,
// TestZeroConfigRetriesAnAllowedDeadlineExceeded,
// TestZeroConfigClientErrorsDoNotStopTheRetryOfAServerFailure,
// TestAllowedTimeoutIsRetriedWhereOthersAreNot and TestClientBreakerOutage.
func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Integration{Serve: serveScript, Virtual: true})
}

// scriptServer answers each call with the document its script says.
type scriptServer struct {
	*httptest.Server
	calls *atomic.Int32
}

func serveScript(t *testing.T, script func(int) conformance.Answer) conformance.Server {
	fail := func(w http.ResponseWriter, status int, code, data string) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, failDoc(code, data))
	}
	srv, n := hostile(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		switch script(n) {
		case conformance.OK:
			_, _ = io.WriteString(w, `{"protocol":`+protocolJSON+`,"id":"req_x","result":{"ok":true}}`)
		case conformance.Unavailable:
			fail(w, 503, "UNAVAILABLE", "")
		case conformance.Timeout:
			fail(w, 504, "DEADLINE_EXCEEDED", "")
		case conformance.AllowedTimeout:
			fail(w, 504, "DEADLINE_EXCEEDED", `{"allowed":true,"strategy":"immediate"}`)
		case conformance.ClientFault:
			fail(w, 404, "NOT_FOUND", "")
		default:
			fail(w, 418, "UNSCRIPTED", "")
		}
	})
	return scriptServer{srv, n}
}

func (s scriptServer) Calls() int    { return int(s.calls.Load()) }
func (s scriptServer) Scope() string { return s.URL }

// Client is a call through a Client over an HTTP client that keeps no idle
// connections, so that it may run in a synctest bubble.
func (s scriptServer) Client(t *testing.T, c conformance.Config) conformance.Call {
	base := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(base.CloseIdleConnections)
	cl := &forrst.Client{URL: s.URL, HTTPClient: &http.Client{Transport: base},
		Strategy: c.Strategy, Independent: c.Independent, Breaker: c.Breaker}
	return func(ctx context.Context) conformance.Outcome {
		var result struct{ OK bool }
		err := cl.Call(ctx, "f", nil, &result)
		out := conformance.Outcome{Err: err, Attempts: -1}
		var re *retry.Error
		if errors.As(err, &re) {
			out.Attempts, out.Reason = re.Attempts, re.Reason
		}
		var ce *forrst.CallError
		switch {
		case err == nil && result.OK:
			out.Answer = conformance.OK
		case !errors.As(err, &ce):
			out.Answer = conformance.None
		default:
			out.Answer = answerOf(err, ce)
		}
		return out
	}
}

// answerOf reads a failed call's *CallError as the answer scripted: its code
// and HTTP status as serveScript sent them, the code reachable as a
// *forrst.Error, the error a *retry.Error.
func answerOf(err error, ce *forrst.CallError) conformance.Answer {
	var fe *forrst.Error
	var re *retry.Error
	if !errors.As(err, &fe) || fe.Code != ce.Err.Code || !errors.As(err, &re) {
		return conformance.Other
	}
	for _, a := range []struct {
		code   forrst.Code
		status int
		answer conformance.Answer
	}{
		{forrst.CodeUnavailable, 503, conformance.Unavailable},
		{forrst.CodeDeadlineExceeded, 504, conformance.Timeout},
		{forrst.CodeNotFound, 404, conformance.ClientFault},
	} {
		if ce.Err.Code == a.code && ce.StatusCode == a.status {
			return a.answer
		}
	}
	return conformance.Other
}
