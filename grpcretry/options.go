package grpcretry

import (
	"strings"
	"time"

	"github.com/retrykit/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// Defaults of the interceptors.
const (
	// DefaultMaxRetryAfter is the longest server-requested wait obeyed
	// (grpc-retry-pushback-ms, google.rpc.RetryInfo): a longer one ends
	// retrying at once.
	DefaultMaxRetryAfter = 5 * time.Minute
	// DefaultBufferLimit is how many bytes of a stream's client messages are
	// kept for replay, gRPC A6's per-RPC retry buffer.
	DefaultBufferLimit = 256 << 10
)

// An Option configures UnaryClientInterceptor or StreamClientInterceptor.
type Option func(*config)

type config struct {
	strategy       retry.Strategy
	retryable      codeSet
	idempotent     map[string]bool // full method names, and "/service/" for a whole service
	attemptTimeout time.Duration
	maxRetryAfter  time.Duration
	bufferLimit    int
	hedging        *Hedging
	scope          func(cc *grpc.ClientConn, method string) string
	retryOpts      []retry.Option
	independent    bool
	breaker        *retry.Breaker
	loopScope      string // a retry.Scope of retryOpts, if loopScoped
	loopScoped     bool
}

func newConfig(opts []Option) *config {
	c := &config{
		retryable:     codeSetOf(codes.Unavailable, codes.ResourceExhausted),
		maxRetryAfter: DefaultMaxRetryAfter,
		bufferLimit:   DefaultBufferLimit,
	}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	if c.strategy == nil {
		c.strategy = retry.NewAdaptive(retry.AdaptiveOptions{})
	}
	if c.breaker != nil {
		// First, so that a retry.WithBreaker of WithRetryOptions replaces it.
		c.retryOpts = append([]retry.Option{retry.WithBreaker(c.breaker)}, c.retryOpts...)
	}
	// Streams consult the breaker before they are opened: the one the
	// loop consults, wherever it was given, in the scope the loop gives
	// the call (a retry.Scope of WithRetryOptions replaces WithScope's).
	c.breaker = retry.BreakerOf(c.retryOpts...)
	c.loopScope, c.loopScoped = retry.ScopeOf(c.retryOpts...)
	return c
}

// WithStrategy makes the interceptor's calls draw on s, which decides
// whether a retryable failure is retried and how long to wait first. Share
// one strategy per service. Without it, the interceptor owns a
// retry.NewAdaptive(retry.AdaptiveOptions{}).
func WithStrategy(s retry.Strategy) Option { return func(c *config) { c.strategy = s } }

// WithRetryableCodes sets the status codes that are retried for every call,
// idempotent or not: gRPC A6's retryableStatusCodes. The default is
// UNAVAILABLE and RESOURCE_EXHAUSTED (the latter as a throttling error).
// The list replaces the default; an empty list retries only calls that never
// left the client and, for idempotent methods, failures after which the call
// may have been processed.
func WithRetryableCodes(cs ...codes.Code) Option {
	return func(c *config) { c.retryable = codeSetOf(cs...) }
}

// WithIdempotentMethods names the methods that may be repeated after the
// server may have processed them, as full method names
// ("/package.Service/Method"), or "/package.Service/" for every method of a
// service. The Idempotent call option marks a single call.
func WithIdempotentMethods(methods ...string) Option {
	return func(c *config) {
		if c.idempotent == nil {
			c.idempotent = make(map[string]bool, len(methods))
		}
		for _, m := range methods {
			c.idempotent[m] = true
		}
	}
}

// WithAttemptTimeout bounds each attempt by d: a unary attempt's context
// (and so the deadline the server sees), a stream attempt until its first
// response message. An attempt that runs out of time is a timeout: retried
// only for an idempotent method, and by retry.Adaptive, the default, only
// while the service's recent answers show it otherwise healthy (see
// retry.Adaptive). The caller's deadline
// bounds every attempt too. Zero or less means no bound.
func WithAttemptTimeout(d time.Duration) Option { return func(c *config) { c.attemptTimeout = d } }

// WithMaxRetryAfter bounds the wait a server may ask for with
// grpc-retry-pushback-ms or google.rpc.RetryInfo: a longer one ends retrying
// at once with a *retry.RetryAfterError. 0 = DefaultMaxRetryAfter. The
// strategy's own MaxRetryAfter applies as well: the smaller wins.
func WithMaxRetryAfter(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			d = DefaultMaxRetryAfter
		}
		c.maxRetryAfter = d
	}
}

// WithBufferLimit sets how many bytes of a stream's client messages are kept
// so that a retry can send them again (gRPC A6's per-RPC buffer). A stream
// whose messages outgrow it is committed: it is not retried any more.
// 0 = DefaultBufferLimit (256 KiB); negative = no buffer, so a stream is
// committed by its first message.
func WithBufferLimit(n int) Option {
	return func(c *config) {
		if n == 0 {
			n = DefaultBufferLimit
		}
		c.bufferLimit = n
	}
}

// WithScope names the retry quota a call draws on (see retry.Scope). The
// default is the ClientConn's target, so that a failing service does not
// drain the quota of the others.
func WithScope(f func(cc *grpc.ClientConn, method string) string) Option {
	return func(c *config) { c.scope = f }
}

