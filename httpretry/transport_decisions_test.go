package httpretry

// Tests of the Transport's decisions, against real servers on loopback. They
// began as a mutation-testing review's tests against a scripted base
// transport; here statuses and headers come from httptest handlers, request
// bodies are checked on the server, read failures are real resets, refused
// dials go to a closed port, and certificate and name failures come from a
// real TLS handshake and a real DNS answer. The base is a real http.Transport,
// at most wrapped by observed to count what it returns. Only two tests keep a
// scripted step, each saying why a server cannot produce its condition.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/internal/retrytest"
)

// untrustedTLSServer is a loopback TLS server counting the connections it
// accepts; clients configured by untrustingClientTLS do not trust it.
func untrustedTLSServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshakes are the point
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// untrustingClientTLS trusts no certificate at all: every handshake fails
// verification with a real x509.UnknownAuthorityError.
func untrustingClientTLS() *tls.Config { return &tls.Config{RootCAs: x509.NewCertPool()} }

// nxdomainResolver returns a resolver whose only name server is a DNS server
// on loopback that answers every query with NXDOMAIN.
func nxdomainResolver(t *testing.T) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, addr, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q := buf[:n]
			if len(q) < 12 || binary.BigEndian.Uint16(q[4:]) != 1 {
				continue
			}
			// The question: a name (labels up to a zero byte), type and class.
			end := 12
			for end < len(q) && q[end] != 0 {
				end += 1 + int(q[end])
			}
			end += 1 + 4
			if end > len(q) {
				continue
			}
			resp := append([]byte(nil), q[:end]...)
			resp[2] = 0x80 | q[2]&0x79 // a response; opcode and RD as asked
			resp[3] = 0x80 | 3         // recursion available; NXDOMAIN
			binary.BigEndian.PutUint16(resp[6:], 0)
			binary.BigEndian.PutUint16(resp[8:], 0)
			binary.BigEndian.PutUint16(resp[10:], 0)
			pc.WriteTo(resp, addr)
		}
	}()
	var d net.Dialer
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return d.DialContext(ctx, "udp", pc.LocalAddr().String())
	}}
}

// M02, M03: every retried response is closed before the wait, also when the
// caller gives up during the wait.
func TestEveryRetriedResponseIsClosedEvenWhenTheWaitIsCancelled(t *testing.T) {
	srv := newServer(t, answer([]int{503}, []string{"Retry-After", "1"}, []string{"Retry-After", "10"}))
	virtual(t, func(t *testing.T, base *http.Transport) {
		obs := &observed{base: base}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(5*time.Second, cancel)
		start := time.Now()
		resp, err, _ := send(t, &Transport{Base: obs, Strategy: noWait()}, ctx, "GET", srv.URL, nil)
		discard(resp)
		if !errors.Is(err, context.Canceled) || len(srv.Requests()) != 2 || time.Since(start) != 5*time.Second {
			t.Fatalf("err %v after %d requests and %v", err, len(srv.Requests()), time.Since(start))
		}
		bodies := obs.responses()
		if len(bodies) != 2 {
			t.Fatalf("%d responses, want 2", len(bodies))
		}
		for i, b := range bodies {
			// At least once: drain closes a body twice when its time runs
			// out mid-read, which net/http's bodies allow.
			if _, closes := b.counts(); closes == 0 {
				t.Fatalf("response %d was not closed", i+1)
			}
		}
	})
}

// M06: Retry-After is not obeyed on a 500 (not one of RetryAfterStatuses),
// nor does it make a 404 a failure.
func TestRetryAfterIsObeyedOnlyOnItsStatuses(t *testing.T) {
	on500 := newServer(t, answer([]int{500, 200}, []string{"Retry-After", "2"}))
	on404 := newServer(t, answer([]int{404, 200}, []string{"Retry-After", "0"}))
	virtual(t, func(t *testing.T, base *http.Transport) {
		tr := &Transport{Base: base, Strategy: noWait()}
		start := time.Now()
		resp, err, _ := send(t, tr, context.Background(), "GET", on500.URL, nil)
		discard(resp)
		if err != nil || resp.StatusCode != 200 || len(on500.Requests()) != 2 || time.Since(start) != 0 {
			t.Fatalf("500: %v after %v and %d requests; want 200 at once", err, time.Since(start), len(on500.Requests()))
		}
		resp, err, _ = send(t, tr, context.Background(), "GET", on404.URL, nil)
		discard(resp)
		if err != nil || resp.StatusCode != 404 || len(on404.Requests()) != 1 {
			t.Fatalf("404 with Retry-After: %v, %d requests; want the 404 once", err, len(on404.Requests()))
		}
	})
}

