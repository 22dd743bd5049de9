package chart

import (
	"math"
	"strconv"

	"gonum.org/v1/plot"
)

// highest returns the largest finite value of vals, 0 if none.
func highest(vals []float64) float64 {
	hi := 0.0
	for _, v := range vals {
		if !math.IsInf(v, 0) && v > hi {
			hi = v
		}
	}
	return hi
}

// niceMax rounds m up to a whole number that a tick falls on, so that the
// top of the y axis is labelled; at least 1.
func niceMax(m float64) float64 {
	if !(m > 1) || math.IsInf(m, 0) {
		if math.IsInf(m, 1) {
			return math.MaxFloat64
		}
		return 1
	}
	step := niceStep(m / 3)
	return math.Ceil(m/step) * step
}

// niceStep returns the whole number of the form 1, 2 or 5 times a power of
// ten nearest above raw, at least 1.
func niceStep(raw float64) float64 {
	if !(raw > 1) {
		return 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}

// wholeTicks puts about target ticks at whole numbers (1, 2 or 5 times a
// power of ten apart), labelled with their unit: "20 s", "2000/s".
type wholeTicks struct {
	unit   string
	target int
}

func (t wholeTicks) Ticks(lo, hi float64) []plot.Tick {
	span := hi - lo
	if !(span > 0) || math.IsInf(span, 0) || span > 1e15 {
		return nil
	}
	step := niceStep(span / float64(max(t.target, 1)))
	var ticks []plot.Tick
	first := math.Ceil(lo/step-1e-9) * step
	for i := range 50 {
		v := first + float64(i)*step
		if v > hi+step*1e-9 {
			break
		}
		label := strconv.FormatFloat(v+0, 'f', 0, 64)
		if label != "0" {
			label += t.unit
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: label})
	}
	return ticks
}

// unlabeled is a Ticker whose ticks carry no labels.
type unlabeled struct{ plot.Ticker }

func (u unlabeled) Ticks(lo, hi float64) []plot.Tick {
	ts := u.Ticker.Ticks(lo, hi)
	for i := range ts {
		ts[i].Label = ""
	}
	return ts
}