// WithRetryOptions adds options to every call's retry loop: hooks such as
// retry.OnRetry, retry.OnAttemptFailed and retry.OnGiveUp, retry.Log, or a
// retry.Trace. The interceptor sets retry.Scope, retry.AttemptTimeout and a
// retry.BeforeRetry of its own; hooks given here run beside its own. A
// retry.MaxElapsed or retry.AttemptTimeout given here bounds the stream
// attempts the loop opens (retries, and the first under a half-open
// circuit) until their first response message, as WithAttemptTimeout
// does, and not the stream after that; a stream's first attempt, opened
// with the stream, is bounded only by WithAttemptTimeout.
func WithRetryOptions(opts ...retry.Option) Option {
	return func(c *config) { c.retryOpts = append(c.retryOpts, opts...) }
}

// WithBreaker has every call consult b, a circuit breaker (see
// retry.Breaker), before each of its attempts, and tell it how the attempt
// went, classified as the interceptors classify attempts: UNAVAILABLE, a
// call that could not reach the server, and the server's INTERNAL, UNKNOWN
// or DEADLINE_EXCEEDED count as failures, a client fault such as
// INVALID_ARGUMENT or NOT_FOUND, RESOURCE_EXHAUSTED (a throttle) and the
// caller's own cancellation or deadline as neither. The circuits are scoped
// as the calls' quotas are: by WithScope, the ClientConn's target by
// default. While a circuit is open, a call fails at once, status
// UNAVAILABLE, with an error that wraps a *retry.Error whose Reason is
// retry.ErrCircuitOpen (errors.Is and errors.As find both), and nothing
// reaches the server: a unary call makes no attempt, and a stream is not
// opened; the call's retry.Trace and hooks see the refusal. A stream opened
// through a closed circuit is judged by it (retry.WithTicket), although its
// loop runs at its first receive: if the circuit opens in between, the
// receive still reads the server's answer, and a failure then counts in no
// later window and is no probe's. While the circuit is half-open, a stream
// is opened by its first receive (or Header), once the breaker has given it
// a probe's place; the others fail there with ErrCircuitOpen without
// reaching the server. Messages that outgrow the replay buffer before that
// receive open the stream at once if the breaker lets it through (else
// nothing is sent, and the receive reports the refusal), and after it, wait
// for the receive's first attempt. A stream abandoned unread (its context
// ended) holds no probe's place. A hedged call is one attempt, as the retry
// loop sees it. Calls made with the NoRetry call option bypass the
// interceptors, the breaker included. Share one Breaker per service, across
// ClientConns that call it. A nil b is no breaker; a retry.WithBreaker of
// WithRetryOptions replaces b, for streams too.
func WithBreaker(b *retry.Breaker) Option { return func(c *config) { c.breaker = b } }

// WithIndependentRetries makes the interceptors retry as if alone even when
// the caller retries too (retry.CallerRetries: a call made while serving a
// request that is itself a retry, see UnaryServerInterceptor, or work a
// caller marked). By default a call whose caller retries makes one attempt
// for a failure the server answered, and leaves its retry to the caller:
// retries at two layers multiply. A call that never left the client is
// retried either way.
func WithIndependentRetries() Option { return func(c *config) { c.independent = true } }

// WithHedging sends unary calls of idempotent methods as hedged requests
// (gRPC A6's hedgingPolicy): see Hedging.
func WithHedging(h Hedging) Option { return func(c *config) { c.hedging = &h } }

// isIdempotent reports whether method was declared idempotent.
func (c *config) isIdempotent(method string) bool {
	if len(c.idempotent) == 0 {
		return false
	}
	if c.idempotent[method] {
		return true
	}
	if i := strings.LastIndexByte(method, '/'); i > 0 {
		return c.idempotent[method[:i+1]]
	}
	return false
}

// scopeOf returns the scope a call's loop runs in: a retry.Scope of
// WithRetryOptions, or WithScope's, or the ClientConn's target.
func (c *config) scopeOf(cc *grpc.ClientConn, method string) string {
	if c.loopScoped {
		return c.loopScope
	}
	if c.scope != nil {
		return c.scope(cc, method)
	}
	if cc == nil {
		return ""
	}
	return cc.Target()
}

// codeSet is a set of status codes, one bit per code.
type codeSet uint32

func codeSetOf(cs ...codes.Code) codeSet {
	var s codeSet
	for _, c := range cs {
		if c < 32 {
			s |= 1 << c
		}
	}
	return s
}

func (s codeSet) has(c codes.Code) bool { return c < 32 && s&(1<<c) != 0 }

// callOption is a grpc.CallOption of this package: the interceptor reads it
// and removes it before the call reaches grpc.
type callOption struct {
	grpc.EmptyCallOption
	idempotent bool
	noRetry    bool
}

// Idempotent marks one call as safe to repeat after the server may have
// processed it, as WithIdempotentMethods does for every call of a method.
// It has effect only through the interceptors of this package.
func Idempotent() grpc.CallOption { return callOption{idempotent: true} }

// NoRetry makes one call a single attempt: no retries, no hedges.
func NoRetry() grpc.CallOption { return callOption{noRetry: true} }

// callOptions takes this package's options out of opts: it copies opts only
// when it holds one.
func callOptions(opts []grpc.CallOption) (idempotent, noRetry bool, rest []grpc.CallOption) {
	found := false
	for _, o := range opts {
		if co, ok := o.(callOption); ok {
			found = true
			idempotent = idempotent || co.idempotent
			noRetry = noRetry || co.noRetry
		}
	}
	if !found {
		return false, false, opts
	}
	rest = make([]grpc.CallOption, 0, len(opts))
	for _, o := range opts {
		if _, ok := o.(callOption); !ok {
			rest = append(rest, o)
		}
	}
	return idempotent, noRetry, rest
}
