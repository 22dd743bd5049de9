package retry

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// scopeState is what a strategy keeps per scope: a Standard's bucket, an
// Adaptive's bucket and limiter.
type scopeState interface {
	// init readies a new scope's state, full.
	init(cfg scopeConfig)
	// idle reports whether dropping the state loses nothing: a new one
	// would start the same.
	idle() bool
	// inherit makes a new scope no better off than old, a scope dropped
	// while it was not idle, so that cycling through scope names (one per
	// host of a failing service, say) cannot win back a drained quota.
	inherit(old any)
}

// scopeConfig is what a new scope's state is made from.
type scopeConfig struct {
	capacity int   // of the scope's own quota
	shared   Quota // a quota shared by every scope, if any
	// The strategy's clock and the caller's Now, for a state that notes
	// when it was made; nil for one that does not.
	clock *clock
	now   func() time.Time
	name  string // the scope's name
	fleet bool   // the strategy is bound to a fleet's evidence
}

// scopes holds one state per scope, created on first use. The number of
// scopes is bounded: when a new scope would exceed the bound, the least
// recently used idle scope is dropped, or the least recently used of all if
// none is idle, and then the new scope starts no better off than the one it
// replaced (see evictOldest for the one approximation). Lookups take no
// lock; only creating a scope does, and dropping one costs O(log n)
// amortized, not a scan of every scope, so that a client calling more hosts
// than it keeps scopes for is not slowed to a crawl.
// The zero value is ready to use.
type scopes[T any, P interface {
	*T
	scopeState
}] struct {
	unscoped atomic.Pointer[scoped[T]] // scope "": never dropped
	byName   sync.Map                  // string → *scoped[T]
	clock    atomic.Uint64             // orders uses for least-recently-used eviction

	mu    sync.Mutex // serialises creation and eviction
	count int        // entries in byName, under mu
	// The candidates for eviction found by the last scan, under mu, the
	// oldest last: the oldest idle scopes, and the oldest of all.
	idleOld, allOld []victim[T]
	buf             []victim[T] // the last scan's, allOld at its end
	moreIdle        bool        // the last scan saw idle scopes beyond idleOld
}

// victim is a scope found among the oldest by a scan, with its last use
// then: if it has been used since, it is no longer among the oldest.
type victim[T any] struct {
	name string
	b    *scoped[T]
	use  uint64
}

type scoped[T any] struct {
	val     T
	lastUse atomic.Uint64
}

// get returns scope's state, creating it from cfg if needed
// and evicting the least recently used scope beyond limit.
func (s *scopes[T, P]) get(scope string, cfg scopeConfig, limit int) *T {
	if scope == "" {
		if b := s.unscoped.Load(); b != nil {
			return &b.val
		}
		b := newScoped[T, P](cfg)
		if !s.unscoped.CompareAndSwap(nil, b) {
			b = s.unscoped.Load()
		}
		return &b.val
	}
	if v, ok := s.byName.Load(scope); ok {
		b := v.(*scoped[T])
		s.touch(b)
		return &b.val
	}
	return s.create(scope, cfg, limit)
}

// touch records a use of b. Repeated uses of the most recently used scope
// cost two loads and no write.
func (s *scopes[T, P]) touch(b *scoped[T]) {
	if b.lastUse.Load() != s.clock.Load() {
		b.lastUse.Store(s.clock.Add(1))
	}
}

func (s *scopes[T, P]) create(scope string, cfg scopeConfig, limit int) *T {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.byName.Load(scope); ok { // created while we waited for the lock
		b := v.(*scoped[T])
		s.touch(b)
		return &b.val
	}
	b := newScoped[T, P](cfg)
	for s.count >= max(limit, 1) {
		if old := s.evictOldest(); old != nil {
			P(&b.val).inherit(&old.val)
		}
	}
	b.lastUse.Store(s.clock.Add(1))
	s.byName.Store(scope, b)
	s.count++
	return &b.val
}

