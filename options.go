package retry

import (
	"context"
	"log/slog"
	"time"
)

// An Option changes how Do and DoValue run. Options are plain values: making
// and passing them allocates nothing, and a slice of them can be built once
// and reused for every call. The zero Option changes nothing and costs
// nothing: a call whose options are all zero takes the same path as one
// with none.
type Option struct {
	kind            optionKind
	duration        time.Duration
	scope           string
	onAttemptFailed func(ctx context.Context, attempt int, err error)
	trace           *Trace
	vet             func(ctx context.Context, attempt int, err error) error
	retrying        func(ctx context.Context, attempt int, delay time.Duration, err error)
	gaveUp          func(ctx context.Context, err *Error)
	logger          *slog.Logger
	breaker         *Breaker
	ticket          BreakerTicket
}

type optionKind uint8

const (
	optNone optionKind = iota
	optScope
	optAttemptTimeout
	optMaxElapsed
	optLongPoll
	optOnAttemptFailed
	optTrace
	optBeforeRetry
	optOnRetry
	optOnGiveUp
	optLog
	optUnmarked
	optBreaker
	optTicket
)

// inert reports whether o leaves a call as no option does until its first
// attempt fails (see direct).
func (o *Option) inert() bool {
	switch o.kind {
	case optNone, optUnmarked, optLongPoll:
		return true
	case optScope:
		return o.scope == ""
	case optAttemptTimeout, optMaxElapsed:
		return o.duration <= 0
	case optOnAttemptFailed:
		return o.onAttemptFailed == nil
	case optTrace:
		return o.trace == nil
	case optBeforeRetry:
		return o.vet == nil
	case optOnRetry:
		return o.retrying == nil
	case optOnGiveUp:
		return o.gaveUp == nil
	case optLog:
		return o.logger == nil
	}
	return false
}

// config is the loop's settings after its options are applied.
type config struct {
	scope           string
	attemptTimeout  time.Duration
	maxElapsed      time.Duration
	longPoll        bool
	onAttemptFailed func(ctx context.Context, attempt int, err error)
	trace           *Trace
	waited          time.Duration // the call's waits between attempts so far, for the Trace
	vet             func(ctx context.Context, attempt int, err error) error
	retrying        func(ctx context.Context, attempt int, delay time.Duration, err error)
	gaveUp          func(ctx context.Context, err *Error)
	logger          *slog.Logger
	marker          // the marks of the attempts' contexts, if the loop marks them
	breaker         *Breaker
	ticket          BreakerTicket // WithTicket's: the first attempt's leave, if ticketed
	ticketed        bool          // a copy, not a pointer into opts, which would make every call's opts escape
}

// apply sets c from opts.
func (c *config) apply(opts []Option) {
	tickets := 0
	for i := range opts {
		o := &opts[i]
		switch o.kind {
		case optScope:
			c.scope = o.scope
		case optAttemptTimeout:
			c.attemptTimeout = max(o.duration, 0)
		case optMaxElapsed:
			c.maxElapsed = max(o.duration, 0)
		case optLongPoll:
			c.longPoll = true
		case optOnAttemptFailed:
			c.onAttemptFailed = both(c.onAttemptFailed, o.onAttemptFailed)
		case optTrace:
			c.trace = c.trace.then(o.trace)
		case optBeforeRetry:
			c.vet = vetBoth(c.vet, o.vet)
		case optOnRetry:
			c.retrying = retryBoth(c.retrying, o.retrying)
		case optOnGiveUp:
			c.gaveUp = giveUpBoth(c.gaveUp, o.gaveUp)
		case optLog:
			c.logger = o.logger
		case optBreaker:
			c.breaker = o.breaker
		case optTicket:
			c.ticket, c.ticketed = o.ticket, true
			tickets++
		}
	}
	if tickets > 1 {
		// Only the last applies: the others' probe places are freed, but
		// not the last's if it was given earlier too.
		for i := range opts {
			if o := &opts[i]; o.kind == optTicket && o.ticket != c.ticket {
				o.ticket.Release()
			}
		}
	}
}

// Scope names the retry quota the call draws on (the token scope of the
// Smithy retry guide), for example one scope per service or per host, so
// that a storm against one does not starve the others. The default is the
// empty scope.
func Scope(name string) Option { return Option{kind: optScope, scope: name} }

