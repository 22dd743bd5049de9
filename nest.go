package retry

import (
	"context"
	"errors"
	"sync/atomic"
)

// ErrOuterLoop is the reason an integration gave up after one attempt because
// its caller retries the failure (see CallerRetries): the failure is left to
// the caller's loop, which retries it or not as its own rules say.
var ErrOuterLoop = errors.New("retry: left to the caller's retries")

// CallerRetries reports whether the nearest mark on ctx, put there by a loop
// (Do, DoValue) on an attempt's context or by WithCallerRetries, has not
// ended: the caller will retry a failure of the work, so the work should not
// retry it too. A nil ctx carries no mark. The package documentation,
// "Retry at one layer", tells the rule.
func CallerRetries(ctx context.Context) bool {
	if ctx == nil {
		return false
	}
	b, n := markOf(ctx)
	return b != nil && b.live(n)
}

// WithCallerRetries returns a copy of ctx marked to say that the caller will
// retry the work done with it if it fails (see CallerRetries), and the
// function that ends the mark, to be called when that work is done. Until
// then, contexts derived from the copy carry the mark too; after, none does,
// whatever marks the contexts around it carry. Do and DoValue mark their
// attempts themselves: this is for a loop of one's own, or a server that
// learns its caller retries. A nil ctx is context.Background.
func WithCallerRetries(ctx context.Context) (context.Context, func()) {
	if ctx == nil {
		ctx = context.Background()
	}
	b := &markBlock{Context: ctx}
	return (*mark1)(b), func() { b.end(1) }
}

// Unmarked makes Do and DoValue pass ctx to the operation as it is, without
// the mark that tells the integrations inside it that this loop retries their
// failures (see CallerRetries). It is for an operation that calls no retrying
// client, on a path where the mark's one small allocation per call matters.
// An operation that does call one then retries at both layers. It is also
// for a loop whose Strategy, of a type of one's own, retries only failures
// of its own kinds (a conflict, say): marked, the clients inside would leave
// it failures it refuses, after one attempt of theirs, and nobody would
// retry them (sqlretry's loop is unmarked for this reason).
func Unmarked() Option { return Option{kind: optUnmarked} }

type callerKey struct{}

// markSlots is how many attempts' marks a markBlock holds: every attempt of a
// call with the default MaxAttempts (3), and one more.
const markSlots = 4

// A markBlock holds the marks of up to markSlots attempts made in one
// context, one after another: one allocation marks every attempt of most
// calls. Each attempt's mark is a context of its own type (mark1 to mark4),
// so that work an attempt leaves running holds the mark of its attempt, not
// the block's latest, and the block is as small as one mark.
type markBlock struct {
	context.Context                             // the context the attempts are made in
	left            atomic.Pointer[leftFailure] // what inner loops told the latest attempt
	ended           atomic.Uint32               // the block's attempts that have ended
}

// leftFailure is what inner loops told attempt n of a block: a failure
// one of them left to it (a give-up with ErrOuterLoop), if left, and the
// breaker that counted the failure of a request made within the attempt,
// if any (see counted).
type leftFailure struct {
	n       uint32
	info    Info
	left    bool
	counted *Breaker
}

// failure returns the failure an inner loop left, or nil.
func (l *leftFailure) failure() *Info {
	if l == nil || !l.left {
		return nil
	}
	return &l.info
}

// countedBy reports whether b counted the failure of a request made within
// the attempt: its loop's verdict on the attempt would count it again.
func (l *leftFailure) countedBy(b *Breaker) bool {
	return l != nil && b != nil && l.counted == b
}

// live reports whether the mark of the block's attempt n has not ended:
// attempts end in order, and whoever holds the mark of attempt n got it
// after the attempts before n began.
func (b *markBlock) live(n uint32) bool { return b.ended.Load() == n-1 }

// end ends the mark of the block's attempt n. What an inner loop left to it
// stays there, out of the next attempt's reach.
func (b *markBlock) end(n uint32) { b.ended.Store(n) }

// leftTo returns what inner loops told the block's attempt n, or nil.
func (b *markBlock) leftTo(n uint32) *leftFailure {
	if l := b.left.Load(); l != nil && l.n == n {
		return l
	}
	return nil
}

// value answers ctx.Value for the mark m of one of the block's attempts: the
// mark itself, ended or not, so that an ended mark hides the marks around it.
func (b *markBlock) value(key, m any) any {
	if key == (callerKey{}) {
		return m
	}
	return b.Context.Value(key)
}

// The marks of a block's attempts, one type each.
type (
	mark1 markBlock
	mark2 markBlock
	mark3 markBlock
	mark4 markBlock
)

func (m *mark1) Value(key any) any { return (*markBlock)(m).value(key, m) }

func (m *mark2) Value(key any) any { return (*markBlock)(m).value(key, m) }

func (m *mark3) Value(key any) any { return (*markBlock)(m).value(key, m) }

func (m *mark4) Value(key any) any { return (*markBlock)(m).value(key, m) }

// at returns the context of the block's attempt n.
func (b *markBlock) at(n uint32) context.Context {
	switch n {
	case 1:
		return (*mark1)(b)
	case 2:
		return (*mark2)(b)
	case 3:
		return (*mark3)(b)
	}
	return (*mark4)(b)
}

// markOf returns the block and the attempt of the nearest mark on ctx, or
// nil if it has none.
func markOf(ctx context.Context) (*markBlock, uint32) {
	switch m := ctx.Value(callerKey{}).(type) {
	case *mark1:
		return (*markBlock)(m), 1
	case *mark2:
		return (*markBlock)(m), 2
	case *mark3:
		return (*markBlock)(m), 3
	case *mark4:
		return (*markBlock)(m), 4
	}
	return nil, 0
}