// evictOldest drops the least recently used idle scope or, if no scope is
// idle, the least recently used of all, which it returns. Dropping an idle
// scope loses nothing; dropping another would hand a failing service a fresh
// quota if the new scope did not inherit from it. Callers hold mu.
//
// Rather than scan every scope for each drop, a scan sorts them once and
// keeps the oldest quarter as candidates, idle and all; later drops take the
// oldest candidate not used since the scan, which is the least recently
// used scope still: every scope the scan left out was younger, and every
// use since makes a scope younger still. A busy scope is dropped only when
// the scan saw no idle scope beyond the idle candidates and none of those
// is idle still, and a candidate is dropped as idle only if it still is. A
// scan costs O(n log n) and buys n/4 drops, or is spent by uses of the
// candidates, each a call. One approximation remains: a scope made after
// the scan, or become idle after it without being used, is not seen as
// idle until the next scan, which comes once the candidates are spent; in
// the meantime a busy scope may be dropped while it is held (its state
// then goes to the new scope, as any busy drop's does).
func (s *scopes[T, P]) evictOldest() *scoped[T] {
	for fresh := false; ; fresh = true {
		if v, ok := s.pop(&s.idleOld, true, fresh); ok {
			s.drop(v)
			return nil
		}
		// A busy scope goes only if the scan saw no idle one beyond its
		// candidates; else the next scan finds them.
		if !s.moreIdle || fresh {
			if v, ok := s.pop(&s.allOld, false, fresh); ok {
				s.drop(v)
				if P(&v.b.val).idle() {
					return nil
				}
				return v.b
			}
		}
		if fresh || !s.scan() {
			s.count = 0 // nothing held: the count was off
			return nil
		}
	}
}

// pop takes the oldest candidate from *q that is still held and, unless
// the scan is fresh (made for this drop, so that uses racing it cannot
// leave the drop without a candidate), not used since the scan; if idle
// is set, one that is still idle.
func (s *scopes[T, P]) pop(q *[]victim[T], idle, fresh bool) (victim[T], bool) {
	for len(*q) > 0 {
		v := (*q)[len(*q)-1]
		(*q)[len(*q)-1] = victim[T]{} // let go of the scope
		*q = (*q)[:len(*q)-1]
		if cur, ok := s.byName.Load(v.name); !ok || cur != v.b {
			continue
		}
		if !fresh && v.b.lastUse.Load() != v.use {
			if idle && P(&v.b.val).idle() {
				s.moreIdle = true // idle still, only younger: the next scan ranks it
			}
			continue
		}
		if idle && !P(&v.b.val).idle() {
			continue
		}
		return v, true
	}
	return victim[T]{}, false
}

func (s *scopes[T, P]) drop(v victim[T]) {
	s.byName.Delete(v.name)
	s.count--
}

// scan refills the candidates from every scope held, and reports whether
// there is any.
func (s *scopes[T, P]) scan() bool {
	all := s.buf[:0]
	s.byName.Range(func(k, v any) bool {
		b := v.(*scoped[T])
		all = append(all, victim[T]{k.(string), b, b.lastUse.Load()})
		return true
	})
	if len(all) == 0 {
		return false
	}
	slices.SortFunc(all, func(x, y victim[T]) int { return cmp.Compare(y.use, x.use) }) // the oldest last
	keep := max(len(all)/4, 1)
	idle := s.idleOld[:0]
	s.moreIdle = false
	for i := len(all) - 1; i >= 0; i-- {
		if P(&all[i].b.val).idle() {
			if len(idle) == keep {
				s.moreIdle = true
				break
			}
			idle = append(idle, all[i])
		}
	}
	slices.Reverse(idle) // the oldest last
	clear(all[:len(all)-keep])
	s.buf, s.allOld, s.idleOld = all, all[len(all)-keep:], idle
	return true
}

// peek returns scope's state without creating or touching it.
func (s *scopes[T, P]) peek(scope string) *T {
	if scope == "" {
		if b := s.unscoped.Load(); b != nil {
			return &b.val
		}
		return nil
	}
	if v, ok := s.byName.Load(scope); ok {
		return &v.(*scoped[T]).val
	}
	return nil
}

func newScoped[T any, P interface {
	*T
	scopeState
}](cfg scopeConfig) *scoped[T] {
	b := new(scoped[T])
	P(&b.val).init(cfg)
	return b
}

// A TokenBucket is the state of a Standard's scope.

func (b *TokenBucket) init(cfg scopeConfig) { b.fill(cfg.capacity) }

func (b *TokenBucket) idle() bool { return b.Available() >= b.Capacity() }

func (b *TokenBucket) inherit(old any) {
	if o, ok := old.(*TokenBucket); ok {
		b.level.Store(min(b.level.Load(), o.level.Load()))
	}
}

// each calls yield for every scope held, "" first, until it returns false.
func (s *scopes[T, P]) each(yield func(name string, v *T) bool) {
	if b := s.unscoped.Load(); b != nil && !yield("", &b.val) {
		return
	}
	s.byName.Range(func(k, v any) bool { return yield(k.(string), &v.(*scoped[T]).val) })
}
