package httpretry

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/retrykit/retry"
)

// Defaults of the Transport.
const (
	// DefaultMaxRetryAfter is the longest server-requested wait obeyed.
	DefaultMaxRetryAfter = 5 * time.Minute
	// IdempotencyKeyHeader is the header that makes a request retryable
	// whatever its method (IETF draft-ietf-httpapi-idempotency-key-header).
	IdempotencyKeyHeader = "Idempotency-Key"
)

// ErrLimited is the reason retrying stopped when the Transport's Limiter
// refused a retry.
var ErrLimited = errors.New("httpretry: retry refused by the limiter")

// errNoResponse stands for a base transport that broke its contract.
var errNoResponse = errors.New("httpretry: the base RoundTripper returned neither a response nor an error")

// errRetriesOff is the reason a request had one attempt when Retries < 0.
var errRetriesOff = fmt.Errorf("%w: retries are off (Retries < 0)", retry.ErrMaxAttempts)

// Transport is an http.RoundTripper that retries failed requests through a
// retry.Strategy. The zero value is ready to use:
//
//	client := &http.Client{Transport: &httpretry.Transport{}}
//
// See the package documentation for the rules it follows. A Transport is safe
// for concurrent use and must not be copied after first use; share one per
// client, as with http.Transport.
type Transport struct {
	Base     http.RoundTripper // nil = http.DefaultTransport
	Strategy retry.Strategy    // nil = a retry.Adaptive owned by this Transport
	// MaxRetryAfter bounds the server's wait (Retry-After, RateLimit): a
	// longer one, or one past the request's deadline, ends retrying at once
	// and the response comes back. 0 = 5 min.
	MaxRetryAfter time.Duration

	// Retries is the one dial (HXEP-0001's retries=N): at most this many
	// retries per request. 0 keeps the strategy's own limit (2 retries for the
	// default strategy); a negative value turns retrying off.
	Retries int
	// Limiter, if set, must also allow every retry; see Limiter.
	Limiter Limiter

	// Methods are retried after any retryable failure; other methods only
	// when the request never reached the server or carries an
	// Idempotency-Key. nil = GET, HEAD, OPTIONS, TRACE, PUT, DELETE (the
	// idempotent methods of RFC 9110).
	Methods []string
	// Statuses are the response statuses that are retryable failures. nil =
	// 429, 500, 502, 503, 504. A response with another status is returned
	// as it is.
	Statuses []int
	// RetryAfterStatuses are the statuses whose Retry-After (or RateLimit)
	// header is obeyed; a response with one of them and a valid Retry-After
	// is retried even if its status is not in Statuses (urllib3 does the
	// same). nil = 413, 429, 503; an empty slice ignores the headers.
	RetryAfterStatuses []int
	// IdempotencyKey gives POST and PATCH requests that have no
	// Idempotency-Key header a random one, the same on every attempt, which
	// makes them retryable. The server must honour the key for this to be
	// safe.
	IdempotencyKey bool
	// BufferBody is how many bytes of a request body without GetBody are
	// held in memory so that it can be sent again. A larger body is sent once
	// and not retried after it was sent. 0 = no buffering.
	BufferBody int64

	// AttemptTimeout bounds each attempt, reading the response body
	// included; an attempt that times out may be retried. 0 = no bound other
	// than the request's context.
	AttemptTimeout time.Duration
	// AttemptHeader, if set, names a header that tells the server which
	// attempt a retry is ("2" for the first retry); first attempts do not
	// carry it. For example "Retry-Attempt".
	AttemptHeader string
	// OnAttempt, if set, is called after every attempt.
	OnAttempt func(Attempt)
	// Scope returns the retry quota a request draws on. nil = the request's
	// host, so that a failing host does not exhaust the quota of the others.
	Scope func(*http.Request) string

	once  sync.Once
	owned retry.Strategy
}

// Attempt describes one attempt to OnAttempt.
type Attempt struct {
	N        int            // 1 for the first attempt
	Request  *http.Request  // the request sent
	Response *http.Response // the response, or nil; do not read its body
	Err      error          // the transport error, or nil
	Retry    bool           // another attempt follows
	Delay    time.Duration  // the wait before it
	Reason   error          // why no attempt follows, when Retry is false and the attempt failed
}

// Report is what the Transport did with one request. Ask for it with
// WithReport.
type Report struct {
	Attempts int   // attempts made
	Reason   error // why retrying stopped, or nil if the last attempt succeeded
}

type reportKey struct{}

// WithReport returns a context that makes the Transport fill r in for the
// request made with it, once RoundTrip returns.
func WithReport(ctx context.Context, r *Report) context.Context {
	return context.WithValue(ctx, reportKey{}, r)
}

