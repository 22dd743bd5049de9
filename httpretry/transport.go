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
	// RetryAttemptHeader is the header a resent request carries, with the
	// attempt's number ("2" for the first retry), as Envoy's
	// x-envoy-attempt-count and gRPC's grpc-previous-rpc-attempts tell a
	// server which attempt it serves.
	RetryAttemptHeader = "Retry-Attempt"
)

// ErrLimited is the reason retrying stopped when the Transport's Limiter
// refused a retry.
var ErrLimited = errors.New("httpretry: retry refused by the limiter")

// errNoResponse stands for a base transport that broke its contract.
var errNoResponse = errors.New("httpretry: the base RoundTripper returned neither a response nor an error")

// errRetriesOff is the reason a request had one attempt when Retries < 0.
var errRetriesOff = fmt.Errorf("%w: retries are off (Retries < 0)", retry.ErrMaxAttempts)

// errAnswered stops the loop on a 5xx response that is not a failure (not
// in Statuses): the Transport returns it, and the quota does not count it as
// a success.
var errAnswered = errors.New("httpretry: answered with a 5xx status that is not retried")

// errBodyUnread is the reason a request was not sent at all: its body could
// not be read into the buffer that would replay it.
var errBodyUnread = errors.New("httpretry: the request body could not be read, so it was not sent")

// Transport is an http.RoundTripper that retries failed requests through a
// retry.Strategy. The zero value is ready to use:
//
//	client := &http.Client{Transport: &httpretry.Transport{}}
//
// See the package documentation for the rules it follows. A Transport is safe
// for concurrent use and must not be copied after first use; share one per
// client, as with http.Transport.
type Transport struct {
	Base     http.RoundTripper // nil = http.DefaultTransport; not told the Transport retries, so it should not retry too
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
	// Breaker, if set, is a circuit breaker (see retry.Breaker) that every
	// attempt consults first, scoped as the strategy is (Scope; by default
	// the request's host), and that counts how each attempt went by the
	// Transport's classification: a 5xx in Statuses, a refused or reset
	// connection and a timeout count as failures, a 429, a 5xx not in
	// Statuses and an attempt whose own request body failed to read (the
	// caller's fault, not the host's) as neither, and a response the
	// Transport returns as an answer (a 404 included: the host is at work)
	// as a success.
	// While a host's circuit is open, RoundTrip dials nothing: a request
	// whose first attempt is refused returns a *retry.Error whose Reason is
	// retry.ErrCircuitOpen, and a retry refused after a failed response
	// returns that response, as when retrying stops for any other reason.
	// It applies with Retries < 0 too. Share one Breaker per service, across
	// Transports if several call it. A retry.WithBreaker in Options
	// replaces it.
	Breaker *retry.Breaker

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
	// same), and its classification is retry.Info.Allowed: the server said
	// the retry may come. nil = 413, 429, 503, 504; an empty slice ignores
	// the headers. 504 is there because the default strategy may refuse to
	// retry a gateway's timeout, for fear of overload, unless the server
	// permits it, and a Retry-After on it is the one way a server can.
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
	// included, the single one with Retries < 0 too; an attempt that times
	// out may be retried. 0 = no bound other than the request's context.
	AttemptTimeout time.Duration
	// AttemptHeader names the header that tells the server which attempt a
	// resent request is ("2" for the first retry); first attempts do not
	// carry it. "" = RetryAttemptHeader; "-" = none. A server behind Handler
	// reads it, so that its own calls leave to this Transport what it
	// retries.
	AttemptHeader string
	// Independent makes the Transport retry as if alone even when its
	// caller retries too (retry.CallerRetries: a request marked by Handler,
	// or by a loop of the caller's). By default it then makes one attempt
	// for a failed response, which it returns for the caller to judge, and
	// keeps its retries for the failures the caller cannot see (a refused
	// connection, a reset): retries at two layers would multiply.
	Independent bool
	// OnAttempt, if set, is called after every attempt.
	OnAttempt func(Attempt)
	// Scope returns the retry quota a request draws on. nil = the request's
	// host, so that a failing host does not exhaust the quota of the others.
	Scope func(*http.Request) string
	// Options are passed to retry.DoValue, which makes every request's
	// attempts (the single one with Retries < 0 too), after the
	// Transport's own: hooks, logging, a retry.Trace, whose AttemptStart
	// context becomes the context of the attempt's request. For a bound on
	// each attempt use AttemptTimeout above, not retry.AttemptTimeout,
	// which would end the attempt's context before the caller has read the
	// response.
	Options []retry.Option

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
	defaultRetryAfterStatuses = []int{http.StatusRequestEntityTooLarge, http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusGatewayTimeout}
)