// M07: the longer of Retry-After and RateLimit governs (hints are
// monotonic; TestLongerOfRetryAfterAndRateLimitGoverns has both orders).
func TestLongerOfRetryAfterAndRateLimitIsTheWait(t *testing.T) {
	srv := newServer(t, answer([]int{429, 200}, []string{"Retry-After", "1", "RateLimit", `"d";r=0;t=3`}))
	virtual(t, func(t *testing.T, base *http.Transport) {
		start := time.Now()
		resp, err, _ := send(t, &Transport{Base: base, Strategy: noWait()}, context.Background(), "GET", srv.URL, nil)
		discard(resp)
		if err != nil || resp.StatusCode != 200 || time.Since(start) != 3*time.Second {
			t.Fatalf("got %v after %v, want 200 after 3s", err, time.Since(start))
		}
	})
}

// M08, M09: Transport.MaxRetryAfter binds even when the strategy's limit is
// longer; a wait equal to it is obeyed.
func TestTransportMaxRetryAfterBindsBelowTheStrategys(t *testing.T) {
	over := newServer(t, answer([]int{503, 200}, []string{"Retry-After", "20"}))
	equal := newServer(t, answer([]int{503, 200}, []string{"Retry-After", "10"}))
	virtual(t, func(t *testing.T, base *http.Transport) {
		tr := &Transport{Base: base, Strategy: noWait(), MaxRetryAfter: 10 * time.Second}
		start := time.Now()
		resp, err, rep := send(t, tr, context.Background(), "GET", over.URL, nil)
		discard(resp)
		var rae *retry.RetryAfterError
		if err != nil || resp.StatusCode != 503 || len(over.Requests()) != 1 || time.Since(start) != 0 ||
			!errors.As(rep.Reason, &rae) || rae.RetryAfter != 20*time.Second || rae.Max != 10*time.Second {
			t.Fatalf("20s > 10s: err %v, %d requests, reason %v", err, len(over.Requests()), rep.Reason)
		}
		start = time.Now()
		resp, err, _ = send(t, tr, context.Background(), "GET", equal.URL, nil)
		discard(resp)
		if err != nil || resp.StatusCode != 200 || time.Since(start) != 10*time.Second {
			t.Fatalf("10s == limit: err %v after %v, want 200 after 10s", err, time.Since(start))
		}
	})
}

// M11: a wait that would end exactly at the deadline is not started; the 503
// comes back.
func TestWaitEndingExactlyAtTheDeadlineIsNotStarted(t *testing.T) {
	srv := newServer(t, answer([]int{503, 200}, []string{"Retry-After", "2"}))
	virtual(t, func(t *testing.T, base *http.Transport) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		start := time.Now()
		resp, err, rep := send(t, &Transport{Base: base, Strategy: noWait()}, ctx, "GET", srv.URL, nil)
		discard(resp)
		if err != nil || resp.StatusCode != 503 || len(srv.Requests()) != 1 || time.Since(start) != 0 ||
			!errors.Is(rep.Reason, retry.ErrDeadline) {
			t.Fatalf("err %v, %d requests after %v, reason %v", err, len(srv.Requests()), time.Since(start), rep.Reason)
		}
	})
}

// M16: the guard keeps an unread body open across a refused dial that closed
// it, sends it whole on the retry, and closes it once in the end.
func TestGuardKeepsAnUnreadBodyOpenAcrossARefusedDial(t *testing.T) {
	srv := newServer(t, failFirst(0, 0))
	base := refusedOnce(t, 1)
	defer base.CloseIdleConnections()
	obs := &observed{base: base}
	body := newCountingBody("payload") // no GetBody: only the guard can replay it
	resp, err, rep := send(t, &Transport{Base: obs, Strategy: noWait()}, context.Background(), "POST", srv.URL, body)
	if err != nil {
		t.Fatalf("err %v, report %+v", err, rep)
	}
	discard(resp)
	reqs := srv.Requests()
	if resp.StatusCode != 200 || len(obs.calls()) != 2 || len(reqs) != 1 || reqs[0].Body != "payload" {
		t.Fatalf("got %d after %d attempts; server saw %+v", resp.StatusCode, len(obs.calls()), reqs)
	}
	if _, closes := body.counts(); closes != 1 {
		t.Fatalf("body closed %d times, want 1", closes)
	}
}

