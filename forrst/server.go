package forrst

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// Function is a function a Server serves. It receives the call's arguments
// (a JSON object, or nil) and returns a value to encode as the result, or an
// error. An *Error becomes the response's error as it is; any other error
// becomes INTERNAL_ERROR with a generic message, so that internal details do
// not leak to callers. A value that cannot be encoded as JSON becomes
// INTERNAL_ERROR whose guidance forbids a retry, since the function ran and
// would run again (with an idempotency key, it is the call's stored outcome).
// A function that returns its context's error stopped because the caller
// left: with a key that is not stored, and a retry runs the function again,
// so one that has acted in part must finish or undo that part first.
type Function func(ctx context.Context, args json.RawMessage) (any, error)

// Error is one error of a failed call, as sent on the wire. It is also a Go
// error: a Function returns one to fail with a given code.
func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return string(e.Code) + ": " + e.Message
}

// Fail returns an *Error with the given code and message, for a Function to
// return.
func Fail(code Code, message string) *Error { return &Error{Code: code, Message: message} }

// FunctionOption configures one registered function.
type FunctionOption func(*function)

// WithGuidance replaces the retry guidance the function's failures with this
// code carry (the Forrst retry extension's "Server Customization"). It beats
// the default table but not guidance attached to one error with GuidanceFor.
// It panics if d is not valid guidance (see RetryData.Validate), as it is a
// mistake in the program, not in its input.
func WithGuidance(code Code, d RetryData) FunctionOption {
	if err := d.Validate(); err != nil {
		panic(fmt.Sprintf("forrst: WithGuidance(%s): %v", code, err))
	}
	return func(f *function) {
		if f.guidance == nil {
			f.guidance = make(map[Code]RetryData)
		}
		f.guidance[code] = d
	}
}

// GuidanceFor attaches retry guidance to one error: the response that carries
// it gets exactly this guidance, or the default table's if d is not valid.
func GuidanceFor(err *Error, d RetryData) *Error {
	return &Error{Code: err.Code, Message: err.Message, Source: err.Source, Details: err.Details, guidance: &d}
}

type function struct {
	fn       Function
	guidance map[Code]RetryData
}

// Server serves registered functions over the Forrst HTTP transport: JSON
// documents POSTed to it. It attaches the retry extension to every failed
// response (the default table of the extension, or the function's or the
// error's own guidance), the rate-limit extension when it has a RateLimiter,
// and honours the idempotency extension: a call repeated with the same key
// and arguments returns the stored result without running the function
// again. A call whose caller hung up before its answer keeps its outcome
// too: a success is stored, and the caller's retry gets it replayed; only a
// failure that is the caller's going away (CANCELLED, or the function
// returning its context's error) is forgotten, so that the retry runs it.
// A failure whose guidance allows a retry (INTERNAL_ERROR, UNAVAILABLE and
// the other codes of the default table, or guidance of the function's) is
// not stored either: a keyed retry runs the function again. So a function
// that can fail that way after acting in part must undo its part first, or
// fail with guidance that forbids the retry (GuidanceFor with "allowed":
// false), which is stored and replayed like a result.
//
// Register functions before serving; a Server is then safe for concurrent
// use. It must not be copied after first use.
type Server struct {
	// RateLimit, if set, limits each caller's calls.
	RateLimit *RateLimiter
	// MaxDocumentSize bounds request documents; 0 = 1 MiB.
	MaxDocumentSize int64
	// IdempotencyTTL is how long a result is kept for its key when the
	// request names no ttl; 0 = 24 hours.
	IdempotencyTTL time.Duration
	// MaxIdempotencyKeys bounds the results kept; 0 = 10000.
	MaxIdempotencyKeys int

	mu        sync.RWMutex
	functions map[string]*function
	keys      store
}

// Register serves fn under name. Registering a name again replaces it.
func (s *Server) Register(name string, fn Function, opts ...FunctionOption) {
	f := &function{fn: fn}
	for _, o := range opts {
		o(f)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.functions == nil {
		s.functions = make(map[string]*function)
	}
	s.functions[name] = f
}

// answer is a response on its way out.
type answer struct {
	status    int
	header    http.Header
	doc       Response
	retryable bool // a failure whose guidance allows a retry
	abandoned bool // a failure that is the caller's leaving: the function returned its context's error
}

// ServeHTTP handles one Forrst request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if httpretry.Resent(r) {
		// The caller retries: the function's own calls through retrykit
		// leave to it what it will retry (see retry.CallerRetries).
		ctx, done := retry.WithCallerRetries(r.Context())
		defer done()
		r = r.WithContext(ctx)
	}
	a := s.serve(r)
	h := w.Header()
	for k, v := range a.header {
		h[k] = v
	}
	h.Set("Content-Type", "application/json")
	body, err := encode(a.doc)
	if err != nil { // a result that cannot be encoded
		a = s.fail(nil, nil, Fail(CodeInternalError, "the result could not be encoded"), time.Now())
		body, _ = json.Marshal(a.doc)
	}
	w.WriteHeader(a.status)
	_, _ = w.Write(body)
}

