package grpcretry

import (
	"context"
	"errors"
	"math"
	"net"
	"strings"
	"time"

	"github.com/retrykit/retry"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Metadata keys of gRPC A6.
const (
	// PushbackKey is the trailer in which a server tells the client when to
	// retry, in milliseconds, or (negative or malformed) not to retry.
	PushbackKey = "grpc-retry-pushback-ms"
	// PreviousAttemptsKey is the header a retry or hedge carries with the
	// number of attempts made before it.
	PreviousAttemptsKey = "grpc-previous-rpc-attempts"
)

var (
	// ErrPushback is the reason retrying stopped when the server's
	// grpc-retry-pushback-ms was negative, malformed or repeated: gRPC A6
	// reads it as the server asking the client not to retry.
	ErrPushback = errors.New("grpcretry: the server's grpc-retry-pushback-ms asks not to retry")
	// ErrCommitted is the reason a stream was not retried: it was committed
	// (a response message was received, its headers were read, or its client
	// messages outgrew the replay buffer), as gRPC A6 commits a call.
	ErrCommitted = errors.New("grpcretry: the call is committed and cannot be retried")
)

// errHedged stops the loop after a hedged call: its hedges were its retries.
var errHedged = errors.New("grpcretry: retry attempts exhausted: the call was hedged")

// attemptError is one failed attempt, classified. It wraps the status error
// grpc returned, so status.Code and status.FromError still see the code.
type attemptError struct {
	err  error
	info retry.Info
	stop bool      // the server's pushback asked not to retry
	sent bool      // the attempt left the client: the caller sees its status as it is
	loop *recvLoop // the stream's, for vetStream; nil for a unary call's
}

func (e *attemptError) Error() string         { return e.err.Error() }
func (e *attemptError) Unwrap() error         { return e.err }
func (e *attemptError) RetryInfo() retry.Info { return e.info }

// TransparentRetry reports whether the attempt never left the client, so
// that retrying it is one of gRFC A6's transparent retries (package
// otelretry counts them).
func (e *attemptError) TransparentRetry() bool { return !e.sent }

// outcome is what the interceptor knows about a failed attempt beyond its
// error.
type outcome struct {
	trailer    metadata.MD
	sent       bool // the attempt had a transport stream: it left the client
	idempotent bool
	timedOut   bool // the attempt's own timeout ended it, not the caller's
	callerDone bool // the caller's context is done or past its deadline
}

// answered reports whether a failed attempt that left the client may have
// been handled by the server: its status did not come as a Trailers-Only
// response. gRPC over HTTP/2 ends a call either with Trailers-Only, the
// server's status before any headers (the case A6 retries), or with
// trailers after the server's headers (the handler ran, and A6 commits the
// call); a stream the connection lost has no status from the server at all.
// Only Trailers-Only carries content-type (grpc-go refuses one without it),
// so the trailer tells the cases apart without a copy of the headers, which
// every successful call would pay for. A lost stream counts as answered:
// the server may have done the work.
func (o outcome) answered() bool {
	return o.sent && len(o.trailer["content-type"]) == 0
}

// classify turns a failed attempt into a classified error. See the package
// documentation for the table it implements.
func (c *config) classify(err error, o outcome) *attemptError {
	st, _ := status.FromError(err)
	code := st.Code()
	info := retry.Info{Safety: retry.Unsafe, Fault: faultOf(code)}
	maybe := retry.Unsafe
	if o.idempotent {
		maybe = retry.MaybeSafe
	}
	switch {
	case o.callerDone:
		// The caller's own deadline or cancellation: never repeated, even
		// when the server's RST_STREAM arrives before the caller's timer.
		info = retry.Info{Safety: retry.Unsafe, Fault: retry.FaultClient, Timeout: code == codes.DeadlineExceeded}
	case o.timedOut:
		info = retry.Info{Safety: maybe, Fault: retry.FaultServer, Timeout: true}
	case code == codes.Unavailable && !o.sent:
		// It never left the client: the transparent-retry case of A6.
		info = retry.Info{Safety: retry.Safe, Fault: retry.FaultServer}
	case code == codes.ResourceExhausted && local(st):
		// grpc's own limit on message sizes: repeating it changes nothing.
		info.Fault = retry.FaultClient
	case code == codes.Canceled:
		// The caller's cancellation, or the server's: never repeated.
	case c.retryable.has(code):
		info = retry.Info{Safety: retry.MaybeSafe, Fault: retry.FaultServer, Throttle: code == codes.ResourceExhausted}
		switch {
		case o.idempotent:
			info.Safety = retry.Safe
		case o.answered():
			// Headers came before the failure (the handler ran, and A6
			// commits the call), or no status from the server: only an
			// idempotent method is repeated.
			info.Safety = retry.Unsafe
		}
	case maybeProcessed(code):
		info = retry.Info{Safety: maybe, Fault: retry.FaultServer, Timeout: code == codes.DeadlineExceeded}
	}
	e := &attemptError{err: err, info: info, sent: o.sent}
	pushback := o.trailer[PushbackKey]
	d, stop := parsePushback(pushback)
	e.stop = stop
	min, delayed := retryInfoDelay(st)
	e.info.RetryAfter = max(d, min)
	// A6: a valid pushback is the next delay exactly, shorter than the
	// backoff too; a longer RetryInfo minimum still holds it back.
	e.info.Exact = len(pushback) == 1 && !stop
	// A valid pushback (0 included) or a RetryInfo's retry_delay is the
	// server saying when to retry: its permission, which retry.Adaptive
	// honours even on a DEADLINE_EXCEEDED, a timeout it may otherwise
	// refuse as a sign of overload. A pushback that says stop withdraws it whatever a RetryInfo
	// says. Neither makes a failure retryable: on a classification no
	// strategy retries (Unsafe, or MaybeSafe without a server fault) the
	// permission would claim a retry that cannot happen, so it is left off.
	e.info.Allowed = !stop && (e.info.Exact || delayed) && e.info.Retryable()
	return e
}

// faultOf says which side a status code blames.
func faultOf(c codes.Code) retry.Fault {
	switch c {
	case codes.Canceled, codes.InvalidArgument, codes.NotFound, codes.AlreadyExists,
		codes.PermissionDenied, codes.Unauthenticated, codes.FailedPrecondition,
		codes.OutOfRange, codes.Unimplemented:
		return retry.FaultClient
	case codes.Unknown:
		return retry.FaultUnknown
	}
	return retry.FaultServer
}

// maybeProcessed reports whether a failure with code c leaves the call in
// doubt: the server may have done the work, so only an idempotent method may
// be repeated.
func maybeProcessed(c codes.Code) bool {
	switch c {
	case codes.DeadlineExceeded, codes.Internal, codes.Unknown, codes.Aborted:
		return true
	}
	return false
}

// local reports whether st is grpc's own message-size limit rather than the
// server's answer.
func local(st *status.Status) bool {
	m := st.Message()
	return strings.HasPrefix(m, "grpc: received message larger than max") ||
		strings.HasPrefix(m, "grpc: trying to send message larger than max")
}

// retryInfoDelay returns the longest retry_delay of the google.rpc.RetryInfo
// details of st, or 0, and whether there was one. A negative or invalid
// delay is no hint; 0 is one (retry at once).
func retryInfoDelay(st *status.Status) (d time.Duration, ok bool) {
	for _, x := range st.Details() { // no allocation without details, where Proto copies
		ri, isRetryInfo := x.(*errdetails.RetryInfo)
		if !isRetryInfo || ri.GetRetryDelay() == nil || ri.GetRetryDelay().CheckValid() != nil {
			continue
		}
		if delay := ri.GetRetryDelay().AsDuration(); delay >= 0 { // AsDuration saturates
			d, ok = max(d, delay), true
		}
	}
	return d, ok
}

// parsePushback reads the grpc-retry-pushback-ms values of a trailer. No
// value is no hint. One value of decimal digits is a wait in milliseconds
// (saturating at the longest Duration). Anything else, a negative number,
// a malformed value or several values, asks not to retry (stop), as gRPC A6
// and grpc-go read it.
func parsePushback(values []string) (d time.Duration, stop bool) {
	switch len(values) {
	case 0:
		return 0, false
	case 1:
	default:
		return 0, true
	}
	v := strings.Trim(values[0], " \t")
	if v == "" {
		return 0, true
	}
	var ms uint64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, true
		}
		if ms > (math.MaxUint64-9)/10 {
			ms = math.MaxUint64 // saturate; still validate the rest
			continue
		}
		ms = ms*10 + uint64(c-'0')
	}
	if ms > uint64(math.MaxInt64/int64(time.Millisecond)) {
		return time.Duration(math.MaxInt64), false
	}
	return time.Duration(ms) * time.Millisecond, false
}