// M17: an unreplayable body is not sent again after a read failure, even
// when it was never read. The request expects 100-continue and the server
// resets the connection without asking for the body, so the transport fails
// reading the response with the body untouched.
func TestUnreadBodyIsNotResentAfterAReadFailure(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) > 1 {
			io.WriteString(w, "ok")
			return
		}
		conn, _, err := w.(http.Hijacker).Hijack() // before reading the body: no 100 Continue
		if err != nil {
			t.Error(err)
			return
		}
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
	}))
	defer srv.Close()
	base := &http.Transport{ExpectContinueTimeout: time.Hour}
	defer base.CloseIdleConnections()
	body := newCountingBody("x")
	var rep Report
	req, _ := http.NewRequestWithContext(WithReport(context.Background(), &rep), "PUT", srv.URL, body)
	req.ContentLength = 1
	req.Header.Set("Expect", "100-continue")
	resp, err := (&Transport{Base: base, Strategy: noWait()}).RoundTrip(req)
	discard(resp)
	if read, _ := body.counts(); read != 0 {
		t.Fatalf("the transport read %d bytes of the body; the test needs it unread", read)
	}
	if err == nil || hits.Load() != 1 || rep.Attempts != 1 || !errors.Is(rep.Reason, errBodyConsumed) {
		t.Fatalf("err %v, %d requests, report %+v", err, hits.Load(), rep)
	}
}

// M18, M55: a guarded body that was partly read is not sent again, even
// after a failure to connect.
func TestPartlyReadBodyIsNotResentAfterARefusedDial(t *testing.T) {
	srv := newServer(t, failFirst(0, 0))
	realBase := refusedOnce(t, 1)
	defer realBase.CloseIdleConnections()
	var calls atomic.Int32
	// Scripted step: http.Transport dials before it reads a byte of the body,
	// so no server can make a dial fail after part of the body was read. The
	// base reads 3 bytes, then a real transport makes the real refused dial.
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if calls.Add(1) == 1 {
			if n, err := r.Body.Read(make([]byte, 3)); n != 3 || err != nil {
				return nil, fmt.Errorf("reading 3 bytes: %d, %v", n, err)
			}
		}
		return realBase.RoundTrip(r)
	})
	resp, err, rep := send(t, &Transport{Base: base, Strategy: noWait()}, context.Background(), "POST", srv.URL,
		io.NopCloser(strings.NewReader("payload")))
	discard(resp)
	var oe *net.OpError
	if err == nil || !errors.As(err, &oe) || oe.Op != "dial" {
		t.Fatalf("err %v, want the refused dial", err)
	}
	if calls.Load() != 1 || len(srv.Requests()) != 0 || !errors.Is(rep.Reason, errBodyConsumed) {
		t.Fatalf("%d attempts, %d requests, reason %v", calls.Load(), len(srv.Requests()), rep.Reason)
	}
}

// M21: Failure.Attempt numbers the attempts from 1.
func TestLimiterSeesFailureAttemptNumbersFromOne(t *testing.T) {
	srv := newServer(t, failFirst(2, 503))
	var got []int
	tr := &Transport{Strategy: noWait(), Limiter: LimiterFunc(func(fs []Failure, _ *http.Request) bool {
		got = append(got, fs[len(fs)-1].Attempt)
		return true
	})}
	resp, err, _ := send(t, tr, context.Background(), "GET", srv.URL, nil)
	discard(resp)
	if err != nil || resp.StatusCode != 200 || len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("err %v; the limiter saw attempts %v, want [1 2]", err, got)
	}
}

// M22: a retry the Limiter refuses costs no quota.
func TestRetryRefusedByTheLimiterCostsNoQuota(t *testing.T) {
	srv := newServer(t, failFirst(100, 503))
	s := retry.NewStandard(retry.StandardOptions{})
	resp, _, rep := send(t, &Transport{Strategy: s, Limiter: MaxErrors(0)}, context.Background(), "GET", srv.URL, nil)
	discard(resp)
	if !errors.Is(rep.Reason, ErrLimited) || len(srv.Requests()) != 1 {
		t.Fatalf("%d requests, reason %v", len(srv.Requests()), rep.Reason)
	}
	if n := s.Available(hostOf(srv)); n != 500 {
		t.Fatalf("quota %d, want 500", n)
	}
}

// M24: Retries with the Transport's own strategy means Retries+1 attempts.
func TestRetriesSetsTheOwnedStrategysAttempts(t *testing.T) {
	srv := newServer(t, failFirst(100, 503))
	virtual(t, func(t *testing.T, base *http.Transport) {
		resp, err, _ := send(t, &Transport{Base: base, Retries: 1}, context.Background(), "GET", srv.URL, nil)
		discard(resp)
		if err != nil || resp.StatusCode != 503 || len(srv.Requests()) != 2 {
			t.Fatalf("err %v, %d requests, want the 503 after 2", err, len(srv.Requests()))
		}
	})
}

