package retry

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

var (
	errBoom      = errors.New("boom")
	errTransient = Transient(errBoom)
	errThrottled = Throttled(errBoom)
	errTimeout   = WithInfo(errBoom, Info{Timeout: true, Fault: FaultServer})
)

// mustRefresh refreshes t and fails the test on a refusal.
func mustRefresh(t *testing.T, s Strategy, tok Token, err error) Token {
	t.Helper()
	next, rerr := s.RefreshToken(tok, err)
	if rerr != nil {
		t.Fatalf("RefreshToken: %v", rerr)
	}
	return next
}

func mustAcquire(t *testing.T, s Strategy, scope string) Token {
	t.Helper()
	tok, err := s.AcquireInitialToken(scope)
	if err != nil {
		t.Fatalf("AcquireInitialToken: %v", err)
	}
	return tok
}

func TestStandardDefaultsAttempts(t *testing.T) {
	var s Standard // the zero value is ready
	tok := mustAcquire(t, &s, "")
	if tok.RetryCount() != 0 || tok.Delay() != 0 {
		t.Fatalf("initial token = (%d, %v), want (0, 0)", tok.RetryCount(), tok.Delay())
	}
	tok = mustRefresh(t, &s, tok, errTransient)
	if tok.RetryCount() != 1 || tok.Delay() < 0 || tok.Delay() >= 50*time.Millisecond {
		t.Fatalf("first retry = (%d, %v), want (1, [0, 50ms))", tok.RetryCount(), tok.Delay())
	}
	tok = mustRefresh(t, &s, tok, errTransient)
	if tok.RetryCount() != 2 || tok.Delay() >= 100*time.Millisecond {
		t.Fatalf("second retry = (%d, %v), want (2, [0, 100ms))", tok.RetryCount(), tok.Delay())
	}
	if _, err := s.RefreshToken(tok, errTransient); !errors.Is(err, ErrMaxAttempts) {
		t.Fatalf("third retry: err = %v, want ErrMaxAttempts", err)
	}
}

func TestStandardDefaultBackoffRanges(t *testing.T) {
	s := NewStandard(StandardOptions{MaxAttempts: 20})
	seenAbove := false
	for range 200 {
		tok := mustRefresh(t, s, mustAcquire(t, s, ""), errThrottled)
		if tok.Delay() >= time.Second {
			t.Fatalf("throttled first retry waits %v, want < 1s", tok.Delay())
		}
		if tok.Delay() >= 50*time.Millisecond {
			seenAbove = true // only possible with the 1 s throttling base
		}
		_ = s.RecordSuccess(tok)
	}
	if !seenAbove {
		t.Fatal("200 throttled retries all waited under 50ms: the 1 s throttling base is not used")
	}
	// Deep retries are capped at 20 s.
	tok := mustAcquire(t, s, "")
	for range 19 {
		tok = mustRefresh(t, s, tok, errTransient)
		if tok.Delay() >= 20*time.Second {
			t.Fatalf("retry %d waits %v, want < 20s", tok.RetryCount(), tok.Delay())
		}
	}
}

func TestStandardCosts(t *testing.T) {
	legacy := LegacyStandardOptions()
	tests := []struct {
		name string
		opts StandardOptions
		err  error
		cost int
	}{
		{"default transient", StandardOptions{}, errTransient, 14},
		{"default throttle", StandardOptions{}, errThrottled, 5},
		{"default timeout", StandardOptions{}, errTimeout, 14},
		{"legacy transient", legacy, errTransient, 5},
		{"legacy throttle", legacy, errThrottled, 5},
		{"legacy timeout", legacy, errTimeout, 10},
		{"custom", StandardOptions{RetryCost: 7, ThrottleCost: 2, TimeoutCost: 9}, errTimeout, 9},
		{"custom timeout defaults to retry cost", StandardOptions{RetryCost: 7}, errTimeout, 7},
		{"throttle wins over timeout", StandardOptions{}, WithInfo(errBoom, Info{Safety: Safe, Throttle: true, Timeout: true}), 5},
		{"negative costs take defaults", StandardOptions{RetryCost: -3}, errTransient, 14},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Bucket = NewTokenBucket(500)
			s := NewStandard(tt.opts)
			mustRefresh(t, s, mustAcquire(t, s, ""), tt.err)
			if got := tt.opts.Bucket.Available(); got != 500-tt.cost {
				t.Fatalf("after one retry the bucket holds %d, want %d", got, 500-tt.cost)
			}
		})
	}
}