func (s *Server) serve(r *http.Request) answer {
	now := time.Now()
	if r.Method != http.MethodPost {
		a := s.fail(nil, nil, Fail(CodeInvalidRequest, "Forrst requests are POSTed"), now)
		a.status = http.StatusMethodNotAllowed
		a.header = http.Header{"Allow": {http.MethodPost}}
		return a
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		a := s.fail(nil, nil, Fail(CodeInvalidRequest, "Content-Type must be application/json"), now)
		a.status = http.StatusUnsupportedMediaType
		return a
	}
	limit := s.MaxDocumentSize
	if limit <= 0 {
		limit = DefaultMaxDocumentSize
	}
	req, err := DecodeRequest(r.Body, limit)
	switch {
	case errors.Is(err, ErrTooLarge):
		a := s.fail(nil, nil, Fail(CodeInvalidRequest, err.Error()), now)
		a.status = http.StatusRequestEntityTooLarge
		return a
	case errors.Is(err, ErrMalformed):
		return s.fail(nil, nil, Fail(CodeParseError, err.Error()), now)
	case err != nil:
		return s.fail(nil, nil, Fail(CodeInvalidRequest, err.Error()), now)
	}
	if !strings.HasPrefix(req.Protocol.Version, "0.1.") && req.Protocol.Version != "0.1" {
		return s.fail(req, nil, Fail(CodeInvalidProtocolVersion, "supported version: "+ProtocolVersion), now)
	}
	s.mu.RLock()
	f := s.functions[req.Call.Function]
	s.mu.RUnlock()
	if f == nil {
		return s.fail(req, nil, Fail(CodeFunctionNotFound, "no function "+strconv.Quote(req.Call.Function)), now)
	}

	var extra []Extension
	if s.RateLimit != nil {
		window, allowed := s.RateLimit.take(r, now)
		extra = append(extra, window.extension())
		if !allowed {
			return s.rateLimited(req, f, window, extra, now)
		}
	}
	var opts IdempotencyOptions
	if ext, ok := req.Extension(URNIdempotency); ok {
		if opts, err = ext.IdempotencyOptions(); err != nil {
			return s.fail(req, f, Fail(CodeInvalidArguments, err.Error()), now, extra...)
		}
	}
	if opts.Key == "" {
		return s.run(r.Context(), req, f, now, extra)
	}
	return s.runOnce(r.Context(), req, f, opts, now, extra)
}

// run calls the function and builds the answer.
func (s *Server) run(ctx context.Context, req *Request, f *function, now time.Time, extra []Extension) answer {
	args := req.Call.Arguments
	if isNull(args) {
		args = nil
	}
	result, err := call(ctx, f.fn, args)
	if err != nil {
		a := s.fail(req, f, err, now, extra...)
		a.abandoned = ctx.Err() != nil && errors.Is(err, ctx.Err())
		return a
	}
	raw, merr := encode(result)
	if merr != nil {
		// The function ran, and would run again, with its effects and the
		// same result: a retry mends nothing. With a key, this answer is
		// the call's stored outcome.
		e := GuidanceFor(Fail(CodeInternalError, "the function ran, but its result could not be encoded"), RetryData{Allowed: false})
		return s.fail(req, f, e, now, extra...)
	}
	return answer{status: http.StatusOK, doc: Response{Protocol: current(), ID: req.ID, Result: raw, Extensions: extra}}
}

