package forrst

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/retrykit/retry"
	"github.com/retrykit/retry/httpretry"
)

// Client calls the functions of a Forrst server and retries failed calls
// through a retry.Strategy, following the server's retry guidance within the
// client's own limits:
//
//   - guidance with "allowed": false stops at once;
//   - immediate, fixed and exponential (after × 2^(n-1) before retry n) set
//     the least wait before the next attempt, and the rate-limit extension's
//     resets_in and the Retry-After header can only lengthen it;
//   - max_attempts, a number of retries, can only lower the attempt limit
//     (of the client's own retries: see Independent for a caller's loop).
//
// The strategy's limits always win: a server can make the client wait longer
// or stop sooner, never retry more often, sooner, or past the strategy's
// MaxRetryAfter. A wait too long for a time.Duration (an after, a
// retry_after or a Retry-After of 292 years or more) is longer than that cap,
// not invalid, and so is an after in a unit the client does not know: the
// call stops at once with a *retry.RetryAfterError as its reason. An after in
// hours or days is the wait it says. Without guidance, a failed call is
// judged by the extension's default table for its code; guidance the client
// cannot read (see Extension.Retry) is replaced by the table too, but its
// after, read as well as it can be, is still the least wait, and its
// "allowed": false still stops retrying. A failure that is not a Forrst
// response at all (a refused connection, a proxy's 502) is judged by the HTTP
// transport's rules, and so is an answer cut off halfway through its
// document (the connection reset after the headers): it was lost, not
// malformed, so a call with a key is retried, and the error's chain holds
// the cause (errors.Is(err, syscall.ECONNRESET)). Over a retrying transport
// (an httpretry.Transport in HTTPClient), the transport retries the failures
// it sees, such as a refused connection, and a keyed call's lost answer
// too, since the call's POST carries its key in an Idempotency-Key header
// as well; the client does not retry a give-up after several of its
// attempts again: the layers' attempts do not multiply. A give-up after the
// transport's one attempt that decided nothing (its retries off, its
// attempt's deadline, a failure it would not repeat) is judged by the
// client.
//
// Guidance the server sent with "allowed": true, and a Retry-After header,
// are the server's permission to retry (retry.Info.Allowed), which the
// default strategy, retry.Adaptive, honours where it would otherwise refuse
// a timeout for fear of overload: a DEADLINE_EXCEEDED whose guidance allows
// a retry, as the retry extension's "Immediate Retry Allowed" example does,
// is retried. The default table is the client's own reading and gives no
// such permission.
//
// Every call carries an idempotency key, the same on every attempt, unless
// NoIdempotencyKey is set: on a server that honours the key, a retry whose
// call already finished (its answer lost on the way) gets the stored outcome
// replayed, and does not run the function again. The key does not make a
// failure the server lets the client retry (INTERNAL_ERROR, DEPENDENCY_ERROR,
// ...) safe to repeat: the Forrst idempotency extension replays cached
// results, and this package's Server stores no such failure, so the retry
// runs the function again, and the server's guidance that allows it is its
// word that the function left nothing behind (see Server). Without a key, a
// failure after which the function may have run (INTERNAL_ERROR,
// DEPENDENCY_ERROR, DEADLINE_EXCEEDED, a service's own codes) is not
// retried, whatever the guidance says.
//
// The zero value is not usable: URL must be set. A Client is safe for
// concurrent use and must not be copied after first use.
type Client struct {
	URL              string         // the server's endpoint
	HTTPClient       *http.Client   // nil = http.DefaultClient; a retrying transport (httpretry.Transport) leaves answered failures to the client
	Strategy         retry.Strategy // nil = a retry.Adaptive owned by the client
	NoIdempotencyKey bool           // do not add idempotency keys to calls
	MaxDocumentSize  int64          // bound on response documents; 0 = 1 MiB
	Options          []retry.Option // options for every call's retry.Do (hooks, logging, a retry.Trace)
	// Independent makes the client retry a server's failed answer itself
	// even when its caller retries too (retry.CallerRetries). By default it
	// then makes one attempt for an answered failure and leaves its retry to
	// the caller, so that the two layers do not multiply. The caller's loop
	// then judges the failure with its own strategy and limits: the
	// guidance's "allowed", its wait and Retry-After reach it, but not
	// max_attempts, which the Client cannot hold across attempts it does
	// not make (each of the caller's attempts is a Call of its own). A
	// caller's loop holds it only with ServerLimit among its options; an
	// Independent client holds it itself, and its give-up is not retried
	// by the caller.
	Independent bool
	// Breaker, if set, is a circuit breaker (see retry.Breaker) that every
	// attempt consults first, scoped by URL, the scope of the call's retry
	// quota, and that counts how each attempt went: an answer with a 5xx
	// status or a server's code (UNAVAILABLE, INTERNAL_ERROR, ..., even in
	// a 200), a refused or reset connection and a timeout count as
	// failures, a client fault
	// (INVALID_ARGUMENT, NOT_FOUND, ...), RATE_LIMITED and the caller's own
	// cancellation as neither. While the circuit is open, Call sends
	// nothing and returns a *retry.Error whose Reason is
	// retry.ErrCircuitOpen. Share one Breaker per server, across Clients
	// that call it. A retry.WithBreaker in Options replaces it.
	Breaker *retry.Breaker

	once     sync.Once
	strategy retry.Strategy
	http     httpretry.Transport // only its classification of HTTP failures is used
}