// RoundTrip sends req, retrying it as the Transport's rules allow. When
// retrying stops on a response, that response is returned unread with a nil
// error, as the base transport returned it. When it stops on a transport
// error, the error is a *retry.Error wrapping the last error and the reason.
//
// The attempts are made by retry.DoValue, the loop every integration of this
// module shares: the Transport adds only what is HTTP's own (bodies, the
// dials, the drain of a failed response during the wait).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var (
		resp   *http.Response
		err    error
		report Report
	)
	if t.Retries < 0 && (t.Breaker != nil || len(t.Options) > 0) {
		resp, report, err = t.single(req)
	} else if t.Retries < 0 {
		r, cancel := t.bound(req.Context(), req)
		r, w := watch(r)
		resp, err = roundTrip(req.Context(), t.base(), r, w)
		endAttempt(resp, err, cancel)
		report.Attempts = 1
		if err != nil || t.isFailure(resp) {
			report.Reason = errRetriesOff
		}
		if err != nil {
			err = &retry.Error{Attempts: 1, Err: err, Reason: errRetriesOff}
		}
	} else {
		l := loops.Get().(*loop)
		l.t, l.base, l.orig = t, t.base(), req
		resp, err = l.run()
		report = Report{Attempts: l.attempts, Reason: l.reason}
		l.reset()
		loops.Put(l)
	}
	if r, ok := req.Context().Value(reportKey{}).(*Report); ok && r != nil {
		*r = report
	}
	return resp, err
}

// single is RoundTrip with Retries < 0 and a Breaker or Options: a single
// attempt, which the breaker may refuse and counts, and the hooks and Trace
// of Options see, classified as the Transport classifies its attempts.
func (t *Transport) single(req *http.Request) (*http.Response, Report, error) {
	var (
		resp  *http.Response
		rtErr error
		made  bool
	)
	_, err := retry.DoValue(req.Context(), &noRetries, func(ctx context.Context) (struct{}, error) {
		made = true
		r := req
		if ctx != req.Context() {
			r = req.WithContext(ctx) // a Trace's AttemptStart gave the attempt its own
		}
		r, cancel := t.bound(ctx, r)
		r, w := watch(r)
		resp, rtErr = roundTrip(ctx, t.base(), r, w)
		endAttempt(resp, rtErr, cancel)
		info, failed := t.Classify(resp, rtErr, t.idempotent(req))
		if !failed {
			if resp.StatusCode >= 500 {
				return struct{}{}, errAnswered // neither, as in the loop
			}
			return struct{}{}, nil
		}
		return struct{}{}, retry.WithInfo(errRetriesOff, info)
	}, append([]retry.Option{retry.Scope(t.scope(req)), retry.WithBreaker(t.Breaker), retry.Unmarked()}, t.Options...)...)
	if !made {
		// Refused: the request was never sent, and a RoundTripper closes
		// the body even on errors.
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, Report{Reason: retry.ErrCircuitOpen}, err
	}
	report := Report{Attempts: 1}
	if rtErr != nil || t.isFailure(resp) {
		report.Reason = errRetriesOff
	}
	if rtErr != nil {
		return nil, report, &retry.Error{Attempts: 1, Err: rtErr, Reason: errRetriesOff}
	}
	return resp, report, nil
}

