package sim

import "time"

// item is a pending event of Run, packed into 16 bytes: millions are pending
// at once in a big run. It holds the event's time (under 2^47 ns, which
// Scenario.Check ensures), the order it was scheduled in (48 bits: ties of
// time break on it, so a run is the same every time and simultaneous events
// happen in the order they were scheduled), its kind, the answer of an
// evAnswer or evBroken, and its id (28 bits): the client of an evIssue, the
// request's slot otherwise. Comparing hi, then lo, orders items by time,
// then by scheduling order.
type item struct{ hi, lo uint64 }

const (
	idBits  = 28
	maxID   = 1<<idBits - 1
	seqBits = 48
	maxSeq  = 1<<seqBits - 1
	// maxAt bounds the time of any event, and so a run's end.
	maxAt = time.Duration(1<<47 - 1)
)

func pack(at time.Duration, seq uint64, kind, ans uint8, id int32) item {
	return item{
		hi: uint64(at)<<16 | seq>>32,
		lo: seq<<32 | uint64(kind&3)<<30 | uint64(ans&3)<<28 | uint64(id)&maxID,
	}
}

func (e item) at() time.Duration { return time.Duration(e.hi >> 16) }
func (e item) kind() uint8       { return uint8(e.lo >> 30 & 3) }
func (e item) ans() uint8        { return uint8(e.lo >> 28 & 3) }
func (e item) id() int32         { return int32(e.lo & maxID) }

func (e item) before(f item) bool { return e.hi < f.hi || e.hi == f.hi && e.lo < f.lo }

// pending is a binary min-heap of items, written out rather than through
// container/heap, whose interface would box every item. It grows in chunks,
// so that growing never holds two copies of millions of items at once.
type pending struct {
	chunks [][]item
	n      int
}

const (
	chunkBits = 12
	chunkLen  = 1 << chunkBits
	chunkMask = chunkLen - 1
)

func (h *pending) len() int { return h.n }

func (h *pending) at(i int) *item { return &h.chunks[i>>chunkBits][i&chunkMask] }

func (h *pending) push(e item) {
	if h.n == len(h.chunks)<<chunkBits {
		h.chunks = append(h.chunks, make([]item, chunkLen))
	}
	i := h.n
	h.n++
	for i > 0 {
		parent := (i - 1) / 2
		p := h.at(parent)
		if !e.before(*p) {
			break
		}
		*h.at(i) = *p
		i = parent
	}
	*h.at(i) = e
}

func (h *pending) pop() item {
	top := *h.at(0)
	h.n--
	last := *h.at(h.n)
	i := 0
	for {
		l := 2*i + 1
		if l >= h.n {
			break
		}
		small := l
		if r := l + 1; r < h.n && h.at(r).before(*h.at(l)) {
			small = r
		}
		if !h.at(small).before(last) {
			break
		}
		*h.at(i) = *h.at(small)
		i = small
	}
	if h.n > 0 {
		*h.at(i) = last
	}
	return top
}