// CallOption changes one call.
type CallOption func(*callConfig)

type callConfig struct {
	key     string
	version string
}

// IdempotencyKey sets the call's idempotency key instead of a generated one,
// for example to make a call that may be repeated later, by another process,
// run once.
func IdempotencyKey(key string) CallOption { return func(c *callConfig) { c.key = key } }

// Version calls the given version of the function instead of the latest.
func Version(v string) CallOption { return func(c *callConfig) { c.version = v } }

// Call calls function with args (encoded as a JSON object; nil for none) and
// decodes its result into result (unless result is nil). A call that fails
// for good returns a *retry.Error wrapping the last failure, a *CallError when
// the server answered: errors.As(err, &callErr) gives its code, message and
// guidance, and errors.As(err, &forrstErr) the *Error itself.
func (c *Client) Call(ctx context.Context, function string, args, result any, opts ...CallOption) error {
	c.once.Do(func() {
		s := c.Strategy
		if s == nil {
			s = retry.NewAdaptive(retry.AdaptiveOptions{})
		}
		c.strategy = s
	})
	var cfg callConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.key == "" && !c.NoIdempotencyKey {
		cfg.key = "call_" + rand.Text()
	}
	var rawArgs json.RawMessage
	if args != nil {
		var err error
		if rawArgs, err = json.Marshal(args); err != nil {
			return fmt.Errorf("forrst: encoding the arguments of %s: %w", function, err)
		}
		if !isObjectOrNull(rawArgs) {
			return fmt.Errorf("forrst: the arguments of %s must encode as a JSON object", function)
		}
	}
	var ext []Extension
	if cfg.key != "" {
		if err := validKey(cfg.key); err != nil {
			return err
		}
		options, _ := json.Marshal(IdempotencyOptions{Key: cfg.key})
		ext = []Extension{{URN: URNIdempotency, Options: options}}
	}
	attempt := 0
	op := func(ctx context.Context) error {
		attempt++
		req := Request{
			Protocol:   current(),
			ID:         "req_" + rand.Text(),
			Call:       Call{Function: function, Version: cfg.version, Arguments: rawArgs},
			Extensions: ext,
		}
		return c.attempt(ctx, &req, attempt, cfg.key, result)
	}
	ropts := append([]retry.Option{retry.Scope(c.URL), retry.BeforeRetry(serverLimit), retry.WithBreaker(c.Breaker)}, c.Options...)
	if !c.Independent {
		ropts = append(ropts, retry.BeforeRetry(leaveAnswersToCaller))
	}
	return retry.Do(ctx, c.strategy, op, ropts...)
}