// noRetries is the strategy of one: one attempt, for the breaker to judge.
var noRetries retry.No

// reset lets go of everything of the request l served, field by field: a
// copy of a whole loop over it would cost the success path more.
func (l *loop) reset() {
	l.t, l.base, l.orig, l.first, l.next, l.drained, l.kept = nil, nil, nil, nil, nil, nil, nil
	l.body, l.failures, l.last, l.reason = body{}, nil, Attempt{}, nil
	l.kind, l.info, l.waited, l.attempts = 0, retry.Info{}, false, 0
}

// attemptHeader is the name of the header resent requests carry, or "".
func (t *Transport) attemptHeader() string {
	switch t.AttemptHeader {
	case "":
		return RetryAttemptHeader
	case "-":
		return ""
	}
	return t.AttemptHeader
}

// loops keeps loops, each with its options bound to it once: options whose
// hooks are bound to a new loop would cost the success path four
// allocations.
var loops = sync.Pool{New: func() any {
	l := new(loop)
	l.opts = [...]retry.Option{{}, retry.BeforeRetry(l.vet), retry.OnRetry(l.retrying), retry.OnGiveUp(l.gaveUp), retry.Unmarked(), {}}
	return l
}}

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
		_, ok := retryAfterWait(resp.Header, time.Now()) // any line, as statusInfo reads them
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

// loop is one request's way through its attempts: the operation that
// retry.DoValue calls for each attempt, and the hooks through which the
// Transport's own rules take part in the loop.
type loop struct {
	t        *Transport
	base     http.RoundTripper
	orig     *http.Request
	first    *http.Request // the request of the first attempt
	body     body
	failures []Failure

	next    *http.Request // the request of the next attempt, until it is sent
	last    Attempt       // the latest attempt, as OnAttempt sees it
	kind    Kind          // how it failed; 0 for a failure that is not retried
	info    retry.Info    // and its classification
	drained *http.Response
	kept    *keptBody // drained's body, as far as the drain read it
	waited  bool      // the loop has waited since the latest attempt

	attempts int
	reason   error

	// The request's scope, then the hooks bound to this loop, then the
	// Transport's Breaker (the zero Option without one). The attempts'
	// context is the request's own, unmarked: marking it would copy the
	// request, and nothing under a Transport is meant to retry.
	opts [6]retry.Option
}

// run makes the request's attempts through retry.DoValue.
func (l *loop) run() (*http.Response, error) {
	req, err := l.prepare()
	if err != nil {
		l.reason = errBodyUnread
		return nil, &retry.Error{Err: err, Reason: errBodyUnread}
	}
	defer l.body.release()
	l.next = req
	l.opts[0] = retry.Scope(l.t.scope(l.orig))
	l.opts[5] = retry.WithBreaker(l.t.Breaker)
	opts := l.opts[:]
	if len(l.t.Options) > 0 {
		opts = append(opts[:len(opts):len(opts)], l.t.Options...)
	}
	resp, err := retry.DoValue(l.orig.Context(), l.t.strategy(), l.attempt, opts...)
	if err != nil && resp != nil && resp == l.drained && l.orig.Context().Err() == nil {
		// Retrying stopped after the drain, as the retry was about to be
		// made (a circuit that opened during the wait): the response comes
		// back all the same, with the body the drain kept.
		resp.Body = l.kept
		return resp, nil
	}
	if err != nil && (resp == nil || resp == l.drained) {
		return nil, err
	}
	return resp, nil // the last response, unread, when retrying stops on one
}