var (
	defaultMethods            = []string{http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete}
	defaultStatuses           = []int{http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout}
	defaultRetryAfterStatuses = []int{http.StatusRequestEntityTooLarge, http.StatusTooManyRequests, http.StatusServiceUnavailable}
)

// RoundTrip sends req, retrying it as the Transport's rules allow. When
// retrying stops on a response, that response is returned unread with a nil
// error, as the base transport returned it. When it stops on a transport
// error, the error is a *retry.Error wrapping the last error and the reason.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.base()
	l := loop{t: t, base: base, orig: req}
	var (
		resp *http.Response
		tok  retry.Token
		err  error
	)
	if t.Retries < 0 {
		err = errRetriesOff
	} else {
		l.s = t.strategy()
		tok, err = l.s.AcquireInitialToken(t.scope(req))
	}
	if err != nil {
		// seed 001: without a token, one attempt.
		reason := err
		resp, err = base.RoundTrip(req)
		l.attempts = 1
		if err != nil || t.isFailure(resp) {
			l.reason = reason
		}
	} else {
		resp, err = l.run(tok)
	}
	if r, ok := req.Context().Value(reportKey{}).(*Report); ok && r != nil {
		*r = Report{Attempts: l.attempts, Reason: l.reason}
	}
	return resp, err
}

// CloseIdleConnections closes the base transport's idle connections, if it
// has any; http.Client.CloseIdleConnections calls it.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base().(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (t *Transport) base() http.RoundTripper {
	if t.Base == nil {
		return http.DefaultTransport
	}
	return t.Base
}

func (t *Transport) strategy() retry.Strategy {
	if t.Strategy != nil {
		return t.Strategy
	}
	t.once.Do(func() {
		opts := retry.StandardOptions{MaxRetryAfter: t.maxRetryAfter()}
		if t.Retries > 0 {
			opts.MaxAttempts = t.Retries + 1
		}
		t.owned = retry.NewAdaptive(retry.AdaptiveOptions{StandardOptions: opts})
	})
	return t.owned
}

func (t *Transport) scope(req *http.Request) string {
	if t.Scope != nil {
		return t.Scope(req)
	}
	return req.URL.Host
}

func (t *Transport) maxRetryAfter() time.Duration {
	if t.MaxRetryAfter <= 0 {
		return DefaultMaxRetryAfter
	}
	return t.MaxRetryAfter
}

// isFailure reports whether resp is a failure that may be retried.
func (t *Transport) isFailure(resp *http.Response) bool {
	statuses := t.Statuses
	if statuses == nil {
		statuses = defaultStatuses
	}
	if slices.Contains(statuses, resp.StatusCode) {
		return true
	}
	if t.obeysRetryAfter(resp.StatusCode) {
		_, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		return ok
	}
	return false
}

func (t *Transport) obeysRetryAfter(status int) bool {
	statuses := t.RetryAfterStatuses
	if statuses == nil {
		statuses = defaultRetryAfterStatuses
	}
	return slices.Contains(statuses, status)
}

// idempotent reports whether req may be repeated after it reached the server.
func (t *Transport) idempotent(req *http.Request) bool {
	methods := t.Methods
	if methods == nil {
		methods = defaultMethods
	}
	return slices.Contains(methods, req.Method) || req.Header.Get(IdempotencyKeyHeader) != ""
}

// needsKey reports whether the Transport adds an Idempotency-Key to req.
func (t *Transport) needsKey(req *http.Request) bool {
	return t.IdempotencyKey && (req.Method == http.MethodPost || req.Method == http.MethodPatch) &&
		req.Header.Get(IdempotencyKeyHeader) == ""
}

// loop is one request's way through its attempts.
type loop struct {
	t        *Transport
	base     http.RoundTripper
	s        retry.Strategy
	orig     *http.Request
	first    *http.Request // the request of the first attempt
	body     body
	failures []Failure

	attempts int
	reason   error
}