// M25: a 5xx that comes back is not a success for the quota: the retry's
// cost (14) is not refunded.
func TestReturned5xxIsNotASuccessForTheQuota(t *testing.T) {
	srv := newServer(t, answer([]int{503, 501}))
	s := retry.NewStandard(retry.StandardOptions{Backoff: retry.Constant(0)})
	resp, err, _ := send(t, &Transport{Strategy: s}, context.Background(), "GET", srv.URL, nil)
	discard(resp)
	if err != nil || resp.StatusCode != 501 || len(srv.Requests()) != 2 {
		t.Fatalf("err %v, %d requests", err, len(srv.Requests()))
	}
	if n := s.Available(hostOf(srv)); n != 500-14 {
		t.Fatalf("quota %d, want 486", n)
	}
}

// M26, M53: every attempt's context is cancelled: a failed attempt's at once,
// a successful one's when its body is closed.
func TestAttemptContextsAreCancelled(t *testing.T) {
	srv := resetServer(t, 1)
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	obs := &observed{base: base}
	resp, err, _ := send(t, &Transport{Base: obs, Strategy: noWait(), AttemptTimeout: time.Hour}, context.Background(), "GET", srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	calls := obs.calls()
	if resp.StatusCode != 200 || len(calls) != 2 {
		t.Fatalf("got %d after %d attempts", resp.StatusCode, len(calls))
	}
	if calls[0].Context().Err() == nil {
		t.Fatal("the failed attempt's context was not cancelled")
	}
	if calls[1].Context().Err() != nil {
		t.Fatal("the attempt's context was cancelled before its body was read")
	}
	discard(resp)
	if calls[1].Context().Err() == nil {
		t.Fatal("the attempt's context was not cancelled when its body was closed")
	}
}

// M27: the caller's cancellation during an attempt is the reason, not
// ErrNotRetryable.
func TestCallerCancellationDuringAnAttemptIsTheReason(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		cancel() // the caller gives up while the server works on the request
		select {
		case <-r.Context().Done(): // the client hung up
		case <-time.After(10 * time.Second):
		}
		http.Error(w, "too late", 503)
	})
	resp, err, rep := send(t, &Transport{Strategy: noWait()}, ctx, "GET", srv.URL, nil)
	discard(resp)
	if !errors.Is(err, context.Canceled) || !errors.Is(rep.Reason, context.Canceled) || errors.Is(rep.Reason, retry.ErrNotRetryable) {
		t.Fatalf("err %v, reason %v", err, rep.Reason)
	}
	if rep.Attempts != 1 || len(srv.Requests()) != 1 {
		t.Fatalf("%d attempts, %d requests", rep.Attempts, len(srv.Requests()))
	}
}

// M30, M31: transport errors retrying cannot fix are not retried: an
// untrusted certificate (also a proxy's, wrapped in a proxyconnect error) and
// a name that does not exist. (A malformed response, M29, is a read failure:
// see TestMalformedResponseIsARetriedReadFailure.)
func TestPermanentTransportErrorsAreNotRetried(t *testing.T) {
	tlsSrv, tlsConns := untrustedTLSServer(t)
	proxy, proxyConns := untrustedTLSServer(t)
	proxyURL, _ := url.Parse(proxy.URL)
	dialer := &net.Dialer{Resolver: nxdomainResolver(t)}

	for _, c := range []struct {
		name  string
		base  *http.Transport
		url   string
		check func(error) bool // the error is the one meant
		conns func() int       // connections the server saw, or nil
	}{
		{"untrusted certificate", &http.Transport{TLSClientConfig: untrustingClientTLS()}, tlsSrv.URL,
			func(err error) bool { var ua x509.UnknownAuthorityError; return errors.As(err, &ua) },
			func() int { return int(tlsConns.Load()) }},
		{"untrusted proxy certificate", &http.Transport{Proxy: http.ProxyURL(proxyURL), TLSClientConfig: untrustingClientTLS()},
			"http://origin.test/",
			func(err error) bool {
				var oe *net.OpError
				var cve *tls.CertificateVerificationError
				return errors.As(err, &oe) && oe.Op == "proxyconnect" && errors.As(err, &cve)
			},
			func() int { return int(proxyConns.Load()) }},
		{"no such host", &http.Transport{DialContext: dialer.DialContext}, "http://nohost.invalid./",
			func(err error) bool {
				var oe *net.OpError
				var de *net.DNSError
				return errors.As(err, &oe) && oe.Op == "dial" && errors.As(err, &de) && de.IsNotFound
			},
			nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer c.base.CloseIdleConnections()
			obs := &observed{base: c.base}
			resp, err, rep := send(t, &Transport{Base: obs, Strategy: noWait()}, context.Background(), "GET", c.url, nil)
			discard(resp)
			if err == nil || !c.check(err) {
				t.Fatalf("err %v, not the error the case is about", err)
			}
			if len(obs.calls()) != 1 || rep.Attempts != 1 || !errors.Is(rep.Reason, retry.ErrNotRetryable) || !errors.Is(err, retry.ErrNotRetryable) {
				t.Fatalf("%d attempts, report %+v", len(obs.calls()), rep)
			}
			if c.conns != nil && c.conns() != 1 {
				t.Fatalf("the server saw %d connections or requests, want 1", c.conns())
			}
		})
	}
}