func TestStandardLegacyBackoff(t *testing.T) {
	o := LegacyStandardOptions()
	e, ok := o.Backoff.(Exponential)
	if !ok || e.Base != time.Second || e.Max != 20*time.Second || e.Jitter != FullJitter {
		t.Fatalf("legacy backoff = %#v, want Exponential{1s, 20s, FullJitter}", o.Backoff)
	}
	if o.MaxAttempts != 0 && o.MaxAttempts != 3 {
		t.Fatalf("legacy MaxAttempts = %d, want 3", o.MaxAttempts)
	}
}

func TestStandardSuccessRefills(t *testing.T) {
	b := NewTokenBucket(500)
	s := NewStandard(StandardOptions{Bucket: b, Backoff: Constant(0)})

	// A first-attempt success on a full bucket changes nothing.
	if err := s.RecordSuccess(mustAcquire(t, s, "")); err != nil {
		t.Fatal(err)
	}
	if got := b.Available(); got != 500 {
		t.Fatalf("full bucket after success = %d, want 500", got)
	}

	// Two retries pay 28; the successful retry refunds its own 14 only.
	tok := mustAcquire(t, s, "")
	tok = mustRefresh(t, s, tok, errTransient)
	tok = mustRefresh(t, s, tok, errTransient)
	if got := b.Available(); got != 472 {
		t.Fatalf("after two retries = %d, want 472", got)
	}
	if err := s.RecordSuccess(tok); err != nil {
		t.Fatal(err)
	}
	if got := b.Available(); got != 486 {
		t.Fatalf("after the retry succeeded = %d, want 486", got)
	}

	// A throttled retry that succeeds refunds the 5 it paid, not 14.
	tok = mustRefresh(t, s, mustAcquire(t, s, ""), errThrottled)
	if err := s.RecordSuccess(tok); err != nil {
		t.Fatal(err)
	}
	if got := b.Available(); got != 486 {
		t.Fatalf("after a successful throttled retry = %d, want 486", got)
	}

	// First-attempt successes add SuccessIncrement each, capped at capacity.
	for range 13 {
		_ = s.RecordSuccess(mustAcquire(t, s, ""))
	}
	if got := b.Available(); got != 499 {
		t.Fatalf("after 13 successes = %d, want 499", got)
	}
	for range 5 {
		_ = s.RecordSuccess(mustAcquire(t, s, ""))
	}
	if got := b.Available(); got != 500 {
		t.Fatalf("after more successes = %d, want 500 (capped)", got)
	}

	s2 := NewStandard(StandardOptions{Bucket: b, SuccessIncrement: 10})
	b.Take(100)
	_ = s2.RecordSuccess(mustAcquire(t, s2, ""))
	if got := b.Available(); got != 410 {
		t.Fatalf("SuccessIncrement 10: %d, want 410", got)
	}
}