func (l *loop) run(tok retry.Token) (*http.Response, error) {
	ctx := l.orig.Context()
	req, err := l.prepare()
	if err != nil {
		return nil, err
	}
	defer l.body.release()
	for {
		if d := tok.Delay(); d > 0 && l.attempts == 0 {
			// Only the initial token's delay is waited here; retries wait below.
			if err := retry.Sleep(ctx, d); err != nil {
				l.release(tok)
				if req.Body != nil {
					_ = req.Body.Close() // a RoundTripper closes the body, even on errors
				}
				l.reason = err
				return nil, &retry.Error{Reason: err}
			}
		}
		l.attempts++
		areq, cancel := req, context.CancelFunc(nil)
		if l.t.AttemptTimeout > 0 {
			var actx context.Context
			actx, cancel = context.WithTimeout(ctx, l.t.AttemptTimeout)
			areq = req.WithContext(actx)
		}
		resp, err := l.base.RoundTrip(areq)
		if resp == nil && err == nil {
			err = errNoResponse
		}

		var (
			kind Kind
			info retry.Info
			fail error // what the strategy sees
		)
		switch {
		case err != nil:
			if cancel != nil {
				cancel()
			}
			if ctx.Err() != nil {
				return l.stop(areq, nil, err, ctx.Err())
			}
			var timeout, known bool
			kind, timeout, known = transportKind(err)
			if cancel != nil && errors.Is(err, context.DeadlineExceeded) {
				kind, timeout, known = KindRead, true, true // the attempt's own timeout
			}
			if !known {
				return l.stop(areq, nil, err, retry.ErrNotRetryable)
			}
			info = l.info(kind, timeout)
			fail = &transportError{err: err, info: info}
		case !l.t.isFailure(resp):
			if cancel != nil && resp.StatusCode != http.StatusSwitchingProtocols {
				// The attempt's deadline covers reading the body; an upgraded
				// connection's body is a ReadWriteCloser and must stay one.
				resp.Body = &cancelBody{resp.Body, cancel}
			}
			if resp.StatusCode < 500 {
				_ = l.s.RecordSuccess(tok) // the service answered: a success for the quota
			}
			l.notify(Attempt{N: l.attempts, Request: areq, Response: resp})
			return resp, nil
		default:
			if cancel != nil {
				resp.Body = &cancelBody{resp.Body, cancel}
			}
			kind = KindStatus
			info = l.statusInfo(resp)
			fail = &StatusError{StatusCode: resp.StatusCode, Status: resp.Status, Header: resp.Header, info: info}
		}

		// The failure may be retried only if every rule agrees, the
		// cheapest and most certain first; the strategy, which charges the
		// quota, comes last.
		if ctx.Err() != nil {
			return l.stop(areq, resp, err, ctx.Err())
		}
		l.failures = append(l.failures, Failure{Attempt: l.attempts, Kind: kind, Response: resp, Err: err})
		if !info.Retryable() {
			reason := retry.ErrNotRetryable
			if !l.body.replayable(kind) && l.t.idempotentOrConnect(l.first, kind) {
				reason = l.body.why()
			}
			return l.stop(areq, resp, err, reason)
		}
		if l.t.Retries > 0 && l.attempts > l.t.Retries {
			return l.stop(areq, resp, err, retry.ErrMaxAttempts)
		}
		next, err2 := l.nextRequest(kind)
		if err2 != nil {
			return l.stop(areq, resp, err, err2)
		}
		// From here on, a refusal must close the next attempt's body.
		if l.t.Limiter != nil && !l.t.Limiter.Allow(l.failures, next) {
			return l.stopBefore(next, areq, resp, err, ErrLimited)
		}
		if limit := l.t.maxRetryAfter(); info.RetryAfter > limit {
			return l.stopBefore(next, areq, resp, err, &retry.RetryAfterError{RetryAfter: info.RetryAfter, Max: limit})
		}
		ntok, refused := l.s.RefreshToken(tok, fail)
		if refused != nil {
			return l.stopBefore(next, areq, resp, err, refused)
		}
		delay := ntok.Delay()
		left := time.Duration(-1) // time left before the deadline after the wait; -1 = no deadline
		if deadline, ok := ctx.Deadline(); ok {
			if left = time.Until(deadline) - delay; left <= 0 {
				l.release(ntok) // the retry will not be made: its cost goes back
				return l.stopBefore(next, areq, resp, err, retry.ErrDeadline)
			}
		}
		l.notify(Attempt{N: l.attempts, Request: areq, Response: resp, Err: err, Retry: true, Delay: delay})
		if resp != nil {
			// Its connection goes back to the pool during the wait. The drain
			// takes at most half the time the wait leaves before the deadline.
			within := left // -1: no deadline
			if within > 0 {
				within /= 2
			}
			drain(resp, within)
		}
		if err := retry.Sleep(ctx, delay); err != nil {
			l.release(ntok)
			closeBody(next, l.body.guard)
			l.reason = err
			return nil, &retry.Error{Attempts: l.attempts, Err: fail, Reason: err}
		}
		tok, req = ntok, next
	}
}

// stop ends the loop after the attempt req: with the response if there is
// one, as the base transport returned it, or else with the error.
func (l *loop) stop(req *http.Request, resp *http.Response, err, reason error) (*http.Response, error) {
	l.reason = reason
	l.notify(Attempt{N: l.attempts, Request: req, Response: resp, Err: err, Reason: reason})
	if resp != nil {
		return resp, nil
	}
	return nil, &retry.Error{Attempts: l.attempts, Err: err, Reason: reason}
}