// M47, M48, M50, M71, M72, M73: Transport.Classify of real outcomes.
func TestClassifyRealOutcomes(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	statuses := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/"))
		http.Error(w, "status", code)
	})
	resets := resetServer(t, 1<<30)
	stalled := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	base := &http.Transport{ResponseHeaderTimeout: 50 * time.Millisecond} // real time: a stalled socket cannot be virtual
	defer base.CloseIdleConnections()
	do := func(url string) (*http.Response, error) {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		resp, err := base.RoundTrip(req)
		if resp != nil {
			discard(resp)
		}
		return resp, err
	}
	status := func(code int) *http.Response {
		t.Helper()
		resp, err := do(statuses.URL + "/" + strconv.Itoa(code))
		if err != nil || resp.StatusCode != code {
			t.Fatalf("getting a %d: %v", code, err)
		}
		return resp
	}
	failure := func(url string) error {
		t.Helper()
		if _, err := do(url); err != nil {
			return err
		}
		t.Fatalf("%s: no transport error", url)
		return nil
	}
	reset, refused := failure(resets.URL), failure("http://"+retrytest.DeadAddr(t))
	timeout := failure(stalled.URL)

	tr := &Transport{}
	if i, ok := tr.Classify(nil, reset, true); !ok || i.Safety != retry.Safe {
		t.Fatalf("idempotent reset (%v): %+v", reset, i)
	}
	if i, _ := tr.Classify(nil, reset, false); i.Safety != retry.Unsafe {
		t.Fatalf("non-idempotent reset: %+v", i)
	}
	if i, ok := tr.Classify(nil, refused, false); !ok || i.Safety != retry.Safe {
		t.Fatalf("refused (%v): %+v", refused, i)
	}
	if i, ok := tr.Classify(status(503), nil, false); !ok || i.Safety != retry.Unsafe {
		t.Fatalf("non-idempotent 503: %+v", i)
	}
	if i, _ := tr.Classify(status(429), nil, true); !i.Throttle || i.Fault != retry.FaultClient || i.Safety != retry.Safe {
		t.Fatalf("429: %+v", i)
	}
	if i, _ := tr.Classify(status(504), nil, true); !i.Timeout || i.Fault != retry.FaultServer {
		t.Fatalf("504: %+v", i)
	}
	if i, ok := tr.Classify(nil, timeout, true); !ok || !i.Timeout {
		t.Fatalf("read timeout (%v): %+v", timeout, i)
	}
}

// M51: a 413 with a valid Retry-After is retried (as urllib3 does), though
// 413 is not in Statuses.
func Test413WithRetryAfterIsRetried(t *testing.T) {
	srv := newServer(t, answer([]int{413, 200}, []string{"Retry-After", "0"}))
	resp, err, _ := send(t, &Transport{Strategy: noWait()}, context.Background(), "GET", srv.URL, nil)
	discard(resp)
	if err != nil || resp.StatusCode != 200 || len(srv.Requests()) != 2 {
		t.Fatalf("err %v, got %d after %d requests", err, resp.StatusCode, len(srv.Requests()))
	}
}

// M52: a body of exactly BufferBody bytes is buffered and sent again.
func TestBodyOfExactlyBufferBodyBytesIsReplayed(t *testing.T) {
	srv := newServer(t, failFirst(1, 503))
	resp, err, _ := send(t, &Transport{Strategy: noWait(), BufferBody: 5}, context.Background(), "PUT", srv.URL,
		io.NopCloser(strings.NewReader("12345")))
	discard(resp)
	reqs := srv.Requests()
	if err != nil || resp.StatusCode != 200 || len(reqs) != 2 || reqs[0].Body != "12345" || reqs[1].Body != "12345" {
		t.Fatalf("err %v; server saw %+v", err, reqs)
	}
}