func TestStandardQuotaExhausted(t *testing.T) {
	b := NewTokenBucket(20)
	s := NewStandard(StandardOptions{Bucket: b, MaxAttempts: 10})
	tok := mustRefresh(t, s, mustAcquire(t, s, "db"), errTransient) // 20 → 6
	_, err := s.RefreshToken(tok, errTransient)
	if !errors.Is(err, ErrQuotaExhausted) {
		t.Fatalf("err = %v, want ErrQuotaExhausted", err)
	}
	var qe *QuotaError
	if !errors.As(err, &qe) {
		t.Fatalf("err = %T, want *QuotaError", err)
	}
	if qe.Scope != "db" || qe.Cost != 14 || qe.Available != 6 || qe.Delay < 0 || qe.Delay >= 100*time.Millisecond {
		t.Fatalf("QuotaError = %+v", *qe)
	}
	for _, want := range []string{"quota", "14", "6", `"db"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	// The first attempt is granted even with an empty quota.
	b.Take(b.Available())
	tok, err = s.AcquireInitialToken("db")
	if err != nil {
		t.Fatalf("initial token with an empty quota: %v", err)
	}
	if _, err := s.RefreshToken(tok, errThrottled); !errors.Is(err, ErrQuotaExhausted) {
		t.Fatalf("empty quota: err = %v", err)
	}
	// A zero-capacity bucket never pays for a retry.
	z := NewStandard(StandardOptions{Bucket: NewTokenBucket(0)})
	if _, err := z.RefreshToken(mustAcquire(t, z, ""), errThrottled); !errors.Is(err, ErrQuotaExhausted) {
		t.Fatalf("capacity 0: err = %v", err)
	}
}

func TestStandardNotRetryable(t *testing.T) {
	tests := []struct {
		name string
		err  error
		why  error // the refusal, which says why
	}{
		{"nil", nil, errNilError},
		{"unclassified", errBoom, errMaybeSafe},
		{"unsafe", Permanent(errTransient), errUnsafe},
		{"maybe-safe client fault", WithInfo(errBoom, Info{Fault: FaultClient}), errClientFault},
		{"maybe-safe unknown fault", WithInfo(errBoom, Info{Throttle: true}), errMaybeSafe},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewTokenBucket(500)
			s := NewStandard(StandardOptions{Bucket: b})
			_, err := s.RefreshToken(mustAcquire(t, s, ""), tt.err)
			if !errors.Is(err, ErrNotRetryable) || err != tt.why {
				t.Fatalf("err = %v, want %v", err, tt.why)
			}
			if b.Available() != 500 {
				t.Fatalf("a refused retry charged the quota: %d", b.Available())
			}
		})
	}
	// MaybeSafe with a server fault is retried.
	s := NewStandard(StandardOptions{})
	mustRefresh(t, s, mustAcquire(t, s, ""), WithInfo(errBoom, Info{Fault: FaultServer}))
}

func TestStandardRetryAfter(t *testing.T) {
	s := NewStandard(StandardOptions{Backoff: Constant(10 * time.Millisecond), MaxAttempts: 5})
	tok := mustRefresh(t, s, mustAcquire(t, s, ""), RetryAfter(errBoom, 3*time.Second))
	if tok.Delay() != 3*time.Second {
		t.Fatalf("delay = %v, want the service's 3s", tok.Delay())
	}
	long := NewStandard(StandardOptions{Backoff: Constant(10 * time.Second)})
	tok = mustRefresh(t, long, mustAcquire(t, long, ""), RetryAfter(errBoom, 3*time.Second))
	if tok.Delay() != 10*time.Second {
		t.Fatalf("delay = %v, want the longer backoff 10s", tok.Delay())
	}
	// 5 minutes is the default cap: exactly 5 min is obeyed, a nanosecond more is refused.
	tok = mustRefresh(t, s, mustAcquire(t, s, ""), RetryAfter(errBoom, 5*time.Minute))
	if tok.Delay() != 5*time.Minute {
		t.Fatalf("delay = %v, want 5m", tok.Delay())
	}
	_, err := s.RefreshToken(mustAcquire(t, s, ""), RetryAfter(errBoom, 5*time.Minute+1))
	var rae *RetryAfterError
	if !errors.Is(err, ErrRetryAfterTooLong) || !errors.As(err, &rae) || rae.Max != 5*time.Minute || rae.RetryAfter != 5*time.Minute+1 {
		t.Fatalf("err = %v, want a RetryAfterError over the 5m cap", err)
	}
	// A hostile hour is refused before it costs quota.
	b := NewTokenBucket(500)
	capped := NewStandard(StandardOptions{Bucket: b, MaxRetryAfter: time.Second})
	if _, err := capped.RefreshToken(mustAcquire(t, capped, ""), RetryAfter(errBoom, time.Hour)); !errors.Is(err, ErrRetryAfterTooLong) {
		t.Fatalf("err = %v, want ErrRetryAfterTooLong", err)
	}
	if b.Available() != 500 {
		t.Fatalf("refused retry charged %d tokens", 500-b.Available())
	}
}

// TestStandardCheckOrder pins the order of RefreshToken's checks: token,
// retryable, attempts, delay, quota.
func TestStandardCheckOrder(t *testing.T) {
	empty := func() *TokenBucket { b := NewTokenBucket(10); b.Take(10); return b }
	s := NewStandard(StandardOptions{Bucket: empty(), MaxAttempts: 2, MaxRetryAfter: time.Second})

	spent := mustAcquire(t, s, "")
	_ = s.RecordSuccess(spent)
	if _, err := s.RefreshToken(spent, Permanent(errBoom)); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("spent token with unsafe error: %v, want ErrInvalidToken first", err)
	}
	// Last attempt, unsafe error, hint too long, empty quota: not retryable wins.
	one := NewStandard(StandardOptions{Bucket: empty(), MaxAttempts: 1, MaxRetryAfter: time.Second})
	if _, err := one.RefreshToken(mustAcquire(t, one, ""), Permanent(RetryAfter(errBoom, time.Hour))); !errors.Is(err, ErrNotRetryable) {
		t.Errorf("unsafe on the last attempt: %v, want ErrNotRetryable", err)
	}
	// Last attempt, hint too long, empty quota: attempts win.
	if _, err := one.RefreshToken(mustAcquire(t, one, ""), RetryAfter(errBoom, time.Hour)); !errors.Is(err, ErrMaxAttempts) {
		t.Errorf("last attempt with a long hint: %v, want ErrMaxAttempts", err)
	}
	// Hint too long with an empty quota: the hint wins.
	if _, err := s.RefreshToken(mustAcquire(t, s, ""), RetryAfter(errBoom, time.Hour)); !errors.Is(err, ErrRetryAfterTooLong) {
		t.Errorf("long hint with empty quota: %v, want ErrRetryAfterTooLong", err)
	}
	if _, err := s.RefreshToken(mustAcquire(t, s, ""), errTransient); !errors.Is(err, ErrQuotaExhausted) {
		t.Errorf("empty quota: %v, want ErrQuotaExhausted", err)
	}
}

func TestTokensAreSingleUse(t *testing.T) {
	strategies := map[string]func() Strategy{
		"Standard": func() Strategy { return NewStandard(StandardOptions{MaxAttempts: 10}) },
		"Simple":   func() Strategy { return &Simple{MaxAttempts: 10} },
		"No":       func() Strategy { return &No{} },
	}
	for name, mk := range strategies {
		t.Run(name, func(t *testing.T) {
			s := mk()
			invalid := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, ErrInvalidToken) {
					t.Errorf("%s: err = %v, want ErrInvalidToken", what, err)
				}
			}
			tok := mustAcquire(t, s, "")
			copyOf := tok
			if _, err := s.RefreshToken(tok, errTransient); errors.Is(err, ErrInvalidToken) {
				t.Fatalf("first refresh rejected the token: %v", err)
			}
			_, err := s.RefreshToken(tok, errTransient)
			invalid("refresh twice", err)
			_, err = s.RefreshToken(copyOf, errTransient)
			invalid("refresh a copy", err)
			invalid("record after refresh", s.RecordSuccess(tok))

			tok = mustAcquire(t, s, "")
			if err := s.RecordSuccess(tok); err != nil {
				t.Fatalf("record: %v", err)
			}
			invalid("record twice", s.RecordSuccess(tok))
			_, err = s.RefreshToken(tok, errTransient)
			invalid("refresh after record", err)

			// The spent token's per-request state is reused by the next request;
			// the stale token must still be rejected, and the new one accepted.
			fresh := mustAcquire(t, s, "")
			invalid("stale token after reuse", s.RecordSuccess(tok))
			if err := s.RecordSuccess(fresh); err != nil {
				t.Fatalf("fresh token rejected: %v", err)
			}

			// Tokens from elsewhere.
			other := mk()
			invalid("token of another strategy", s.RecordSuccess(mustAcquire(t, other, "")))
			invalid("zero token", s.RecordSuccess(Token{}))
			invalid("foreign token", s.RecordSuccess(NewToken(0, 0, "mine")))
			_, err = s.RefreshToken(Token{}, errTransient)
			invalid("refresh zero token", err)
		})
	}
}

func TestTokenSpentOnceUnderRace(t *testing.T) {
	s := NewStandard(StandardOptions{MaxAttempts: 10})
	for range 100 {
		tok := mustAcquire(t, s, "")
		var ok atomic.Int32
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				// Any answer but ErrInvalidToken means the token was accepted
				// (a refresh may still be refused once the quota runs low).
				if _, err := s.RefreshToken(tok, errTransient); !errors.Is(err, ErrInvalidToken) {
					ok.Add(1)
				}
				if err := s.RecordSuccess(tok); !errors.Is(err, ErrInvalidToken) {
					ok.Add(1)
				}
			})
		}
		wg.Wait()
		if ok.Load() != 1 {
			t.Fatalf("one token was accepted %d times", ok.Load())
		}
	}
}

func TestStandardScopes(t *testing.T) {
	s := NewStandard(StandardOptions{MaxAttempts: 100})
	drain := func(scope string, retries int) {
		tok := mustAcquire(t, s, scope)
		for range retries {
			tok = mustRefresh(t, s, tok, errTransient)
		}
	}
	drain("a", 2)
	if got := s.Available("a"); got != 472 {
		t.Fatalf("scope a = %d, want 472", got)
	}
	if got := s.Available("b"); got != 500 {
		t.Fatalf("untouched scope b = %d, want 500", got)
	}
	if got := s.Available(""); got != 500 {
		t.Fatalf("empty scope = %d, want 500", got)
	}
	// A storm in one scope does not starve another.
	for {
		tok := mustAcquire(t, s, "a")
		if _, err := s.RefreshToken(tok, errTransient); err != nil {
			break
		}
	}
	if s.Available("a") >= 14 {
		t.Fatalf("scope a not drained: %d", s.Available("a"))
	}
	mustRefresh(t, s, mustAcquire(t, s, "b"), errTransient)
}

func TestStandardScopesLRU(t *testing.T) {
	s := NewStandard(StandardOptions{MaxScopes: 2})
	use := func(scope string) { mustRefresh(t, s, mustAcquire(t, s, scope), errTransient) }
	use("a")
	use("b")
	use("a") // b is now least recently used
	use("c") // evicts b; c starts no fuller than b was (486), then pays 14
	if got := s.Available("a"); got != 472 {
		t.Errorf("a = %d, want 472 (kept)", got)
	}
	if got := s.Available("c"); got != 472 {
		t.Errorf("c = %d, want 472: it replaced b, drained to 486, and paid 14", got)
	}
	if got := s.Available("b"); got != 500 {
		t.Errorf("b = %d, want 500 (unused now)", got)
	}
	if n := s.scopes.count; n != 2 {
		t.Errorf("%d scopes kept, want 2", n)
	}
	use("b") // back, evicting a (472): it must not come back full
	if got := s.Available("b"); got != 458 {
		t.Errorf("b = %d, want 458: a drained scope evicted and used again must not get a full quota", got)
	}
	// The empty scope does not count against the bound and is never dropped.
	use("")
	use("d")
	use("e")
	if got := s.Available(""); got != 486 {
		t.Errorf("empty scope = %d, want 486", got)
	}
}

func TestStandardScopesBoundedUnderConcurrency(t *testing.T) {
	s := NewStandard(StandardOptions{MaxScopes: 8})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				scope := string(rune('a' + (g*7+i)%26))
				tok := mustAcquire(t, s, scope)
				_ = s.RecordSuccess(tok)
			}
		})
	}
	wg.Wait()
	n := 0
	s.scopes.byName.Range(func(any, any) bool { n++; return true })
	if n > 8 || s.scopes.count != n {
		t.Fatalf("%d scopes held (count %d), bound is 8", n, s.scopes.count)
	}
}

func TestSharedBucketAcrossStrategiesAndScopes(t *testing.T) {
	b := NewTokenBucket(30)
	s1 := NewStandard(StandardOptions{Bucket: b})
	s2 := NewStandard(StandardOptions{Bucket: b})
	mustRefresh(t, s1, mustAcquire(t, s1, "x"), errTransient)
	mustRefresh(t, s2, mustAcquire(t, s2, "y"), errTransient)
	if b.Available() != 2 {
		t.Fatalf("shared bucket = %d, want 2", b.Available())
	}
	if s1.Available("anything") != 2 || s2.Available("") != 2 {
		t.Fatal("Available does not report the shared bucket")
	}
	if _, err := s2.RefreshToken(mustAcquire(t, s2, "z"), errTransient); !errors.Is(err, ErrQuotaExhausted) {
		t.Fatalf("err = %v, want ErrQuotaExhausted from the shared quota", err)
	}
}

// TestStandardConcurrentAccounting hammers one Standard from many goroutines
// and checks that the bucket stays within [0, capacity] throughout and ends
// exactly where the granted, refunded and unrefunded retries say.
func TestStandardConcurrentAccounting(t *testing.T) {
	const capacity = 2000
	b := NewTokenBucket(capacity)
	s := NewStandard(StandardOptions{Bucket: b, MaxAttempts: 4, Backoff: Constant(0)})

	stop := make(chan struct{})
	var watcher sync.WaitGroup
	var outOfRange atomic.Int64
	watcher.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if v := b.Available(); v < 0 || v > capacity {
				outOfRange.Store(int64(v) + 1)
			}
		}
	})

	var unrefunded atomic.Int64 // tokens paid for retries that never succeeded
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 500 {
				tok := mustAcquire(t, s, "")
				failures := (g + i) % 4 // 0..3 failed attempts before the outcome
				paid := 0
				refused := false
				for f := range failures {
					err := errTransient
					if f%2 == 1 {
						err = errThrottled
					}
					next, rerr := s.RefreshToken(tok, err)
					if rerr != nil {
						refused = true
						break
					}
					paid += next.st.cost
					tok = next
				}
				switch {
				case refused:
					unrefunded.Add(int64(paid))
				case failures == 0:
					// First-attempt successes would add a capped +1, which
					// depends on timing; spend the token without recording.
					_, _ = s.RefreshToken(tok, Permanent(errBoom))
				case (g+i)%3 == 0:
					// Give up after the last granted retry fails for good.
					_, _ = s.RefreshToken(tok, Permanent(errBoom))
					unrefunded.Add(int64(paid))
				default:
					_ = s.RecordSuccess(tok) // refunds the last retry's cost
					unrefunded.Add(int64(paid - tok.st.cost))
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	watcher.Wait()
	if v := outOfRange.Load(); v != 0 {
		t.Fatalf("bucket left [0, %d]: saw %d", capacity, v-1)
	}
	if got, want := b.Available(), capacity-int(unrefunded.Load()); got != want {
		t.Fatalf("bucket = %d, accounting says %d", got, want)
	}
}

func TestReleaseTokenRefundsARetryNeverMade(t *testing.T) {
	b := NewTokenBucket(500)
	s := NewStandard(StandardOptions{Bucket: b})
	tok := mustRefresh(t, s, mustAcquire(t, s, ""), errTransient)
	if b.Available() != 486 {
		t.Fatalf("bucket = %d after a granted retry", b.Available())
	}
	if err := s.ReleaseToken(tok); err != nil {
		t.Fatal(err)
	}
	if b.Available() != 500 {
		t.Fatalf("bucket = %d after the release, want 500", b.Available())
	}
	if err := s.ReleaseToken(tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("second release: %v, want ErrInvalidToken", err)
	}
	if err := s.RecordSuccess(tok); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("record after release: %v, want ErrInvalidToken", err)
	}
	// An initial token releases for nothing.
	if err := s.ReleaseToken(mustAcquire(t, s, "")); err != nil || b.Available() != 500 {
		t.Fatalf("release of an initial token: %v, bucket %d", err, b.Available())
	}
	for _, r := range []Releaser{&Simple{}, &No{}} {
		st := r.(Strategy)
		if err := r.ReleaseToken(mustAcquire(t, st, "")); err != nil {
			t.Fatalf("%T: %v", r, err)
		}
	}
}

// TestScopesEvictFullBucketsFirst: when the bound is reached, a drained
// scope survives a full one even if the full one was used more recently,
// because dropping a drained bucket would hand a failing service a new quota.
func TestScopesEvictFullBucketsFirst(t *testing.T) {
	s := NewStandard(StandardOptions{MaxScopes: 2})
	mustRefresh(t, s, mustAcquire(t, s, "drained"), errTransient) // oldest, short 14
	_ = s.RecordSuccess(mustAcquire(t, s, "full"))                // newer, full
	_ = s.RecordSuccess(mustAcquire(t, s, "new"))                 // forces an eviction
	if got := s.Available("drained"); got != 486 {
		t.Fatalf("drained scope = %d, want 486: it was dropped instead of the full one", got)
	}
	if _, ok := s.scopes.byName.Load("full"); ok {
		t.Fatal("the full scope was kept")
	}
}

func TestStandardCapacityOption(t *testing.T) {
	s := NewStandard(StandardOptions{Capacity: 30})
	if got := s.Available("x"); got != 30 {
		t.Fatalf("unused scope = %d, want 30", got)
	}
	tok := mustRefresh(t, s, mustAcquire(t, s, "x"), errTransient)
	tok = mustRefresh(t, s, tok, errTransient)
	if _, err := s.RefreshToken(mustAcquire(t, s, "x"), errTransient); !errors.Is(err, ErrQuotaExhausted) {
		t.Fatalf("err = %v after 28 of 30 tokens, want ErrQuotaExhausted", err)
	}
	_ = tok
}

type recBackoff struct {
	mu   sync.Mutex
	ns   []int
	prev []time.Duration
}

func (r *recBackoff) Delay(n int, prev time.Duration) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ns = append(r.ns, n)
	r.prev = append(r.prev, prev)
	return time.Duration(n) * time.Second
}

func TestThrottleBackoffUsed(t *testing.T) {
	s := NewStandard(StandardOptions{Backoff: Constant(time.Millisecond), ThrottleBackoff: Constant(7 * time.Second)})
	if d := mustRefresh(t, s, mustAcquire(t, s, ""), errThrottled).Delay(); d != 7*time.Second {
		t.Fatalf("throttled delay %v", d)
	}
	if d := mustRefresh(t, s, mustAcquire(t, s, ""), errTransient).Delay(); d != time.Millisecond {
		t.Fatalf("transient delay %v", d)
	}
	sp := &Simple{Backoff: Constant(3 * time.Second)}
	if d := mustRefresh(t, sp, mustAcquire(t, sp, ""), errThrottled).Delay(); d != 3*time.Second {
		t.Fatalf("simple throttled delay %v", d)
	}
}

func TestBackoffArgs(t *testing.T) {
	rb := &recBackoff{}
	s := NewStandard(StandardOptions{Backoff: rb, MaxAttempts: 4})
	tok := mustAcquire(t, s, "")
	for range 3 {
		tok = mustRefresh(t, s, tok, errTransient)
	}
	wantN := []int{1, 2, 3}
	wantP := []time.Duration{0, time.Second, 2 * time.Second}
	for i := range wantN {
		if rb.ns[i] != wantN[i] || rb.prev[i] != wantP[i] {
			t.Fatalf("calls n=%v prev=%v", rb.ns, rb.prev)
		}
	}
}

// TestStandardNeedsQuotaAndBudget: a retry needs both; when the budget
// refuses, the quota gets its tokens back, and a released retry refunds both.
func TestStandardNeedsQuotaAndBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bucket := NewTokenBucket(1000)
		budget := NewBudget(BudgetOptions{Ratio: -1, MinPerSecond: 0.1, Window: 10 * time.Second}) // one retry per window
		s := NewStandard(StandardOptions{Bucket: bucket, Budget: budget, Backoff: Constant(0)})
		calls := 0
		err := Do(context.Background(), s, func(context.Context) error { calls++; return errTransient })
		if !errors.Is(err, ErrBudgetExhausted) || calls != 2 {
			t.Fatalf("err %v after %d calls, want ErrBudgetExhausted after 2", err, calls)
		}
		if got := bucket.Available(); got != 1000-DefaultRetryCost {
			t.Fatalf("bucket %d: the refused retry's tokens were not given back", got)
		}

		time.Sleep(11 * time.Second) // the budget's window has passed
		tok, _ := s.AcquireInitialToken("")
		tok, err = s.RefreshToken(tok, errTransient)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.ReleaseToken(tok); err != nil {
			t.Fatal(err)
		}
		if bucket.Available() != 1000-DefaultRetryCost || budget.Available() != 1 {
			t.Fatalf("after a release: bucket %d, budget %d; want both refunded", bucket.Available(), budget.Available())
		}
	})
}

// A retry the service answers with a client fault (a NotFound after a
// 500) gives its cost back to the quota, as a successful retry does: the
// service is at work (aws/aws-sdk-go-v2#3186, where the SDK keeps it). A
// retry that fails again with the service's fault keeps its cost.
func TestStandardRetryAnsweredWithAClientFaultGivesItsCostBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errNotFound := WithInfo(errors.New("404"), Info{Fault: FaultClient})
		for _, tc := range []struct {
			name string
			last error
			want int
		}{
			{"client fault", errNotFound, 500},
			{"permanent client fault", WithInfo(errors.New("400"), Info{Safety: Unsafe, Fault: FaultClient}), 500},
			{"server fault", errTransient, 500 - 2*DefaultRetryCost},
			{"throttle", errBrk429, 500 - DefaultRetryCost - DefaultThrottleCost},
		} {
			q := NewTokenBucket(500)
			s := NewStandard(StandardOptions{Bucket: q, MaxAttempts: 3, Backoff: Constant(time.Millisecond), ThrottleBackoff: Constant(time.Millisecond)})
			n := 0
			err := Do(context.Background(), s, func(context.Context) error {
				if n++; n == 1 {
					return errTransient
				}
				return tc.last
			})
			if !errors.Is(err, tc.last) {
				t.Fatalf("%s: err = %v", tc.name, err)
			}
			if got := q.Available(); got != tc.want {
				t.Errorf("%s: quota after the call = %d, want %d", tc.name, got, tc.want)
			}
		}
	})
}
