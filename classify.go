package retry

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/retrykit/retry/internal/errchain"
)

// Safety says whether repeating a failed request is safe.
type Safety uint8

const (
	// MaybeSafe means there is not enough information to tell. Strategies
	// retry it only when the fault is the server's. It is the zero value, so
	// an error nobody classified is not retried by accident.
	MaybeSafe Safety = iota
	// Safe means the request may be repeated: it never took effect, or taking
	// effect twice is harmless. Safe does not promise a retry; it allows one.
	Safe
	// Unsafe means the request must not be repeated. No strategy retries it.
	Unsafe
)

// String returns "maybe-safe", "safe" or "unsafe".
func (s Safety) String() string {
	switch s {
	case MaybeSafe:
		return "maybe-safe"
	case Safe:
		return "safe"
	case Unsafe:
		return "unsafe"
	}
	return "Safety(" + strconv.Itoa(int(s)) + ")"
}

// Fault says which side of a call caused a failure.
type Fault uint8

const (
	// FaultUnknown means the failure cannot be blamed on either side.
	FaultUnknown Fault = iota
	// FaultClient means the request was wrong: repeating it will not help.
	FaultClient
	// FaultServer means the service failed to handle a valid request.
	FaultServer
)

// String returns "unknown", "client" or "server".
func (f Fault) String() string {
	switch f {
	case FaultUnknown:
		return "unknown"
	case FaultClient:
		return "client"
	case FaultServer:
		return "server"
	}
	return "Fault(" + strconv.Itoa(int(f)) + ")"
}

// Info is everything a strategy knows about one failure.
//
// An error reports its Info by having, anywhere in its chain, a method
//
//	RetryInfo() retry.Info
//
// Classify finds it. The zero Info (MaybeSafe, no fault) is never retried by
// the strategies of this package.
type Info struct {
	Safety     Safety
	Throttle   bool          // the service asked the client to slow down (HTTP 429, a throttling code)
	Timeout    bool          // no answer in time
	RetryAfter time.Duration // the service's minimum wait; 0 = no hint
	Fault      Fault
	// Exact makes RetryAfter the next wait itself, shorter than the
	// backoff if it is: a server's pushback, which gRPC's retry design
	// (gRFC A6) obeys exactly. The caps still apply, and so do a quota's,
	// a budget's and a limiter's refusals and waits.
	Exact bool
	// Allowed says that the service itself said this failure may be
	// retried: a Retry-After on the answer (RFC 9110, section 10.2.3),
	// Forrst retry guidance with "allowed": true, a gRPC pushback of zero
	// or more (gRFC A6). It is evidence that the service can take the
	// retry, so Adaptive honours it where it would otherwise refuse for
	// fear of overload (a timeout). It never lifts the client's own limits:
	// Safety, attempts, the caps on waits, quotas, budgets, failure streaks
	// and client-side throttling still apply.
	Allowed bool
}

// Retryable reports whether the strategies of this package may retry a
// failure with this Info: Safe always, MaybeSafe only for a server fault,
// Unsafe never.
func (i Info) Retryable() bool {
	switch i.Safety {
	case Safe:
		return true
	case MaybeSafe:
		return i.Fault == FaultServer
	}
	return false
}

// infoer is the method an error implements to classify itself.
type infoer interface{ RetryInfo() Info }

// Classify reports what err says about retrying it.
//
// It looks for a RetryInfo method in err's chain, following Unwrap() error and
// Unwrap() []error (errors.Join trees). An error that classifies itself hides
// the errors it wraps, so an outer wrapper overrides an inner one. When the
// branches of a tree classify differently, the results are merged cautiously:
// any Unsafe branch makes the whole Unsafe, Throttle and Timeout are set if any
// branch sets them, RetryAfter is the longest hint, and a client fault wins
// over a server fault.
//
// Without a RetryInfo method, Classify recognises what the standard library
// already says: context.Canceled and context.DeadlineExceeded are Unsafe with
// a client fault (the caller gave up, so the attempt must not be repeated), a
// net.Error whose Timeout method reports true is a server timeout, and a
// failure to dial is Safe because the request never left. Anything else is the
// zero Info, which no strategy of this package retries: mark errors that are
// worth retrying with Transient, Throttled or RetryAfter, or give them a
// RetryInfo method.
//
// Classify visits at most 256 errors of a chain or tree (errchain.Limit). If it has to stop
// before the end (a cycle, a very deep chain, a very wide join), the part it
// did not see may hold a Permanent mark, so its answer is never more
// permissive than that: what it saw, merged as above, but Unsafe. An outer
// mark found before the cut still overrides what is under it.
//
// Classify(nil) is the zero Info.
func Classify(err error) Info {
	if err == nil {
		return Info{}
	}
	var w errchain.Walk
	info, ok := find(err, &w)
	if w.CutShort() {
		info.Safety = Unsafe
		return info
	}
	if ok {
		return info
	}
	caller, ne, dial := stdlibErrors(err)
	switch {
	case caller:
		return Info{Safety: Unsafe, Fault: FaultClient}
	case ne != nil:
		var info Info
		if ne.Timeout() {
			info = Info{Timeout: true, Fault: FaultServer}
		}
		if dial {
			info.Safety = Safe
		}
		return info
	}
	return Info{}
}

