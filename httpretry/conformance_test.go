package httpretry

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/retrykit/retry/internal/retrytest/conformance"
)

// TestConformance runs the contract every integration keeps against the
// Transport: GETs to a loopback server. It holds what were
// TestCallerRetriesLeavesResponsesToTheCaller and
// TestApplicationLoopAroundATransportDoesNotMultiply (but their resets),
// TestZeroConfig504WithRetryAfterIsRetried,
// TestZeroConfig404sDoNotStopTheRetryOfA503,
// TestAllowedTimeoutIsRetriedWhereOthersAreNot and TestBreakerOutage.
func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Integration{Serve: serveScript, Virtual: true, Gaps: map[string]string{
		// A library loop that cannot retry (retry.No, or one attempt)
		// around a GET whose failed response the library turns into an
		// error of its own gives up ErrNotRetryable, an Unsafe
		// *retry.Error, so the application's loop does not retry the
		// failure the Transport left to it: a response carries no error
		// that classifies as the failure, as grpcretry's and forrst's do.
		"OneLayer/LibraryLoop": "the failure a Transport leaves is lost in a library loop that cannot retry",
	}})
}

// scriptServer is a loopback server answering as a conformance script says.
type scriptServer struct{ *server }

func serveScript(t *testing.T, script func(int) conformance.Answer) conformance.Server {
	return scriptServer{newServer(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		switch script(n) {
		case conformance.OK:
			io.WriteString(w, "ok")
		case conformance.Unavailable:
			http.Error(w, "down", http.StatusServiceUnavailable)
		case conformance.Timeout:
			http.Error(w, "gateway timeout", http.StatusGatewayTimeout)
		case conformance.AllowedTimeout:
			w.Header().Set("Retry-After", "0")
			http.Error(w, "gateway timeout", http.StatusGatewayTimeout)
		case conformance.ClientFault:
			http.Error(w, "no such item", http.StatusNotFound)
		default:
			http.Error(w, "unscripted", http.StatusTeapot)
		}
	})}
}

func (s scriptServer) Calls() int    { return len(s.Requests()) }
func (s scriptServer) Scope() string { return hostOf(s.server) }

// Client is a GET through a Transport over a base transport that keeps no
// idle connections, so that it may run in a synctest bubble.
func (s scriptServer) Client(t *testing.T, c conformance.Config) conformance.Call {
	base := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(base.CloseIdleConnections)
	tr := &Transport{Base: base, Strategy: c.Strategy, Independent: c.Independent, Breaker: c.Breaker}
	return func(ctx context.Context) conformance.Outcome {
		resp, err, rep := send(t, tr, ctx, http.MethodGet, s.URL, nil)
		out := conformance.Outcome{Err: err, Attempts: rep.Attempts, Reason: rep.Reason}
		if resp != nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			out.Answer = answerOf(resp.StatusCode, string(body))
			if err != nil { // RoundTrip returns a response or an error
				out.Answer = conformance.Other
			}
		}
		return out
	}
}

// answerOf reads a response of serveScript's as the answer it scripted.
func answerOf(status int, body string) conformance.Answer {
	switch {
	case status == http.StatusOK && body == "ok":
		return conformance.OK
	case status == http.StatusServiceUnavailable:
		return conformance.Unavailable
	case status == http.StatusGatewayTimeout:
		return conformance.Timeout
	case status == http.StatusNotFound:
		return conformance.ClientFault
	}
	return conformance.Other
}