// vetHints applies the interceptor's own limits to a failure the strategy
// would otherwise be asked about: a pushback that says stop, a wait beyond
// the cap, a caller that retries (callerRetries: retry.CallerRetries of the
// call's own context, not of its attempts', which the call's loop marks).
func (c *config) vetHints(ctx context.Context, e *attemptError, callerRetries bool) error {
	if expired(ctx) {
		return context.DeadlineExceeded // as retry.Do would, had the timer fired
	}
	if e == nil || !e.info.Retryable() {
		return nil // the strategy says why
	}
	if e.stop {
		return ErrPushback
	}
	if e.sent && !c.independent && callerRetries {
		// The caller retries this call's status itself: one attempt here,
		// or the layers multiply. A call that never left the client is
		// still retried here, where it costs the server nothing.
		return retry.ErrOuterLoop
	}
	if e.info.RetryAfter > c.maxRetryAfter {
		return &retry.RetryAfterError{RetryAfter: e.info.RetryAfter, Max: c.maxRetryAfter}
	}
	return nil
}

// attemptTimedOut reports whether an attempt whose context was actx ended
// because of the attempt's own bound while the caller's ctx was alive.
func attemptTimedOut(ctx, actx context.Context) bool {
	return !expired(ctx) && (errors.Is(actx.Err(), context.DeadlineExceeded) || expired(actx))
}

// expired reports whether ctx is done or its deadline has passed. grpc
// reports a call whose deadline has passed as DEADLINE_EXCEEDED before the
// context's own timer may have fired (a server's RST_STREAM arrives first):
// the clock, not ctx.Err alone, says whose deadline it was.
func expired(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// sent reports whether an attempt with this peer address had a transport
// stream: grpc fills the peer only then.
func sent(addr net.Addr) bool { return addr != nil }
