package retry

import "sync/atomic"

// TokenBucket is a retry quota: every retry must take tokens from it, and
// successes put tokens back. When most attempts fail, the bucket drains and
// retries stop, so that a struggling service sees little more than the load
// its clients would send without retrying. It is safe for concurrent use and
// takes no lock.
//
// A bucket may be shared by any number of strategies, to give a whole process
// one quota for a service. The zero value is an empty bucket of capacity 0,
// which never pays for a retry; use NewTokenBucket.
type TokenBucket struct {
	level    atomic.Int64
	capacity int64
}

// NewTokenBucket returns a full bucket holding capacity tokens. A capacity of
// 0 or less gives a bucket that never pays for a retry.
func NewTokenBucket(capacity int) *TokenBucket {
	b := new(TokenBucket)
	b.fill(capacity)
	return b
}

// fill sets the bucket's capacity and fills it.
func (b *TokenBucket) fill(capacity int) {
	b.capacity = int64(max(capacity, 0))
	b.level.Store(b.capacity)
}

// Available returns the number of tokens in the bucket now.
func (b *TokenBucket) Available() int { return int(b.level.Load()) }

// Capacity returns the most tokens the bucket holds.
func (b *TokenBucket) Capacity() int { return int(b.capacity) }

// Take removes n tokens if the bucket holds at least n, and reports whether it
// did. Taking zero or fewer tokens always succeeds and changes nothing.
func (b *TokenBucket) Take(n int) bool {
	if n <= 0 {
		return true
	}
	cost := int64(n)
	for {
		level := b.level.Load()
		if level < cost {
			return false
		}
		if b.level.CompareAndSwap(level, level-cost) {
			return true
		}
	}
}

// full reports whether the bucket is at its capacity, where a refund
// changes nothing.
func (b *TokenBucket) full() bool { return b.level.Load() >= b.capacity }

// Refund puts n tokens back, up to the bucket's capacity. Refunding zero or
// fewer tokens changes nothing.
func (b *TokenBucket) Refund(n int) {
	if n <= 0 {
		return
	}
	add := int64(n)
	for {
		level := b.level.Load()
		if level >= b.capacity {
			return // full: the common case on the success path costs one load
		}
		next := b.capacity
		if add < b.capacity-level {
			next = level + add
		}
		if b.level.CompareAndSwap(level, next) {
			return
		}
	}
}
