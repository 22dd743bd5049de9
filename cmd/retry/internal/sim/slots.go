package sim

import (
	"time"

	"github.com/retrykit/retry"
)

// slots holds the state of the requests in flight, column by column and in
// chunks, so that growing never copies, nor holds two copies of, millions of
// requests. A slot is reused once its request is over. A request of a
// strategy that decides without tokens (stepper) takes 20 bytes: when it was
// issued, the retries it has made and the wait before its pending attempt.
// Any other request holds its strategy's live token (about 90 bytes, and the
// strategy's own state for it) and its client, and, if the policy has
// breakers, its breaker's ticket for the attempt in flight (24 bytes).
type slots struct {
	tokens      bool // requests hold tokens, not retries and a wait
	withTickets bool // requests hold their breaker's tickets too

	issued [][]time.Duration // when the request was issued
	n      [][]int32         // retries made, or the client with tokens; in a free slot, the next free one
	delay  [][]time.Duration // without tokens: the wait before the pending attempt
	toks   [][]retry.Token   // with tokens: the token of the pending attempt

	tickets [][]retry.BreakerTicket // with breakers: the breaker's leave for the attempt in flight

	used int32 // slots ever taken
	free int32 // the first free slot, or -1
}

func newSlots(tokens, tickets bool) slots {
	return slots{tokens: tokens, withTickets: tickets, free: -1}
}

func split(id int32) (chunk, i int) { return int(id >> chunkBits), int(id & chunkMask) }

// take returns a free slot, growing the store by a chunk if there is none.
func (s *slots) take() int32 {
	if id := s.free; id >= 0 {
		c, i := split(id)
		s.free = s.n[c][i]
		return id
	}
	if int(s.used) == len(s.issued)<<chunkBits {
		s.issued = append(s.issued, make([]time.Duration, chunkLen))
		s.n = append(s.n, make([]int32, chunkLen))
		if s.tokens {
			s.toks = append(s.toks, make([]retry.Token, chunkLen))
			if s.withTickets {
				s.tickets = append(s.tickets, make([]retry.BreakerTicket, chunkLen))
			}
		} else {
			s.delay = append(s.delay, make([]time.Duration, chunkLen))
		}
	}
	id := s.used
	s.used++
	return id
}

// release frees the slot of a request that is over.
func (s *slots) release(id int32) {
	c, i := split(id)
	if s.tokens {
		s.toks[c][i] = retry.Token{} // let the strategy's state for it go
	}
	s.n[c][i] = s.free
	s.free = id
}
