package retry

import (
	"errors"
	"math"
	"sync/atomic"
	"time"
)

// ErrBudgetExhausted: a retry was refused to keep retries' share of the
// load down: a Budget holds no retry now, because retries already make up its
// ratio of recent requests; or Adaptive's failure streak, client-side
// throttling or throttled send-rate limiter refused it (the error's message
// says which). It is the usual give-up reason of the default strategy.
var ErrBudgetExhausted = errors.New("retry: retry budget exhausted")

// errBudget is the refusal of a retry that the budget could not pay for.
var errBudget = &refusal{ErrBudgetExhausted, "retries already make up the budget's share of recent requests"}

// Defaults of BudgetOptions.
const (
	DefaultBudgetRatio        = 0.2
	DefaultBudgetMinPerSecond = 1.0
	DefaultBudgetWindow       = 10 * time.Second
)

// BudgetOptions configure a Budget. Each zero field takes its default.
type BudgetOptions struct {
	// Ratio is the share of requests that may be retried over the window:
	// 0.2 lets retries add at most 20 % to the load. 0 = 0.2, as Finagle's
	// retry budget; negative = no retries beyond the floor.
	Ratio float64
	// MinPerSecond is the floor: retries allowed per second whatever the
	// traffic, so that a client sending a few requests can still retry one.
	// 0 = 1; negative = no floor.
	MinPerSecond float64
	// Window is how long a request counts towards the budget, and a retry
	// against it. 0 = 10 s.
	Window time.Duration
	// Now is the clock; nil = time.Now. Simulations and tests set it.
	Now func() time.Time
}

// Budget is a retry budget in the manner of Finagle's and the Google SRE
// book's: over a sliding window, retries may not exceed a ratio of the
// requests made plus a small floor. Where a token-bucket quota (TokenBucket)
// drains when failures outnumber successes, a budget bounds the load that
// retries add, whatever happens: with a ratio of 0.2 a fleet of clients can
// never send more than 1.2 times its requests (plus the floor), however long
// the service fails.
//
// Call Deposit once per request and TryWithdraw before each retry. Deposit
// takes no lock and, but for a budget's first, reads no clock: it is one
// atomic add, and the deposits are placed in the window when the budget is
// next consulted, spread evenly over the time since then, or since the
// first deposit (a burst of requests long before a failure therefore counts
// for less than the same requests made just before it, which errs on the
// side of fewer retries; an hour of requests before the first failure counts
// as a window's share of them, not as a window's worth). TryWithdraw takes a
// short lock to place the pending deposits; under contention it may let
// through at most one retry per concurrent caller more than the budget
// holds.
//
// A Budget is safe for concurrent use. The zero value is ready to use with
// the default options; NewBudget sets others. It must not be copied after
// first use.
type Budget struct {
	opts        BudgetOptions
	pending     atomic.Int64 // deposits not yet placed in a slot
	placed      placement    // begun at the first deposit
	clock       clock
	deposits    rolling // requests, placed
	withdrawals rolling // retries
}

// NewBudget returns a Budget with the given options.
func NewBudget(opts BudgetOptions) *Budget {
	return &Budget{opts: opts}
}

// Deposit records one request. It costs one atomic add and a load, and a
// clock read once, at the budget's first deposit: without the time they
// began, the first placement would count every deposit since as recent.
func (b *Budget) Deposit() {
	if !b.placed.started() {
		b.placed.begin(b.now())
	}
	b.pending.Add(1)
}

// TryWithdraw reports whether the budget allows one more retry now, and if
// it does, records the retry.
func (b *Budget) TryWithdraw() bool {
	now := b.now()
	slot := slotOf(now, b.window())
	b.place(now, slot)
	if b.balance(slot) < 1 {
		return false
	}
	b.withdrawals.add(slot, milli)
	return true
}

// Available returns how many retries the budget would allow now.
func (b *Budget) Available() int {
	now := b.now()
	slot := slotOf(now, b.window())
	b.place(now, slot)
	return int(min(max(b.balance(slot), 0), 1<<53)) // a huge ratio must not overflow the conversion
}

// refund gives back a withdrawal whose retry was not made, from whichever
// slot of the window it was taken in: a retry released after a wait that
// crossed into a later slot would otherwise be lost for the whole window.
func (b *Budget) refund() {
	slot := slotOf(b.now(), b.window())
	b.withdrawals.remove(slot, milli)
}

// place moves the pending deposits into the window. Deposits made since the
// last placement are taken to be spread evenly over the time since then, so
// only the share of them that falls inside the window counts.
func (b *Budget) place(now int64, slot int64) {
	var n int64
	share := b.placed.take(now, b.window(), func() { n = b.pending.Swap(0) })
	if n == 0 {
		return
	}
	b.deposits.add(slot, int64(float64(n)*share*milli))
}

// balance is the retries the budget holds in the window ending with slot.
func (b *Budget) balance(slot int64) float64 {
	ratio, floor := b.opts.Ratio, b.opts.MinPerSecond
	if ratio == 0 {
		ratio = DefaultBudgetRatio
	}
	if floor == 0 {
		floor = DefaultBudgetMinPerSecond
	}
	ratio, floor = max(ratio, 0), max(floor, 0)
	if math.IsNaN(ratio) || math.IsInf(ratio, 0) {
		ratio = DefaultBudgetRatio
	}
	if math.IsNaN(floor) || math.IsInf(floor, 0) {
		floor = DefaultBudgetMinPerSecond
	}
	deposits := float64(b.deposits.sum(slot)) / milli
	withdrawals := float64(b.withdrawals.sum(slot)) / milli
	return ratio*deposits + floor*b.window().Seconds() - withdrawals
}

func (b *Budget) window() time.Duration {
	if b.opts.Window <= 0 {
		return DefaultBudgetWindow
	}
	return b.opts.Window
}

// now reads the budget's clock, which a wall clock's steps do not move.
func (b *Budget) now() int64 { return b.clock.read(b.opts.Now) }