// attempt sends one request and judges the answer.
func (c *Client) attempt(ctx context.Context, req *Request, attempt int, key string, result any) error {
	keyed := key != ""
	body, err := json.Marshal(req)
	if err != nil {
		return retry.Permanent(err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return retry.Permanent(err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	if keyed {
		// A retrying transport repeats a POST that carries a key (IETF
		// draft-ietf-httpapi-idempotency-key-header) itself, within its
		// own attempts, rather than leaving it to this client's loop,
		// which would multiply the layers' attempts.
		hreq.Header.Set(httpretry.IdempotencyKeyHeader, key)
	}
	if attempt > 1 {
		hreq.Header.Set(httpretry.RetryAttemptHeader, strconv.Itoa(attempt)) // see httpretry.Handler
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(hreq)
	if err != nil {
		cause := err
		if e := (*retry.Error)(nil); errors.As(err, &e) {
			if decidedBelow(e) {
				return err // classified by package retry: not retried again
			}
			if e.Err != nil {
				cause = e.Err // the transport's last failure, which a *url.Error around its give-up hides
			}
		}
		info, _ := c.http.Classify(nil, cause, keyed)
		return retry.WithInfo(err, info)
	}
	defer resp.Body.Close()
	var doc *Response
	err = contentType(resp.Header)
	if err == nil {
		body := &bodyReader{r: resp.Body}
		doc, err = DecodeResponse(body, c.MaxDocumentSize)
		if body.err != nil {
			return c.lostAnswer(req.Call.Function, resp, body.err, keyed)
		}
	}
	if err == nil {
		err = answers(doc, req.ID)
	}
	if err != nil {
		// Not a Forrst answer to this request: judge it as HTTP.
		herr := &HTTPError{StatusCode: resp.StatusCode, Status: resp.Status, Err: err}
		if info, failed := c.http.Classify(resp, nil, keyed); failed {
			return retry.WithInfo(herr, info)
		}
		return retry.Permanent(herr)
	}
	if len(doc.Errors) == 0 {
		if result == nil || isNull(doc.Result) {
			return nil
		}
		if err := json.Unmarshal(doc.Result, result); err != nil {
			return retry.Permanent(fmt.Errorf("forrst: decoding the result of %s: %w", req.Call.Function, err))
		}
		return nil
	}
	return newCallError(req.Call.Function, doc, resp, attempt, keyed)
}

// decidedBelow reports whether e is the give-up of a retry loop in the HTTP
// client's transport (an httpretry.Transport) that decided the failure's
// fate: it made more than one attempt (a keyed call's POST carries its key
// in an Idempotency-Key header, so the transport repeats a lost answer
// itself), or stopped for a reason of its own (its quota, a breaker, a wait
// too long). Retrying that again would start another loop of the
// transport's attempts, multiplying the layers', so it is left to package
// retry, which classifies such a *retry.Error as Unsafe. A loop that made
// its one attempt and found it not retryable, ended with the attempt's
// context (the client's AttemptTimeout, which the client's loop judges),
// allows no retries (Retries < 0) or left it to its caller, decided nothing
// this client cannot judge better.
func decidedBelow(e *retry.Error) bool {
	if e.Attempts != 1 {
		return true
	}
	switch {
	case errors.Is(e.Reason, retry.ErrNotRetryable), // the client knows the key
		errors.Is(e.Reason, context.DeadlineExceeded), errors.Is(e.Reason, context.Canceled), // the client's loop judges its deadline
		errors.Is(e.Reason, retry.ErrMaxAttempts), e.Reason == retry.ErrOuterLoop: // retries off, or left to the caller
		return false
	}
	return true
}

// lostAnswer judges an answer whose body could not be read whole (the
// connection was reset halfway through the document, say): it was lost on
// its way, not malformed, so it is a read failure, which the HTTP transport
// retries when the call may be repeated (a keyed call: the server replays
// the stored result). A failed status, which arrived whole, is judged as the
// transport judges it, so that the wait its headers ask for (Retry-After)
// and their throttling still hold.
func (c *Client) lostAnswer(function string, resp *http.Response, err error, keyed bool) error {
	info, failed := c.http.Classify(resp, nil, keyed)
	if !failed {
		info, _ = c.http.Classify(nil, err, keyed)
	}
	return retry.WithInfo(fmt.Errorf("forrst: reading the answer to %s (HTTP %s): %w", function, resp.Status, err), info)
}

// bodyReader keeps the error that ended the reading of an answer's body,
// other than its end.
type bodyReader struct {
	r   io.Reader
	err error
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.err = err
	}
	return n, err
}

// Errors of answers that are not this call's Forrst response: an
// *HTTPError wraps one of them, or one of the decoding errors (ErrMalformed,
// ErrInvalid, ErrTooLarge).
var (
	// ErrContentType: the answer's Content-Type is not JSON, so it is not a
	// Forrst document whatever its body (the Forrst HTTP transport answers
	// with application/json).
	ErrContentType = errors.New("forrst: the answer's Content-Type is not JSON")
	// ErrIDMismatch: the answer is a Forrst document about another request:
	// its id is not the one sent. It wraps ErrInvalid.
	ErrIDMismatch = fmt.Errorf("%w: the answer's id is not the request's", ErrInvalid)
)

// contentType checks that an answer is JSON: application/json, or a type
// with the +json suffix of RFC 6839. An answer without a Content-Type is not.
func contentType(h http.Header) error {
	v := h.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(v)
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return fmt.Errorf("%w: Content-Type %q", ErrContentType, v)
	}
	return nil
}

// answers checks that doc answers the request with the given id. A failure
// with no id answers it too: the protocol sends a null id when the server
// could not read the request's.
func answers(doc *Response, id string) error {
	if doc.ID == id || (doc.ID == "" && len(doc.Errors) > 0) {
		return nil
	}
	got := "null"
	if doc.ID != "" {
		got = strconv.Quote(doc.ID)
	}
	return fmt.Errorf("%w: sent %q, the answer has %s", ErrIDMismatch, id, got)
}

// HTTPError is an answer that is not a Forrst response document, or not one
// that answers the request sent. It is judged by its HTTP status alone.
type HTTPError struct {
	StatusCode int
	Status     string
	Err        error // why it is not this call's Forrst answer
}

// Error says the status and why the answer was not a Forrst document.
func (e *HTTPError) Error() string { return "forrst: HTTP " + e.Status + ": " + e.Err.Error() }

// Unwrap returns why the answer was not a Forrst document.
func (e *HTTPError) Unwrap() error { return e.Err }

// CallError is a call the server answered with errors. It classifies itself
// (RetryInfo) from the server's retry guidance, so any retry.Strategy can
// consume it. The classification is retry.Info.Allowed when the server
// itself allowed the retry (guidance it sent with "allowed": true, or a
// valid Retry-After header) and the call may be repeated; guidance taken
// from the default table (FromServer false) is not the server's word.
type CallError struct {
	Function   string
	StatusCode int       // the HTTP status
	Err        Error     // the first error
	Response   *Response // the whole answer
	Guidance   RetryData // the server's guidance; without one retry extension Retry can read (none, one it refuses, or two), the default table's for the code ({"allowed": false} if any guidance sent said so)
	FromServer bool      // whether Guidance came from the server's retry extension

	info retry.Info
}

// Error names the function, the code and the message.
func (e *CallError) Error() string {
	return "forrst: " + e.Function + " failed: " + e.Err.Error()
}

// Unwrap returns the first *Error of the answer.
func (e *CallError) Unwrap() error { return &e.Err }

// RetryInfo reports the failure's classification from the guidance.
func (e *CallError) RetryInfo() retry.Info { return e.info }

// newCallError judges a failed answer to attempt number attempt.
func newCallError(function string, doc *Response, resp *http.Response, attempt int, keyed bool) *CallError {
	ce := &CallError{Function: function, StatusCode: resp.StatusCode, Err: doc.Errors[0], Response: doc}
	code := ce.Err.Code
	ce.Guidance = DefaultGuidance(code)
	// Guidance that asks for a wait too long for a time.Duration, or in
	// hours or days, is not broken (Retry reads it as the wait it says): one
	// beyond the strategy's MaxRetryAfter stops retrying at once. Guidance
	// Retry refuses is replaced by the table, and so are two retry
	// extensions, which say two things about retrying and so neither (as a
	// member given twice does). Such guidance still never makes the client
	// retry sooner than it asks, nor at all if it refuses: each after is a
	// least wait, read as well as it can be, an unknown unit as longer than
	// any cap, and one of two that Retry reads waits as it says.
	exts := findAll(doc.Extensions, URNRetry)
	var floor time.Duration // the least wait guidance the client cannot follow asks for
	for _, ext := range exts {
		g, err := ext.Retry()
		if err == nil && len(exts) == 1 {
			ce.Guidance, ce.FromServer = g, true
			break
		}
		wait, refused := guidanceFloor(ext.Data)
		if err == nil {
			wait = max(wait, g.Wait(attempt))
		}
		floor = max(floor, wait)
		if refused {
			ce.Guidance = RetryData{Allowed: false}
		}
	}
	info := retry.Info{Safety: retry.Unsafe, Fault: retry.FaultClient, Throttle: code == CodeRateLimited, Timeout: code == CodeDeadlineExceeded}
	// The code's own status too: a gateway that answers every call with 200
	// says UNAVAILABLE in the document alone. A code of the application's,
	// which the Forrst codes do not list, reads as 400 and blames nobody.
	if resp.StatusCode >= 500 || code.HTTPStatus() >= 500 {
		info.Fault = retry.FaultServer
	}
	if ce.Guidance.Allowed && (keyed || !code.mayHaveRun()) {
		info.Safety = retry.Safe
		wait, retryAfter := serverWait(doc, resp)
		info.RetryAfter = max(ce.Guidance.Wait(attempt), wait, floor)
		// The server's own permission, which retry.Adaptive honours even on
		// a DEADLINE_EXCEEDED, a timeout it may otherwise refuse as a sign
		// of overload: the retry extension's "allowed": true as the server
		// sent it, or a Retry-After header, which this branch obeys (RFC
		// 9110, section 10.2.3). The default table is the client's reading of a code, not
		// the server's word about this call, so it is no permission alone.
		// Inside this branch only: a call that must not be repeated (no key
		// and a code after which the function may have run) is Unsafe, and
		// Allowed on it would promise a retry that cannot happen.
		info.Allowed = ce.FromServer || retryAfter
	}
	ce.info = info
	return ce
}

// serverWait is the longest wait the answer asks for besides the retry
// guidance: the reset of a used-up rate-limit window (of any scope, in the
// multi-scope form), the error's retry_after, and every Retry-After header
// line. Invalid values are ignored; a wait too long for a time.Duration is
// not invalid: it saturates to the longest Duration, so that it exceeds the
// strategy's MaxRetryAfter and stops retrying at once (a longer hint never
// yields a sooner retry). retryAfter reports whether a header line was a
// valid Retry-After, which HTTP defines as the server saying when to send
// the request again (RFC 9110, section 10.2.3): a permission as well as a
// wait. The other two are waits only: a window's reset says when the
// caller's quota returns, and in Forrst whether a call may be repeated is
// the retry guidance's "allowed", not an error's retry_after.
func serverWait(doc *Response, resp *http.Response) (wait time.Duration, retryAfter bool) {
	if ext, ok := doc.Extension(URNRateLimit); ok {
		if windows, err := ext.RateLimits(); err == nil {
			wait = resetWait(windows)
		} else {
			wait = overlongReset(ext.Data)
		}
	}
	var details struct {
		RetryAfter *wireDuration `json:"retry_after"`
	}
	if !isNull(doc.Errors[0].Details) && json.Unmarshal(doc.Errors[0].Details, &details) == nil && details.RetryAfter != nil {
		if d, ok := details.RetryAfter.wait(); ok {
			wait = max(wait, d)
		}
	}
	for _, v := range resp.Header.Values("Retry-After") {
		if d, ok := httpretry.ParseRetryAfter(v, time.Now()); ok {
			wait, retryAfter = max(wait, d), true
		}
	}
	return wait, retryAfter
}

// overlongReset reads rate-limit data that RateLimits refused for the one
// reason that must not shorten a wait: a used-up window (remaining 0) whose
// resets_in is too long for a time.Duration. Such a window asks for the
// longest wait; anything else in refused data is ignored, as before.
func overlongReset(data json.RawMessage) time.Duration {
	var multi struct {
		Scopes map[string]json.RawMessage `json:"scopes"`
	}
	windows := []json.RawMessage{data}
	if json.Unmarshal(data, &multi) == nil && multi.Scopes != nil {
		windows = slices.Collect(maps.Values(multi.Scopes))
	}
	for _, raw := range windows {
		var w struct {
			Remaining *int64       `json:"remaining"`
			ResetsIn  wireDuration `json:"resets_in"`
		}
		if json.Unmarshal(raw, &w) != nil || w.Remaining == nil || *w.Remaining != 0 {
			continue
		}
		if d, ok := w.ResetsIn.wait(); ok && d == math.MaxInt64 {
			return d
		}
	}
	return 0
}

// leaveAnswersToCaller makes one attempt of a call whose caller retries
// (retry.CallerRetries) when the server answered with a failure: the caller
// judges that answer and retries it or not, so that the layers' retries do
// not multiply. Failures with no answer (a refused connection, a reset) are
// still retried here, where they can be seen.
func leaveAnswersToCaller(ctx context.Context, _ int, err error) error {
	var ce *CallError
	if retry.CallerRetries(ctx) && errors.As(err, &ce) {
		return retry.ErrOuterLoop
	}
	return nil
}

// ErrServerLimit is the reason retrying stopped when the server's
// max_attempts allowed no more retries. It wraps retry.ErrMaxAttempts.
var ErrServerLimit = fmt.Errorf("%w: the server's max_attempts allows no more retries", retry.ErrMaxAttempts)

// ServerLimit returns an option for a retry loop of the caller's own around
// Call (retry.Do), which holds that loop to the server's max_attempts as the
// Client holds its own: a retry beyond it is refused, and the loop gives up
// with ErrServerLimit. The Client leaves an answered failure to such a loop
// after one attempt (see Client.Independent), and the retry.Info the loop
// judges it by carries the guidance's permission and wait but no attempt
// limit, so without this option the caller's own limit is the only one. The
// operation must return the Call's error, or wrap it with %w, for the option
// to find the guidance.
func ServerLimit() retry.Option { return retry.BeforeRetry(serverLimit) }

// serverLimit refuses a retry beyond the server's max_attempts, before the
// strategy is asked: the server may lower the attempt limit, never raise
// it, and a retry it refuses costs the strategy's quota nothing.
func serverLimit(_ context.Context, attempt int, err error) error {
	var ce *CallError
	if errors.As(err, &ce) && ce.Guidance.Allowed && ce.Guidance.MaxAttempts > 0 && attempt-1 >= ce.Guidance.MaxAttempts {
		return fmt.Errorf("%w (%s)", ErrServerLimit, strconv.Itoa(ce.Guidance.MaxAttempts)+" retries")
	}
	return nil
}