// ScopeOf returns the scope that Do and DoValue give a call with opts, the
// last Scope's, and whether opts name one. Like BreakerOf, it is for an
// integration that consults the call's breaker before its loop starts.
func ScopeOf(opts ...Option) (scope string, ok bool) {
	for i := range opts {
		if opts[i].kind == optScope {
			scope, ok = opts[i].scope, true
		}
	}
	return scope, ok
}

// AttemptTimeout bounds each attempt: the operation's context is cancelled d
// after the attempt starts. An attempt that fails because of it is classified
// as a timeout with a server fault (so it may be retried) unless the
// operation's error classifies itself. Zero or less means no bound.
func AttemptTimeout(d time.Duration) Option {
	return Option{kind: optAttemptTimeout, duration: d}
}

// MaxElapsed bounds the whole call, waits included, as a context deadline
// would: no wait starts that could not end d after the call began. Zero or
// less means no bound other than the context's.
func MaxElapsed(d time.Duration) Option { return Option{kind: optMaxElapsed, duration: d} }

// LongPoll is for operations that poll, such as queue receives: when the
// quota refuses a retry, the loop still waits the backoff the retry would have
// had before it returns the failure, when a breaker's circuit refuses an
// attempt, it waits until the circuit may let one through (see WithBreaker),
// and when a retry's wait would not end before the context's deadline, it
// waits until the deadline, so that a caller polling in a loop cannot spin
// against a failing service. No wait goes past the context's deadline: one
// it cuts short returns at the deadline.
func LongPoll() Option { return Option{kind: optLongPoll} }

// OnAttemptFailed calls f after every failed attempt, the last one included,
// with the attempt's number (1 for the first) and its error.
func OnAttemptFailed(f func(ctx context.Context, attempt int, err error)) Option {
	return Option{kind: optOnAttemptFailed, onAttemptFailed: f}
}

// BeforeRetry calls f after a failed attempt, before the strategy is asked
// for a retry, with the attempt's number and its error (not called when the
// caller's context is done). If f returns an error, the loop makes no more
// attempts and gives up with that error as the Reason. It is for checks of
// the caller's own that come before the quota's: a transport's limit on
// attempts, a body that cannot be sent again, a server's wait longer than
// the caller accepts. A retry refused here costs the strategy's quota
// nothing; the strategy still hears of the failure, marked Unsafe, so that
// what it learns of the service's health misses none. Of several
// BeforeRetry options, the first to refuse ends the loop; the later ones
// are not asked.
func BeforeRetry(f func(ctx context.Context, attempt int, err error) error) Option {
	return Option{kind: optBeforeRetry, vet: f}
}

// OnRetry calls f when a retry has been granted and its wait is about to
// begin, with the number of the attempt that failed, the wait before the next
// attempt, and the error. It does not fire after the last attempt, nor for a
// retry refused or too late for the deadline; only a cancellation during the
// wait can still stop the retry it announced, and then OnGiveUp follows.
func OnRetry(f func(ctx context.Context, attempt int, delay time.Duration, err error)) Option {
	return Option{kind: optOnRetry, retrying: f}
}

// OnGiveUp calls f once when the loop returns an error, with that error: the
// attempts made, the last error, and the reason retrying stopped.
func OnGiveUp(f func(ctx context.Context, err *Error)) Option {
	return Option{kind: optOnGiveUp, gaveUp: f}
}

// WithBreaker has Do and DoValue consult b before every attempt, first
// attempts included, in the call's scope (see Scope), and tell it how the
// attempt went; see Breaker. An attempt b refuses is not made: a refused
// first attempt gives up with 0 attempts, a refused retry with those made
// so far, both with ErrCircuitOpen as the Reason. With LongPoll, a refusal
// first waits until the circuit lets probes through (never past the
// context's deadline), so that a caller polling in a loop cannot spin. A
// nil b is the zero Option. Of several WithBreaker options, the last
// applies. Loops that nest may share a breaker (the caller's, and the
// client's inside it, such as httpretry.Transport's Breaker): a request's
// failure is counted once, by the loop that made the request (see Breaker).
func WithBreaker(b *Breaker) Option {
	if b == nil {
		return Option{}
	}
	return Option{kind: optBreaker, breaker: b}
}

// BreakerOf returns the Breaker that Do and DoValue consult with opts, the
// last WithBreaker's, or nil if there is none. It is for an integration
// that must consult the call's breaker before its loop starts, as
// grpcretry's streams do before they are opened, so that it asks the same
// breaker the loop will.
func BreakerOf(opts ...Option) *Breaker {
	var b *Breaker
	for i := range opts {
		if opts[i].kind == optBreaker {
			b = opts[i].breaker
		}
	}
	return b
}