// M54: the caller's Idempotency-Key is kept when IdempotencyKey is on.
func TestCallersIdempotencyKeyIsKept(t *testing.T) {
	srv := newServer(t, failFirst(1, 503))
	req, _ := http.NewRequest("POST", srv.URL, strings.NewReader("x"))
	req.Header.Set("Idempotency-Key", "order-42")
	resp, err := (&Transport{Strategy: noWait(), IdempotencyKey: true}).RoundTrip(req)
	discard(resp)
	reqs := srv.Requests()
	if err != nil || resp.StatusCode != 200 || len(reqs) != 2 {
		t.Fatalf("err %v after %d requests", err, len(reqs))
	}
	for i, r := range reqs {
		if k := r.Header.Get("Idempotency-Key"); k != "order-42" {
			t.Fatalf("attempt %d sent key %q", i+1, k)
		}
	}
}

// M56: every idempotent method of RFC 9110 is retried by default.
func TestEveryIdempotentMethodIsRetriedByDefault(t *testing.T) {
	for _, m := range []string{"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"} {
		srv := newServer(t, failFirst(1, 503))
		resp, err, _ := send(t, &Transport{Strategy: noWait()}, context.Background(), m, srv.URL, nil)
		discard(resp)
		reqs := srv.Requests()
		if err != nil || resp.StatusCode != 200 || len(reqs) != 2 || reqs[1].Method != m {
			t.Fatalf("%s: err %v after %d requests", m, err, len(reqs))
		}
	}
}

// delayedStart is a strategy whose initial token asks for a 1 s wait.
type delayedStart struct{ retry.Simple }

func (s *delayedStart) AcquireInitialToken(string) (retry.Token, error) {
	return retry.NewToken(0, time.Second, nil), nil
}

// M57: the initial token's delay is waited before the first attempt.
func TestInitialTokenDelayIsWaited(t *testing.T) {
	srv := newServer(t, failFirst(0, 0))
	virtual(t, func(t *testing.T, base *http.Transport) {
		var at []time.Duration
		start := time.Now()
		tr := &Transport{Base: base, Strategy: &delayedStart{}, OnAttempt: func(Attempt) { at = append(at, time.Since(start)) }}
		resp, err, _ := send(t, tr, context.Background(), "GET", srv.URL, nil)
		discard(resp)
		if err != nil || len(at) != 1 || at[0] != time.Second {
			t.Fatalf("err %v; attempts at %v, want [1s]", err, at)
		}
	})
}

// M59: a failed response that arrives after the caller gave up comes back as
// it is, with the cancellation as the reason.
func TestFailedResponseAfterTheCallerGaveUpComesBack(t *testing.T) {
	srv := newServer(t, failFirst(100, 503))
	realBase := &http.Transport{}
	defer realBase.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls atomic.Int32
	// Scripted step: http.Transport abandons a round trip as soon as its
	// context is cancelled, so no server can deliver a response after the
	// cancellation; the caller gives up the moment the real 503 arrives.
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls.Add(1)
		resp, err := realBase.RoundTrip(r)
		cancel()
		return resp, err
	})
	resp, err, rep := send(t, &Transport{Base: base, Strategy: noWait()}, ctx, "GET", srv.URL, nil)
	if err != nil || resp == nil {
		t.Fatalf("err %v, want the 503", err)
	}
	b, _ := io.ReadAll(resp.Body) // the body is still readable: it was not drained
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.HasPrefix(string(b), "failure 1") || calls.Load() != 1 ||
		len(srv.Requests()) != 1 || !errors.Is(rep.Reason, context.Canceled) {
		t.Fatalf("got %d %q after %d attempts, reason %v", resp.StatusCode, b, calls.Load(), rep.Reason)
	}
}

var errNoToken = errors.New("no token")

// noInitial is a strategy that refuses every initial token.
type noInitial struct{ retry.Simple }

func (*noInitial) AcquireInitialToken(string) (retry.Token, error) { return retry.Token{}, errNoToken }

// M61: without an initial token the request has one attempt, and a failed
// one reports the acquire error.
func TestFailedInitialTokenIsTheReason(t *testing.T) {
	srv := newServer(t, failFirst(100, 503))
	resp, err, rep := send(t, &Transport{Strategy: &noInitial{}}, context.Background(), "GET", srv.URL, nil)
	discard(resp)
	if err != nil || resp.StatusCode != 503 || len(srv.Requests()) != 1 || rep.Attempts != 1 || !errors.Is(rep.Reason, errNoToken) {
		t.Fatalf("err %v, %d requests, report %+v", err, len(srv.Requests()), rep)
	}
}