// attempt sends the next request once and classifies the outcome: a
// success, or a failure whose error carries its retry.Info.
func (l *loop) attempt(ctx context.Context) (*http.Response, error) {
	req := l.next
	l.next, l.waited, l.kind = nil, false, 0
	l.attempts++
	areq := req
	if ctx != req.Context() {
		areq = req.WithContext(ctx) // the attempt's own, from a retry.Trace
	}
	areq, cancel := l.t.bound(ctx, areq)
	areq, w := l.body.watch(areq)
	resp, err := roundTrip(ctx, l.base, areq, w)
	endAttempt(resp, err, cancel)
	l.last = Attempt{N: l.attempts, Request: areq, Response: resp, Err: err}
	switch {
	case err != nil:
		if ctx.Err() != nil {
			return nil, err // the loop stops: the caller gave up
		}
		if _, ok := err.(*bodyError); ok {
			return nil, err // the loop stops: the caller's body failed
		}
		kind, timeout, known := transportKind(err)
		if cancel != nil && errors.Is(err, context.DeadlineExceeded) {
			kind, timeout, known = KindRead, true, true // the attempt's own timeout
		}
		if !known {
			return nil, &transportError{err: err, info: retry.Info{Safety: retry.Unsafe, Fault: retry.FaultClient}}
		}
		l.kind, l.info = kind, l.errorInfo(kind, timeout)
		return nil, &transportError{err: err, info: l.info}
	case !l.t.isFailure(resp):
		if resp.StatusCode >= 500 {
			// The loop stops on it, but it is no success for the quota.
			return resp, errAnswered
		}
		l.notify(l.last)
		return resp, nil
	}
	l.kind, l.info = KindStatus, l.statusInfo(resp)
	return resp, &StatusError{StatusCode: resp.StatusCode, Status: resp.Status, Header: resp.Header, info: l.info}
}

// bound returns req with a context that ends after AttemptTimeout, derived
// from ctx, and the function that ends it; without a timeout, req and nil.
func (t *Transport) bound(ctx context.Context, req *http.Request) (*http.Request, context.CancelFunc) {
	if t.AttemptTimeout <= 0 {
		return req, nil
	}
	actx, cancel := context.WithTimeout(ctx, t.AttemptTimeout)
	return req.WithContext(actx), cancel
}

// endAttempt hands the end of an attempt's bound (cancel, from bound) to
// its outcome: a failed round trip ends it at once, a response when the
// caller closes its body, so that the bound covers reading the body but
// not beyond. An upgraded connection's body is a ReadWriteCloser and must
// stay one.
func endAttempt(resp *http.Response, err error, cancel context.CancelFunc) {
	switch {
	case cancel == nil:
	case err != nil:
		cancel()
	case resp.StatusCode != http.StatusSwitchingProtocols:
		resp.Body = &cancelBody{resp.Body, cancel}
	}
}

// roundTrip makes one attempt: req through base, its body watched by w (nil
// for none). A response with a nil Body, which breaks the RoundTripper
// contract but which net/http's Client reads as empty
// (golang.org/issue/38095), gets http.NoBody, so that nothing the Transport
// or its caller does with the body panics. An error after the body failed
// to read is a *bodyError, unless ctx ended: a body that fails as the caller
// gives up (a reader tied to its context) is the caller giving up.
func roundTrip(ctx context.Context, base http.RoundTripper, req *http.Request, w *bodyWatch) (*http.Response, error) {
	resp, err := base.RoundTrip(req)
	switch {
	case err != nil:
		if berr := w.failure(); berr != nil && ctx.Err() == nil {
			return resp, &bodyError{berr}
		}
		return resp, err
	case resp == nil:
		return nil, errNoResponse
	case resp.Body == nil:
		resp.Body = http.NoBody
	}
	return resp, nil
}