// WithTicket makes t, a ticket that Allow gave, the breaker's leave for the
// call's first attempt: the loop does not consult its breaker before that
// attempt, and reports the attempt's outcome through t (to t's breaker and
// scope); later attempts consult the call's breaker (WithBreaker) as usual.
// It is for an integration whose first attempt begins before its loop does:
// grpcretry opens a stream when it is created, and runs the loop at its first
// receive. The breaker then judges that attempt by the circuit it went
// through, and a circuit that opened meanwhile neither refuses an attempt
// already answered nor takes its verdict for a probe's. Nor does the loop
// wait its strategy's first delay: the attempt has begun. If t is a refusal's
// (Allow returned ErrCircuitOpen), the call makes no attempt and gives up
// with ErrCircuitOpen, as any refusal, LongPoll's wait included. The
// operation is called for that attempt even if the call's context is done
// when the loop starts: it collects the outcome of an attempt made, and the
// loop gives up after it. A nil operation releases t. The zero BreakerTicket
// lets the first attempt through and reports it to no breaker. A ticket is
// one attempt's: give it to one call. Of several WithTicket options, the last
// applies, and the others are released.
func WithTicket(t BreakerTicket) Option { return Option{kind: optTicket, ticket: t} }

// Options of the same kind add up, in the order given: a hook an integration
// sets for itself and one the caller passes both run. Two hooks of a kind
// cost one small allocation when the options are applied, two Traces one
// for the composed Trace and one for each of its hooks; one costs nothing.

func both(a, b func(context.Context, int, error)) func(context.Context, int, error) {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	return func(ctx context.Context, n int, err error) { a(ctx, n, err); b(ctx, n, err) }
}

func vetBoth(a, b func(context.Context, int, error) error) func(context.Context, int, error) error {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	return func(ctx context.Context, n int, err error) error {
		if reason := a(ctx, n, err); reason != nil {
			return reason
		}
		return b(ctx, n, err)
	}
}

func retryBoth(a, b func(context.Context, int, time.Duration, error)) func(context.Context, int, time.Duration, error) {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	return func(ctx context.Context, n int, d time.Duration, err error) { a(ctx, n, d, err); b(ctx, n, d, err) }
}

func giveUpBoth(a, b func(context.Context, *Error)) func(context.Context, *Error) {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	return func(ctx context.Context, e *Error) { a(ctx, e); b(ctx, e) }
}

// Log logs retries at level Info and giving up at level Warn to l, with the
// attributes attempt, delay, error and reason (and scope, if set). It works
// beside the On hooks; a nil l turns logging off, which is the default.
func Log(l *slog.Logger) Option { return Option{kind: optLog, logger: l} }

// logRetry and logGiveUp are the Log option's hooks.
func (c *config) logRetry(ctx context.Context, attempt int, delay time.Duration, err error) {
	logRetry(ctx, c.logger, c.scope, attempt, delay, err)
}

func (c *config) logGiveUp(ctx context.Context, e *Error) { logGiveUp(ctx, c.logger, c.scope, e) }

// logRetry and logGiveUp log to l for a call in scope: the loop's Log hooks,
// and those TraceOf folds into a Trace.
func logRetry(ctx context.Context, l *slog.Logger, scope string, attempt int, delay time.Duration, err error) {
	logTo(ctx, l, scope, slog.LevelInfo, "retry: attempt failed, retrying",
		slog.Int("attempt", attempt), slog.Duration("delay", delay), slog.Any("error", err))
}

func logGiveUp(ctx context.Context, l *slog.Logger, scope string, e *Error) {
	logTo(ctx, l, scope, slog.LevelWarn, "retry: giving up",
		slog.Int("attempt", e.Attempts), slog.Any("error", e.Err), slog.Any("reason", e.Reason))
}

func logTo(ctx context.Context, l *slog.Logger, scope string, level slog.Level, msg string, a, b, d slog.Attr) {
	if l == nil || !l.Enabled(ctx, level) {
		return
	}
	if scope == "" {
		l.LogAttrs(ctx, level, msg, a, b, d)
		return
	}
	l.LogAttrs(ctx, level, msg, a, b, d, slog.String("scope", scope))
}