// M74: a failure that may not be retried never reaches the Limiter.
func TestUnsafeFailureNeverReachesTheLimiter(t *testing.T) {
	srv := newServer(t, failFirst(1, 503))
	var asked atomic.Int32
	tr := &Transport{Strategy: noWait(), Limiter: LimiterFunc(func([]Failure, *http.Request) bool {
		asked.Add(1)
		return true
	})}
	resp, err, rep := send(t, tr, context.Background(), "POST", srv.URL, strings.NewReader("x"))
	discard(resp)
	if err != nil || resp.StatusCode != 503 || asked.Load() != 0 || len(srv.Requests()) != 1 || !errors.Is(rep.Reason, retry.ErrNotRetryable) {
		t.Fatalf("limiter asked %d times, %d requests, reason %v", asked.Load(), len(srv.Requests()), rep.Reason)
	}
}

// A failed response whose body stalls does not hold the retry: the drain
// gives up. Real time, since a stalled socket cannot be virtual; only the
// outcome is asserted.
func TestStalledFailedBodyDoesNotHoldTheRetry(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n > 1 {
			io.WriteString(w, "ok")
			return
		}
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(503)
		w.Write(make([]byte, 10))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	type result struct {
		resp *http.Response
		body string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		resp, err := (&Transport{Base: base, Strategy: &retry.Simple{Backoff: retry.Constant(0)}}).RoundTrip(req)
		var b []byte
		if err == nil {
			b, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		done <- result{resp, string(b), err}
	}()
	select {
	case r := <-done:
		if r.err != nil || r.resp.StatusCode != 200 || r.body != "ok" || len(srv.Requests()) != 2 {
			t.Fatalf("err %v, body %q after %d requests; want the 200", r.err, r.body, len(srv.Requests()))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RoundTrip hung on the stalled body of the 503")
	}
}

// A failed response whose Content-Length exceeds the drain limit (16 KiB) is
// not read before the retry: its connection is abandoned.
func TestLargeFailedBodyIsNotDrained(t *testing.T) {
	const size = 1 << 20
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n > 1 {
			io.WriteString(w, "ok")
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.WriteHeader(503)
		chunk := make([]byte, 32<<10)
		for sent := 0; sent < size; sent += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return // the client closed the connection
			}
		}
	})
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	obs := &observed{base: base}
	resp, err, _ := send(t, &Transport{Base: obs, Strategy: noWait()}, context.Background(), "GET", srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	bodies := obs.responses()
	if resp.StatusCode != 200 || string(b) != "ok" || len(bodies) != 2 || srv.Conns.Load() != 2 {
		t.Fatalf("got %d %q after %d attempts on %d connections; want 200 on 2", resp.StatusCode, b, len(bodies), srv.Conns.Load())
	}
	if read, closes := bodies[0].counts(); read != 0 || closes != 1 {
		t.Fatalf("the 503's body: %d bytes read, %d closes; want 0 read, closed once", read, closes)
	}
}