// vet applies the Transport's own rules to a failed attempt before the
// strategy is asked for a retry, the cheapest and most certain first, so
// that a retry they refuse costs the quota nothing. It builds the next
// attempt's request.
func (l *loop) vet(ctx context.Context, _ int, err error) error {
	switch {
	case err == errAnswered:
		return err
	case l.kind == 0:
		return retry.ErrNotRetryable
	}
	l.failures = append(l.failures, Failure{Attempt: l.attempts, Kind: l.kind, Response: l.last.Response, Err: l.last.Err})
	if !l.info.Retryable() {
		if !l.body.replayable(l.kind) && l.t.idempotentOrConnect(l.first, l.kind) {
			return l.body.why()
		}
		return retry.ErrNotRetryable
	}
	if l.kind == KindStatus && !l.t.Independent && retry.CallerRetries(ctx) {
		return retry.ErrOuterLoop // the caller gets the response, and retries it or not
	}
	if l.t.Retries > 0 && l.attempts > l.t.Retries {
		return retry.ErrMaxAttempts
	}
	next, err := l.nextRequest(l.kind)
	if err != nil {
		return err
	}
	l.next = next
	if l.t.Limiter != nil && !l.t.Limiter.Allow(l.failures, next) {
		return ErrLimited
	}
	if limit := l.t.maxRetryAfter(); l.info.RetryAfter > limit {
		return &retry.RetryAfterError{RetryAfter: l.info.RetryAfter, Max: limit}
	}
	return nil
}

// retrying runs when a retry is granted, before the wait: the failed
// response is drained so that its connection goes back to the pool during
// the wait, in at most half the time the wait leaves before the deadline,
// and what was read of its body is kept, bounded as the drain is, for a
// retry refused after the wait.
func (l *loop) retrying(ctx context.Context, _ int, delay time.Duration, _ error) {
	a := l.last
	a.Retry, a.Delay = true, delay
	l.notify(a)
	l.waited = true
	if resp := l.last.Response; resp != nil {
		within := time.Duration(-1) // no deadline
		if deadline, ok := ctx.Deadline(); ok {
			within = (time.Until(deadline) - delay) / 2
		}
		l.drained, l.kept = resp, drain(resp, within)
	}
}

// gaveUp runs when the loop stops with an error: the next request, built
// but never sent, has its body closed (a RoundTripper closes the body, even
// on errors).
func (l *loop) gaveUp(_ context.Context, e *retry.Error) {
	l.reason = e.Reason
	if e.Err == errAnswered {
		l.reason = nil // not a failure: the response is the answer
	}
	if l.next != nil {
		if l.attempts == 0 && l.body.guard != nil {
			_ = l.body.guard.Close() // never sent, so the transport never closed it
		}
		closeBody(l.next, l.body.guard)
		l.next = nil
	}
	if l.attempts > 0 && !l.waited {
		a := l.last
		a.Reason = l.reason
		l.notify(a)
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
	if h := l.t.attemptHeader(); h != "" {
		next.Header.Set(h, strconv.Itoa(l.attempts+1))
	}
	return next, nil
}

// errorInfo classifies a transport failure of the given kind.
func (l *loop) errorInfo(kind Kind, timeout bool) retry.Info {
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
	var retryAfter bool
	if t.obeysRetryAfter(resp.StatusCode) {
		info.RetryAfter, _, retryAfter = responseWait(resp.Header, time.Now())
	}
	if safe {
		info.Safety = retry.Safe
		// A valid Retry-After the Transport obeys is the server saying when
		// to come back (RFC 9110, section 10.2.3), Retry-After: 0 included:
		// the server's permission, which retry.Adaptive honours even on a
		// 504, a timeout it may otherwise refuse as a sign of overload.
		// Only a request that may be repeated gets it: Unsafe is never
		// retried, and Allowed on it would claim a retry that cannot
		// happen. An invalid Retry-After, the rate-limit fields alone, or a
		// header on a status not in RetryAfterStatuses are no permission.
		info.Allowed = retryAfter
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
// that is not retryable, and so is one the Transport found to be the
// request's own body failing to read, which blames the client. info.Allowed is set as the Transport sets it for
// its own attempts: for a response with a valid Retry-After that t obeys,
// when the request may be repeated; never for a transport error, since no
// server said anything.
func (t *Transport) Classify(resp *http.Response, err error, idempotent bool) (info retry.Info, failed bool) {
	if err != nil {
		if be := (*bodyError)(nil); errors.As(err, &be) {
			return be.RetryInfo(), true // the request's own body failed
		}
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