// runOnce runs a call with an idempotency key at most once per key.
func (s *Server) runOnce(ctx context.Context, req *Request, f *function, opts IdempotencyOptions, now time.Time, extra []Extension) answer {
	ttl := s.IdempotencyTTL
	if ttl <= 0 {
		ttl = 24 * time.Hour
	}
	if opts.TTL != nil {
		ttl, _ = opts.TTL.Duration() // checked when the options were decoded
	}
	limit := s.MaxIdempotencyKeys
	if limit <= 0 {
		limit = 10000
	}
	version := req.Call.Version
	if version == "" {
		version = "latest"
	}
	id := req.Call.Function + "\x00" + version + "\x00" + opts.Key
	hash := argumentsHash(req.Call.Arguments)
	outcome, e := s.keys.claim(id, hash, req.ID, now, ttl, limit)
	data := IdempotencyData{Key: opts.Key, OriginalRequestID: e.requestID, ExpiresAt: e.expires.UTC().Format(time.RFC3339)}
	switch outcome {
	case replay:
		data.Status, data.CachedAt = StatusCached, e.cachedAt.UTC().Format(time.RFC3339)
		doc := e.resp
		doc.ID = req.ID
		// A new slice: the stored one is shared by every replay.
		doc.Extensions = slices.Concat(doc.Extensions, extra, []Extension{data.extension()})
		return answer{status: e.status, header: retryAfterHeader(e.status, doc), doc: doc}
	case processing:
		details, _ := json.Marshal(map[string]any{"key": opts.Key, "retry_after": Duration{Value: 1, Unit: Second}})
		return s.fail(req, f, &Error{Code: CodeIdempotencyProcessing, Message: "a call with this idempotency key is still running", Details: details}, now, extra...)
	case conflict:
		data.Status = StatusConflict
		details, _ := json.Marshal(map[string]any{"key": opts.Key, "original_arguments_hash": e.hash})
		return s.fail(req, f, &Error{Code: CodeIdempotencyConflict, Message: "the idempotency key was used with other arguments", Details: details}, now, append(extra, data.extension())...)
	case full:
		return s.fail(req, f, Fail(CodeUnavailable, "too many idempotency keys in use"), now, extra...)
	}
	finished := false
	defer func() {
		if !finished { // a panic on the way: never leave the key claimed
			s.keys.abandon(id)
		}
	}()
	a := s.run(ctx, req, f, now, nil)
	// A failure worth retrying, or one that is the caller's going away, is
	// not the call's outcome: a retry must run the function again. Anything
	// else is, even when the caller has gone meanwhile: a success's effects
	// are done, and its answer lost is what the key is for.
	if a.retryable || a.abandoned || (ctx.Err() != nil && len(a.doc.Errors) > 0 && a.doc.Errors[0].Code == CodeCancelled) {
		s.keys.abandon(id)
	} else {
		s.keys.finish(id, a.status, a.doc, time.Now())
	}
	finished = true
	data.Status = StatusProcessed
	a.doc.Extensions = append(append(a.doc.Extensions, extra...), data.extension())
	return a
}

// encode marshals a function's result, turning a panic (a MarshalJSON
// method that panics) into an error.
func encode(v any) (raw json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			raw, err = nil, fmt.Errorf("encoding panicked: %v", p)
		}
	}()
	return json.Marshal(v)
}

// call runs fn, turning a panic into INTERNAL_ERROR.
func call(ctx context.Context, fn Function, args json.RawMessage) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			result, err = nil, Fail(CodeInternalError, "internal error")
		}
	}()
	return fn(ctx, args)
}

// rateLimited answers a call beyond the caller's limit: RATE_LIMITED, with
// retry guidance that waits until the window resets.
func (s *Server) rateLimited(req *Request, f *function, window RateLimitData, extra []Extension, now time.Time) answer {
	details, _ := json.Marshal(map[string]any{"retry_after": window.ResetsIn, "limit": window.Limit, "used": window.Used, "window": window.Window})
	e := &Error{Code: CodeRateLimited, Message: "rate limit exceeded", Details: details}
	g := s.guidance(f, e)
	if g.Allowed {
		after := window.ResetsIn
		g.Strategy, g.After = Fixed, &after
	}
	e.guidance = &g
	return s.fail(req, f, e, now, extra...)
}

// fail builds the answer for a failed call.
func (s *Server) fail(req *Request, f *function, err error, now time.Time, extra ...Extension) answer {
	var e *Error
	if !errors.As(err, &e) || e == nil || e.Code == "" {
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			e = Fail(CodeDeadlineExceeded, "deadline exceeded")
		case errors.Is(err, context.Canceled):
			e = Fail(CodeCancelled, "cancelled")
		default:
			e = Fail(CodeInternalError, "internal error")
		}
	}
	doc := Response{Protocol: current(), Result: json.RawMessage("null"), Errors: []Error{*e}}
	if req != nil {
		doc.ID = req.ID
	}
	doc.Errors[0].guidance = nil
	g := s.guidance(f, e)
	doc.Extensions = append([]Extension{g.extension()}, extra...)
	status := e.Code.HTTPStatus()
	return answer{status: status, header: retryAfterHeader(status, doc), doc: doc, retryable: g.Allowed}
}

// guidance is the retry guidance a failure with e carries: e's own, else the
// function's for its code, else the default table's.
func (s *Server) guidance(f *function, e *Error) RetryData {
	if e.guidance != nil && e.guidance.Validate() == nil {
		return *e.guidance
	}
	if f != nil {
		if g, ok := f.guidance[e.Code]; ok {
			return g
		}
	}
	return DefaultGuidance(e.Code)
}

// retryAfterHeader sets Retry-After on 429 and 503 answers whose guidance
// asks for a wait, as the Forrst HTTP transport requires.
func retryAfterHeader(status int, doc Response) http.Header {
	if status != http.StatusTooManyRequests && status != http.StatusServiceUnavailable {
		return nil
	}
	ext, ok := doc.Extension(URNRetry)
	if !ok {
		return nil
	}
	g, err := ext.Retry()
	if err != nil || !g.Allowed {
		return nil
	}
	return http.Header{"Retry-After": {fmt.Sprint(seconds(g.Wait(1)).Value)}}
}
