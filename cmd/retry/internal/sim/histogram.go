package sim

import (
	"math/bits"
	"time"
)

// subBits sets the histogram's precision: a latency below 2^(subBits+1) ns
// (131 µs) is kept exactly, a longer one in a bin 2^-subBits of its size
// wide (1.5e-5: 15 µs at one second), finer than the table shows.
const subBits = 16

// histogram counts latencies in bins whose width grows with their value, so
// that its size depends on the range of the latencies, not their number
// (a few MB for a run whose latencies span microseconds to minutes).
type histogram struct {
	// bins[shift][m] counts the latencies v with v>>shift == m: shift 0
	// holds [0, 2^(subBits+1)) ns exactly; shift k > 0 holds
	// [2^(subBits+k), 2^(subBits+k+1)) in bins of 2^k ns, at m-2^subBits.
	// An octave is made when its first latency comes.
	bins   [64 - subBits][]uint32
	n      int
	anyCut bool
	minCut time.Duration // the shortest latency cut off by the end of the run
}

// locate returns the bin of v.
func locate(v time.Duration) (shift int, m uint64) {
	u := uint64(max(v, 0))
	shift = max(bits.Len64(u)-(subBits+1), 0)
	return shift, u >> shift
}

// add counts a latency v, cut if the end of the run cut it off.
func (h *histogram) add(v time.Duration, cut bool) {
	shift, m := locate(v)
	if h.bins[shift] == nil {
		size := 1 << subBits
		if shift == 0 {
			size <<= 1
		}
		h.bins[shift] = make([]uint32, size)
	}
	if shift > 0 {
		m -= 1 << subBits
	}
	h.bins[shift][m]++
	h.n++
	if cut && (!h.anyCut || v < h.minCut) {
		h.anyCut, h.minCut = true, v
	}
}

// percentile returns the p-th latency, the middle of its bin, and whether
// a latency cut off by the end of the run falls at or below it (then the
// true value is higher).
func (h *histogram) percentile(p float64) (time.Duration, bool) {
	if h.n == 0 {
		return 0, false
	}
	// The rank of the sorted latency that is the percentile, from 1.
	rank := uint64(min(max(ceil(p*float64(h.n)), 1), h.n))
	var seen uint64
	for shift, octave := range h.bins {
		for i, c := range octave {
			if seen += uint64(c); seen < rank {
				continue
			}
			m := uint64(i)
			if shift > 0 {
				m += 1 << subBits
			}
			lo := time.Duration(m << shift)
			v := lo + time.Duration(uint64(1)<<shift/2)
			cutShift, cutM := locate(h.minCut)
			cut := h.anyCut && (cutShift < shift || cutShift == shift && cutM <= m)
			return v, cut
		}
	}
	panic("unreachable: the histogram holds fewer latencies than it counted")
}

// ceil is math.Ceil to an int.
func ceil(x float64) int {
	i := int(x)
	if float64(i) < x {
		i++
	}
	return i
}
