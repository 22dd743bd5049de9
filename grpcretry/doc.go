// Package grpcretry retries and hedges gRPC calls through the strategies of
// package retry, following the gRPC retry design (gRFC A6, "gRPC Retry
// Design"): UnaryClientInterceptor and StreamClientInterceptor.
//
//	cc, err := grpc.NewClient(target,
//		grpc.WithTransportCredentials(creds),
//		grpc.WithDisableRetry(), // one retry layer: ours
//		grpc.WithUnaryInterceptor(grpcretry.UnaryClientInterceptor()),
//		grpc.WithStreamInterceptor(grpcretry.StreamClientInterceptor()))
//
// Every call's attempts are made by retry.Do, the loop every integration of
// this module shares: the interceptors classify each failed attempt into a
// retry.Info and apply gRPC's own rules (server hints, commit points, replay)
// through its hooks. The strategy (WithStrategy; by default a
// retry.NewAdaptive(retry.AdaptiveOptions{}) owned by the interceptor,
// scoped per ClientConn target) decides whether a retryable failure is
// retried and how long to wait; WithBreaker adds a retry.Breaker, scoped as
// the strategy, under which calls fail at once with retry.ErrCircuitOpen
// while the service is failing. Dial with grpc.WithDisableRetry(): otherwise
// a service config's retryPolicy makes grpc retry inside each of our
// attempts, and the attempts multiply.
//
// # What is retried
//
// Each failed attempt is classified by its status code, and by whether the
// method is idempotent (WithIdempotentMethods, or the Idempotent call
// option):
//
//	status                                  retry.Info                         retried
//	UNAVAILABLE, the call never left the    Safe, server fault                 always: A6's transparent retry
//	  client (no transport stream)
//	a code of WithRetryableCodes            MaybeSafe (Safe if idempotent),    always, as A6's
//	  (default UNAVAILABLE,                   server fault; RESOURCE_EXHAUSTED   retryableStatusCodes
//	  RESOURCE_EXHAUSTED)                     is a throttle
//	the same after the server sent its      Unsafe unless idempotent           idempotent only: the handler
//	  headers, or with no status from the                                        ran, and A6 commits the call,
//	  server (the connection lost once the                                       or it may have run
//	  call had left)
//	RESOURCE_EXHAUSTED from grpc's own      Unsafe, client fault               never
//	  message-size limit
//	the attempt's own timeout               Timeout, server fault; MaybeSafe   idempotent only; by Adaptive, the
//	  (WithAttemptTimeout)                    if idempotent, else Unsafe         default, while the service is
//	                                                                             otherwise healthy, or with the
//	                                                                             server's permission
//	DEADLINE_EXCEEDED, INTERNAL, UNKNOWN,   MaybeSafe if idempotent, else      idempotent only: the server
//	  ABORTED from the server                 Unsafe; server fault;              may have done the work;
//	                                          DEADLINE_EXCEEDED is a Timeout     DEADLINE_EXCEEDED as above
//	any of the retryable rows above with    the same, and Allowed              as above; Allowed lets a
//	  a valid pushback or a RetryInfo                                            timeout be retried
//	  retry_delay (see Server hints)
//	CANCELLED, and the caller's own         Unsafe                             never: retry.Do stops when the
//	  deadline or cancellation                                                   caller's context is done
//	any other code                          Unsafe (client fault for           never
//	                                          INVALID_ARGUMENT, NOT_FOUND, ...)
//
// A code retried for every call is one the service owner declared safe to
// repeat, as A6's retryableStatusCodes are; gRPC's status code guide makes
// UNAVAILABLE the code of a request that was not processed. That is the
// server's word when it sends the status as Trailers-Only, before any
// headers; the interceptors know it from the attempt's trailer, which then
// alone carries content-type (gRPC over HTTP/2), and so capture no headers:
// their copy would cost every successful call.
//
// # Server hints
//
// The trailer grpc-retry-pushback-ms (A6) is the server's pushback: a value
// of decimal digits is the wait before the retry; a negative value, a
// malformed one, or several values ask the client not to retry, and the call
// ends with ErrPushback as its reason. A google.rpc.RetryInfo in the status
// details gives, in retry_delay, a minimum wait. Both become the failure's
// Info.RetryAfter (the longer, if both). Neither makes a failure retryable
// that is not, and the client's limits always win: a wait longer than WithMaxRetryAfter (5 min),
// or than the strategy's MaxRetryAfter, ends the call at once with a
// *retry.RetryAfterError, and one that would end past the caller's deadline
// ends it with retry.ErrDeadline.
//
// As A6 asks, a valid pushback is the next delay exactly (retry.Info.Exact),
// shorter than the strategy's backoff if it is, and 0 retries at once; a
// longer RetryInfo minimum holds it back. The strategy's quota, budget and
// send-rate limiter still decide whether the retry is made at all, and the
// limiter may still make it wait.
//
// Either hint is also the server's permission to retry (retry.Info.Allowed):
// a pushback of 0 or more tells the client when to retry (A6), and so does
// a RetryInfo's retry_delay (google.rpc.RetryInfo, in googleapis'
// google/rpc/error_details.proto). The default strategy, retry.Adaptive,
// retries a timeout it may otherwise refuse for fear of overload when the
// server allowed it: a DEADLINE_EXCEEDED from the server with a pushback of 0, for an
// idempotent method, is retried at once. The permission is set only on a
// failure the table above lets a strategy retry, and never with a pushback
// that says stop; a timeout of the attempt's own, or of the caller, carries
// none unless the server's trailer came with it.
//
// # Streams
//
// A stream is retried until it is committed, as A6 commits a call: by its
// first response message, by headers the server sent, or by client messages
// that outgrow the per-RPC replay buffer (WithBufferLimit, 256 KiB by
// default). Header retries an attempt that ends Trailers-Only with a
// retryable status, as grpc-go does, and returns the headers of the attempt
// that answers. Until the commit the interceptor keeps the messages sent, and
// a retry sends them again, then CloseSend if the application called it. The
// stream's Context lives as long as the call, across retries; reading it
// does not commit. See StreamClientInterceptor.
//
// # Attempts and deadlines
//
// Each retry and hedge carries the header grpc-previous-rpc-attempts with the
// number of attempts before it (A6). Every attempt runs under the caller's
// context, so the server sees the caller's deadline (or the attempt's, if
// WithAttemptTimeout is shorter), and no wait starts that could not end
// before it.
//
// # Hedging
//
// WithHedging sends idempotent unary calls as hedged requests (A6's
// hedgingPolicy): see Hedging. Hedges are paid for from a retry.Quota and
// stop while the service is struggling.
//
// # Retry at one layer
//
// Retries at two layers multiply. A call whose caller retries too
// (retry.CallerRetries) makes one attempt for a failure the server answered
// and leaves its retry to the caller (the *retry.Error's Reason is
// retry.ErrOuterLoop, and it classifies as the status, so the caller's loop
// retries it); a call that never left the client is still retried here.
// WithIndependentRetries turns that off. On the server side,
// UnaryServerInterceptor and StreamServerInterceptor mark the context of a
// call whose grpc-previous-rpc-attempts says it is a retry, so that the
// handler's own calls leave their retries to its caller.
//
// # Telemetry
//
// WithRetryOptions passes options to every call's loop, an
// otelretry.Instrumentation's Option among them: its traces and metrics then
// follow each call's attempts. With otelretry's gRPC conventions, the
// interceptors also tell it, through the attempt's context, what the loop's
// retry.Trace is not told: each call's method (when the call carries
// grpc.StaticMethod, as generated code's do; else gRFC A66's "other") and
// the channel's canonical target, for unary calls, hedged calls and streams,
// and each hedge sent, so that gRFC A96's metrics carry every label with no
// other interceptor. A call without such an instrumentation costs no
// allocation for it. This module imports no OpenTelemetry.
//
// # Errors
//
// A call that fails for good returns a *retry.Error wrapping the last
// attempt's status error: status.Code(err) is the server's code, and
// errors.Is(err, retry.ErrMaxAttempts) (ErrPushback, ErrCommitted, ...) says
// why retrying stopped. A call given up before its first attempt has no
// server's code: its error wraps the *retry.Error (errors.As finds it) with
// the code grpc gives such a call, UNAVAILABLE for an open circuit and
// CANCELLED or DEADLINE_EXCEEDED for a context done before it.
package grpcretry