// stdlibErrors walks err's chain once for what the standard library says:
// whether it holds context.Canceled or context.DeadlineExceeded (caller),
// which wins over the rest, else its first net.Error and whether a
// *net.OpError for a dial is anywhere in it (an *url.Error, itself a
// net.Error, wraps one when an HTTP client cannot connect). It walks the
// chain itself because errors.As would allocate on every unclassified error.
func stdlibErrors(err error) (caller bool, first net.Error, dial bool) {
	var w errchain.Walk
	caller = w.Find(err, func(err error) bool {
		if is(err, context.Canceled) || is(err, context.DeadlineExceeded) {
			return true
		}
		if oe, ok := err.(*net.OpError); ok && oe.Op == "dial" {
			dial = true
		}
		if x, ok := err.(net.Error); ok && first == nil {
			first = x
		}
		return false
	})
	return caller, first, dial
}

// find walks err's chain for RetryInfo methods, within what is left of w,
// which it cuts short if it ran out before the end. An error with one
// hides what it wraps; the branches of a join that have one are merged.
func find(err error, w *errchain.Walk) (merged Info, found bool) {
	w.Each(err, func(err error) errchain.Step {
		var info Info
		switch e := err.(type) {
		case *Error:
			// Error.RetryInfo would start a new walk; continue this one, so
			// that an Error wrapping itself cannot recurse without bound.
			var ok bool
			info, ok = find(e.Err, w)
			if e.Reason != ErrOuterLoop {
				info.Safety, ok = Unsafe, true
			} // else one attempt, its failure left to this caller
			if !ok {
				return errchain.Skip
			}
		case infoer:
			info = e.RetryInfo()
		default:
			return errchain.Descend
		}
		if found {
			merged = merge(merged, info)
		} else {
			merged, found = info, true
		}
		return errchain.Skip
	})
	return merged, found
}

// isContextError reports whether err's chain holds context.Canceled or
// context.DeadlineExceeded. It is errors.Is with a bounded walk.
func isContextError(err error) bool {
	var w errchain.Walk
	return w.Find(err, func(err error) bool { return is(err, context.Canceled) || is(err, context.DeadlineExceeded) })
}

// isDeadline reports whether err's chain, within errchain.Limit errors,
// holds context.DeadlineExceeded.
func isDeadline(err error) bool {
	var w errchain.Walk
	return w.Find(err, func(err error) bool { return is(err, context.DeadlineExceeded) })
}

// is reports whether err itself, not its chain, is target.
func is(err, target error) bool {
	if err == target {
		return true
	}
	x, ok := err.(interface{ Is(error) bool })
	return ok && x.Is(target)
}

// merge combines two classifications cautiously.
func merge(a, b Info) Info {
	out := Info{
		Throttle:   a.Throttle || b.Throttle,
		Timeout:    a.Timeout || b.Timeout,
		RetryAfter: max(a.RetryAfter, b.RetryAfter),
		Exact:      a.Exact || b.Exact,     // exactly the longest of the hints, never sooner than any
		Allowed:    a.Allowed && b.Allowed, // only if every branch was allowed
	}
	switch {
	case a.Safety == Unsafe || b.Safety == Unsafe:
		out.Safety = Unsafe
	case a.Safety == MaybeSafe || b.Safety == MaybeSafe:
		out.Safety = MaybeSafe
	default:
		out.Safety = Safe
	}
	switch {
	case a.Fault == FaultClient || b.Fault == FaultClient:
		out.Fault = FaultClient
	case a.Fault == FaultServer || b.Fault == FaultServer:
		out.Fault = FaultServer
	}
	return out
}
