package retry

import (
	"sync"
	"sync/atomic"
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
}

// scopes holds one state per scope, created on first use. The number of
// scopes is bounded: when a new scope would exceed the bound, the least
// recently used idle scope is dropped, or the least recently used of all if
// none is idle, and then the new scope starts no better off than the one it
// replaced. Lookups take no lock; only creating a scope does. The zero value
// is ready to use.
type scopes[T any, P interface {
	*T
	scopeState
}] struct {
	unscoped atomic.Pointer[scoped[T]] // scope "": never dropped
	byName   sync.Map                  // string → *scoped[T]
	clock    atomic.Uint64             // orders uses for least-recently-used eviction

	mu    sync.Mutex // serialises creation and eviction
	count int        // entries in byName, under mu
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
// quota if the new scope did not inherit from it. Callers hold mu. It scans
// every scope, which happens only when a new scope is created beyond the
// bound.
func (s *scopes[T, P]) evictOldest() *scoped[T] {
	var (
		oldest, oldestIdle       any
		oldestUse, oldestIdleUse uint64
		busy                     *scoped[T]
	)
	s.byName.Range(func(k, v any) bool {
		b := v.(*scoped[T])
		use := b.lastUse.Load()
		if oldest == nil || use < oldestUse {
			oldest, oldestUse, busy = k, use, b
		}
		if P(&b.val).idle() && (oldestIdle == nil || use < oldestIdleUse) {
			oldestIdle, oldestIdleUse = k, use
		}
		return true
	})
	if oldestIdle != nil {
		oldest, busy = oldestIdle, nil
	}
	if oldest == nil {
		s.count = 0
		return nil
	}
	s.byName.Delete(oldest)
	s.count--
	return busy
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