// stopBefore is stop for a refusal that comes after the next attempt's
// request was built: its body is closed.
func (l *loop) stopBefore(next, req *http.Request, resp *http.Response, err, reason error) (*http.Response, error) {
	closeBody(next, l.body.guard)
	return l.stop(req, resp, err, reason)
}

// release hands back a granted retry that will not be made, if the strategy
// can take it back, so that it does not cost the quota.
func (l *loop) release(tok retry.Token) {
	if r, ok := l.s.(retry.Releaser); ok {
		_ = r.ReleaseToken(tok)
	}
}

func (l *loop) notify(a Attempt) {
	if l.t.OnAttempt != nil {
		l.t.OnAttempt(a)
	}
}

// prepare returns the first attempt's request: the caller's own, unless the
// Transport must add a header or take over the body, in which case a clone.
func (l *loop) prepare() (*http.Request, error) {
	req := l.orig
	body := req.Body != nil && req.Body != http.NoBody && req.GetBody == nil
	if body || l.t.needsKey(req) {
		req = req.Clone(req.Context())
		if l.t.needsKey(req) {
			req.Header.Set(IdempotencyKeyHeader, rand.Text())
		}
	}
	var err error
	l.body, err = newBody(req, l.t.BufferBody)
	if err != nil {
		return nil, err
	}
	l.first = req
	return req, nil
}

// nextRequest builds the request for the next attempt: a clone of the first,
// with its body replayed and the attempt header set.
func (l *loop) nextRequest(kind Kind) (*http.Request, error) {
	if !l.body.replayable(kind) {
		return nil, l.body.why()
	}
	next := l.first.Clone(l.orig.Context())
	b, err := l.body.next()
	if err != nil {
		return nil, err
	}
	next.Body = b
	if l.t.AttemptHeader != "" {
		next.Header.Set(l.t.AttemptHeader, strconv.Itoa(l.attempts+1))
	}
	return next, nil
}

// info classifies a transport failure of the given kind.
func (l *loop) info(kind Kind, timeout bool) retry.Info {
	return errorInfo(timeout, l.body.replayable(kind) && l.t.idempotentOrConnect(l.first, kind))
}

// statusInfo classifies a failed response.
func (l *loop) statusInfo(resp *http.Response) retry.Info {
	return l.t.statusInfo(resp, l.body.replayable(KindStatus) && l.t.idempotent(l.first))
}

// errorInfo classifies a transport failure; safe says whether the request
// may be repeated after it.
func errorInfo(timeout, safe bool) retry.Info {
	info := retry.Info{Timeout: timeout, Fault: retry.FaultServer, Safety: retry.Unsafe}
	if safe {
		info.Safety = retry.Safe
	}
	return info
}

// statusInfo classifies a failed response; safe says whether the request may
// be repeated after it reached the server.
func (t *Transport) statusInfo(resp *http.Response, safe bool) retry.Info {
	info := retry.Info{Safety: retry.Unsafe, Fault: retry.FaultServer}
	if resp.StatusCode < 500 {
		info.Fault = retry.FaultClient
	}
	info.Throttle = resp.StatusCode == http.StatusTooManyRequests
	info.Timeout = resp.StatusCode == http.StatusGatewayTimeout || resp.StatusCode == http.StatusRequestTimeout
	if t.obeysRetryAfter(resp.StatusCode) {
		if d, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
			info.RetryAfter = d
		} else if d, ok := rateLimitWait(resp.Header); ok {
			info.RetryAfter = d
		}
	}
	if safe {
		info.Safety = retry.Safe
	}
	return info
}

// Classify reports how t judges one outcome of a request, for callers that
// run a retry loop of their own over HTTP (package forrst does): failed says
// whether it is a failure at all (a transport error, or a status in
// Statuses, or one with a Retry-After t obeys), and info how a strategy
// should treat it. idempotent says whether the request may be repeated after
// it reached the server; its body is taken to be replayable. A transport
// error retrying cannot fix (a bad certificate, an unknown host) is a failure
// that is not retryable.
func (t *Transport) Classify(resp *http.Response, err error, idempotent bool) (info retry.Info, failed bool) {
	if err != nil {
		kind, timeout, known := transportKind(err)
		if !known {
			return retry.Info{Safety: retry.Unsafe, Fault: retry.FaultClient}, true
		}
		return errorInfo(timeout, kind == KindConnect || idempotent), true
	}
	if resp == nil || !t.isFailure(resp) {
		return retry.Info{}, false
	}
	return t.statusInfo(resp, idempotent), true
}

// idempotentOrConnect reports whether a failure of this kind leaves req safe
// to repeat, as far as the method goes.
func (t *Transport) idempotentOrConnect(req *http.Request, kind Kind) bool {
	return kind == KindConnect || t.idempotent(req)
}