// A failed response whose small body arrives late is drained, so that its
// connection is reused, when the request has no deadline: the drain may take
// up to drainTime (1 s); here the body's second half is sent once the drain
// has read the first, and waits for more.
func TestSlowSmallFailedBodyIsDrainedWithoutADeadline(t *testing.T) {
	const size = 2000
	firstHalfRead := make(chan struct{})
	var once sync.Once
	srv := newServer(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n > 1 {
			io.WriteString(w, "ok")
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.WriteHeader(503)
		w.Write(make([]byte, size/2))
		w.(http.Flusher).Flush()
		select {
		case <-firstHalfRead:
		case <-r.Context().Done(): // the client gave up on the body
			return
		}
		w.Write(make([]byte, size/2))
	})
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	obs := &observed{base: base, onRead: func(total int64) {
		if total >= size/2 {
			once.Do(func() { close(firstHalfRead) })
		}
	}}
	resp, err, _ := send(t, &Transport{Base: obs, Strategy: noWait()}, context.Background(), "GET", srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	discard(resp)
	bodies := obs.responses()
	if resp.StatusCode != 200 || len(bodies) != 2 {
		t.Fatalf("got %d after %d attempts", resp.StatusCode, len(bodies))
	}
	if read, _ := bodies[0].counts(); read != size || srv.Conns.Load() != 1 {
		t.Fatalf("the 503's body: %d of %d bytes drained; %d connections, want 1", read, size, srv.Conns.Load())
	}
}

// A retry that the strategy granted but the deadline refuses gives its cost
// back to the quota.
func TestRetryRefusedForTheDeadlineGivesTheQuotaBack(t *testing.T) {
	srv := newServer(t, failFirst(100, 503))
	virtual(t, func(t *testing.T, base *http.Transport) {
		s := retry.NewStandard(retry.StandardOptions{Backoff: retry.Constant(2 * time.Second)})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		resp, err, rep := send(t, &Transport{Base: base, Strategy: s}, ctx, "GET", srv.URL, nil)
		discard(resp)
		if err != nil || resp.StatusCode != 503 || len(srv.Requests()) != 1 || time.Since(start) != 0 ||
			!errors.Is(rep.Reason, retry.ErrDeadline) {
			t.Fatalf("err %v, %d requests after %v, reason %v", err, len(srv.Requests()), time.Since(start), rep.Reason)
		}
		if n := s.Available(hostOf(srv)); n != 500 {
			t.Fatalf("quota %d after a retry that was not made, want 500", n)
		}
	})
}

// A body GetBody made for a retry the Limiter refuses is closed.
func TestGetBodyIsClosedWhenTheLimiterRefuses(t *testing.T) {
	srv := newServer(t, failFirst(100, 503))
	var (
		mu     sync.Mutex
		bodies []*countingBody
	)
	getBody := func() (io.ReadCloser, error) {
		b := newCountingBody("data")
		mu.Lock()
		bodies = append(bodies, b)
		mu.Unlock()
		return b, nil
	}
	var rep Report
	req, _ := http.NewRequestWithContext(WithReport(context.Background(), &rep), "PUT", srv.URL, nil)
	req.Body, _ = getBody()
	req.GetBody = getBody
	req.ContentLength = 4
	tr := &Transport{Strategy: noWait(), Limiter: LimiterFunc(func([]Failure, *http.Request) bool { return false })}
	resp, err := tr.RoundTrip(req)
	discard(resp)
	if err != nil || resp.StatusCode != 503 || len(srv.Requests()) != 1 || !errors.Is(rep.Reason, ErrLimited) {
		t.Fatalf("err %v, %d requests, reason %v", err, len(srv.Requests()), rep.Reason)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 2 {
		t.Fatalf("GetBody made %d bodies, want 2 (the first attempt's and the refused retry's)", len(bodies))
	}
	for i, b := range bodies {
		if _, closes := b.counts(); closes == 0 {
			t.Fatalf("body %d was not closed", i+1)
		}
	}
}

// Retries < 0 turns retrying off, and the Report still tells why a failed
// request had one attempt.
func TestRetriesOffStillFillsTheReport(t *testing.T) {
	srv := newServer(t, failFirst(100, 503))
	resp, err, rep := send(t, &Transport{Retries: -1}, context.Background(), "GET", srv.URL, nil)
	discard(resp)
	if err != nil || resp.StatusCode != 503 || len(srv.Requests()) != 1 {
		t.Fatalf("err %v, %d requests", err, len(srv.Requests()))
	}
	if rep.Attempts != 1 || !errors.Is(rep.Reason, retry.ErrMaxAttempts) {
		t.Fatalf("report %+v, want 1 attempt and ErrMaxAttempts", rep)
	}
}

// With Retries < 0 the single attempt still goes through Options: a Trace
// sees it start and end (its AttemptStart context is the request's), and a
// hook hears the failure, as with retries on.
func TestRetriesOffKeepsTheOptions(t *testing.T) {
	srv := newServer(t, failFirst(100, 503))
	type key struct{}
	var started, done, failed int
	var sawCtx bool
	srvCtx := make(chan bool, 1)
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		srvCtx <- r.Context().Value(key{}) != nil
		return http.DefaultTransport.RoundTrip(r)
	})
	tr := &Transport{Retries: -1, Base: base, Options: []retry.Option{
		retry.WithTrace(&retry.Trace{
			AttemptStart: func(ctx context.Context, _ string, n int) context.Context {
				started++
				return context.WithValue(ctx, key{}, n)
			},
			AttemptDone: func(_ context.Context, _ string, _ int, err error) {
				if err != nil {
					done++
				}
			},
		}),
		retry.OnAttemptFailed(func(context.Context, int, error) { failed++ }),
	}}
	resp, err, rep := send(t, tr, context.Background(), "GET", srv.URL, nil)
	discard(resp)
	sawCtx = <-srvCtx
	if err != nil || resp.StatusCode != 503 || len(srv.Requests()) != 1 {
		t.Fatalf("err %v, %d requests", err, len(srv.Requests()))
	}
	if started != 1 || done != 1 || failed != 1 || !sawCtx {
		t.Errorf("trace saw %d starts and %d failed ends, hook %d failures, attempt's context from AttemptStart %v; want 1, 1, 1, true",
			started, done, failed, sawCtx)
	}
	if rep.Attempts != 1 || !errors.Is(rep.Reason, retry.ErrMaxAttempts) {
		t.Fatalf("report %+v, want 1 attempt and ErrMaxAttempts", rep)
	}
}
