package retry

import (
	"sync"
	"sync/atomic"
)

// scopes holds one retry quota per scope, created on first use. The number of
// scopes is bounded: when a new scope would exceed the bound, the least
// recently used scope with a full bucket is dropped, or the least recently
// used of all if none is full (a later request in it starts a new, full
// bucket). Lookups take no lock; only creating a scope does. The zero value
// is ready to use.
type scopes struct {
	unscoped atomic.Pointer[scoped] // scope "": never dropped
	byName   sync.Map               // string → *scoped
	clock    atomic.Uint64          // orders uses for least-recently-used eviction

	mu    sync.Mutex // serialises creation and eviction
	count int        // entries in byName, under mu
}

type scoped struct {
	TokenBucket
	lastUse atomic.Uint64
}

// bucket returns scope's bucket, creating it with the given capacity if needed
// and evicting the least recently used scope beyond limit.
func (s *scopes) bucket(scope string, capacity, limit int) *TokenBucket {
	if scope == "" {
		if b := s.unscoped.Load(); b != nil {
			return &b.TokenBucket
		}
		b := newScoped(capacity)
		if !s.unscoped.CompareAndSwap(nil, b) {
			b = s.unscoped.Load()
		}
		return &b.TokenBucket
	}
	if v, ok := s.byName.Load(scope); ok {
		b := v.(*scoped)
		s.touch(b)
		return &b.TokenBucket
	}
	return s.create(scope, capacity, limit)
}

// touch records a use of b. Repeated uses of the most recently used scope
// cost two loads and no write.
func (s *scopes) touch(b *scoped) {
	if b.lastUse.Load() != s.clock.Load() {
		b.lastUse.Store(s.clock.Add(1))
	}
}

func (s *scopes) create(scope string, capacity, limit int) *TokenBucket {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.byName.Load(scope); ok { // created while we waited for the lock
		b := v.(*scoped)
		s.touch(b)
		return &b.TokenBucket
	}
	for s.count >= max(limit, 1) {
		s.evictOldest()
	}
	b := newScoped(capacity)
	b.lastUse.Store(s.clock.Add(1))
	s.byName.Store(scope, b)
	s.count++
	return &b.TokenBucket
}

// evictOldest drops the least recently used scope whose bucket is full, or,
// if every bucket is short, the least recently used scope. Dropping a full
// bucket loses nothing (a new one starts full); dropping a drained one would
// hand a failing service a fresh quota. Callers hold mu. It scans every
// scope, which happens only when a new scope is created beyond the bound.
func (s *scopes) evictOldest() {
	var (
		oldest, oldestFull       any
		oldestUse, oldestFullUse uint64
	)
	s.byName.Range(func(k, v any) bool {
		b := v.(*scoped)
		use := b.lastUse.Load()
		if oldest == nil || use < oldestUse {
			oldest, oldestUse = k, use
		}
		if b.Available() >= b.Capacity() && (oldestFull == nil || use < oldestFullUse) {
			oldestFull, oldestFullUse = k, use
		}
		return true
	})
	if oldestFull != nil {
		oldest = oldestFull
	}
	if oldest == nil {
		s.count = 0
		return
	}
	s.byName.Delete(oldest)
	s.count--
}

// peek returns scope's bucket without creating or touching it.
func (s *scopes) peek(scope string) *TokenBucket {
	if scope == "" {
		if b := s.unscoped.Load(); b != nil {
			return &b.TokenBucket
		}
		return nil
	}
	if v, ok := s.byName.Load(scope); ok {
		return &v.(*scoped).TokenBucket
	}
	return nil
}

func newScoped(capacity int) *scoped {
	b := new(scoped)
	b.fill(capacity)
	return b
}