// marks returns how many attempts a loop with strategy s foresees marking
// (see marker), 0 if it cannot retry (no strategy, No, one attempt), for
// then a client inside it retrying alone is the only retry. For this package's
// strategies it is every attempt the call may make; a Strategy of another
// type is foreseen the default MaxAttempts.
func marks(s Strategy) int {
	n := defaultMaxAttempts
	switch s := s.(type) {
	case nil, *No:
		return 0
	case *Simple:
		n = s.MaxAttempts
	case *Standard:
		n = s.opts.MaxAttempts
	case *Adaptive:
		n = s.opts.MaxAttempts
	}
	switch {
	case single(n):
		return 0
	case n == 0:
		return defaultMaxAttempts
	}
	return n
}

// maxMarkBlocks bounds the blocks allocated at once for a strategy that
// allows many attempts: most calls end after their first.
const maxMarkBlocks = 4

// single reports whether a MaxAttempts setting allows one attempt only.
func single(maxAttempts int) bool { return maxAttempts == 1 || maxAttempts < 0 }

// marker hands out the marks of one call's attempts. The first block is
// allocated alone, and holds every attempt of most calls (see markSlots);
// the attempts beyond it get blocks allocated together, enough for every
// attempt the call foresees up to maxMarkBlocks (16 attempts more), and
// twice as many each time the call outlives those. A mark is never reused.
type marker struct {
	batch int         // the call's attempts (see marks); 0 if the loop does not mark
	alone bool        // each attempt has a context of its own (a Trace's AttemptStart), so a block of its own
	used  uint32      // the attempts of b that have begun
	b     *markBlock  // the block of the latest attempt
	spare []markBlock // allocated for later attempts, not yet used
	grown int         // the blocks allocated at the last growth
}

// mark returns the block and the number there of an attempt made in ctx:
// its context is the block's at that number.
func (k *marker) mark(ctx context.Context) (*markBlock, uint32) {
	if k.b == nil {
		k.began(&markBlock{Context: ctx})
		return k.b, 1
	}
	return k.next(ctx)
}

// began notes b, the block of the call's first attempt, so that the attempts
// after it share it. The fast path, which makes a first attempt before the
// loop, calls it only if the attempt failed: a success stores nothing.
func (k *marker) began(b *markBlock) { k.b, k.used = b, 1 }

// next is mark for an attempt after the first.
func (k *marker) next(ctx context.Context) (*markBlock, uint32) {
	if k.used == markSlots || k.alone {
		k.b, k.used = k.block(ctx), 0
	}
	k.used++
	return k.b, k.used
}

// block returns a new block, after the first, for attempts made in ctx.
func (k *marker) block(ctx context.Context) *markBlock {
	if len(k.spare) == 0 {
		n := 2 * k.grown // beyond the attempts foreseen: allocations grow with the log of the attempts
		if k.grown == 0 {
			per := markSlots
			if k.alone {
				per = 1
			}
			n = min(max((k.batch-1)/per, 1), maxMarkBlocks) // the attempts foreseen beyond the first block
		}
		k.grown = n
		k.spare = make([]markBlock, n)
	}
	b := &k.spare[0]
	k.spare = k.spare[1:]
	b.Context = ctx
	return b
}

// leave tells the attempt whose mark is nearest on ctx, if it has not ended,
// that a failure with info was left to it (a give-up with ErrOuterLoop).
func leave(ctx context.Context, info Info) {
	if b, n := markOf(ctx); b != nil {
		b.tell(n, func(l *leftFailure) { l.info, l.left = info, true })
	}
}

// counted tells the attempt whose mark is nearest on ctx, if it has not
// ended, that br counted the failure of a request made within it: the loop
// that made the attempt, if it consults br too, does not count the
// attempt's failure again, which is that request's (one request, one
// verdict, however many loops share a breaker).
func counted(ctx context.Context, br *Breaker) {
	if b, n := markOf(ctx); b != nil {
		b.tell(n, func(l *leftFailure) { l.counted = br })
	}
}

// tell records in what inner loops told the block's attempt n what set
// sets, if n's mark has not ended. A store that comes late, from work
// attempt n left running that found the mark live just before it ended,
// never replaces what a later attempt was told, which reads only its own.
func (b *markBlock) tell(n uint32, set func(*leftFailure)) {
	for b.live(n) {
		old := b.left.Load()
		if old != nil && old.n > n {
			return
		}
		l := &leftFailure{n: n}
		if old != nil && old.n == n {
			*l = *old
		}
		set(l)
		if b.left.CompareAndSwap(old, l) {
			return
		}
	}
}

// judged returns the failure of an attempt that failed with err as its loop
// judges it, reports it to its hooks and returns it in its *Error: err
// itself, unless an inner loop left the attempt a failure and err says
// nothing about retrying, when it is err classified as that failure (err's
// text, and errors.Is and errors.As reach err).
func judged(err error, told *leftFailure) error {
	left := told.failure()
	if left == nil || Classify(err) != (Info{}) {
		return err
	}
	return &leftError{err, *left}
}

// leftError is an operation's error that stands for a failure an inner loop
// left to the caller's: it classifies as that failure.
type leftError struct {
	err  error
	info Info
}

func (e *leftError) Error() string { return e.err.Error() }

func (e *leftError) Unwrap() error { return e.err }

func (e *leftError) RetryInfo() Info { return e.info }
