package chart

import (
	"image/color"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// newPanel makes the plot of series i, with room over it for a name of
// nameLines lines.
func newPanel(c Chart, i int, s Series, xmax, ymax, capacity float64, inc incident, hasInc, yNumbers, xNumbers bool, nameLines int) *plot.Plot {
	p := plot.New()
	// Room for the panel's name, which render draws over the data.
	p.Title.TextStyle = style(bold, panelSize, color.Transparent)
	p.Title.Padding = vg.Length(4)
	p.Title.Text = strings.Repeat("Mg\n", nameLines-1) + "Mg"

	for _, ax := range []*plot.Axis{&p.X, &p.Y} {
		ax.Label.TextStyle.Font = font.From(sans, labelSize)
		ax.Tick.Label.Font = font.From(sans, tickSize)
		ax.Color = color.Gray{Y: 0x60}
		ax.Tick.Color = color.Gray{Y: 0x60}
		ax.Tick.Length = vg.Length(3)
		ax.Padding = 0
	}
	p.X.Min, p.X.Max = 0, xmax
	p.Y.Min, p.Y.Max = 0, ymax
	p.X.Tick.Marker = wholeTicks{unit: " s", target: 4}
	p.Y.Tick.Marker = wholeTicks{unit: "/s", target: 3}
	if !xNumbers {
		p.X.Tick.Marker = unlabeled{p.X.Tick.Marker}
	} else {
		p.X.Label.Text = "time"
	}
	if !yNumbers {
		p.Y.Tick.Marker = unlabeled{p.Y.Tick.Marker}
	}

	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = gridColor, gridColor
	grid.Vertical.Width, grid.Horizontal.Width = vg.Points(0.5), vg.Points(0.5)
	plotters := []plot.Plotter{grid}
	if hasInc {
		inc.label = i == 0
		plotters = append(plotters, inc)
	}
	if capacity > 0 {
		plotters = append(plotters, capacityLine(capacity))
	}
	plotters = append(plotters, lines(s.Offered, c.Step, offeredStyle)...)
	plotters = append(plotters, lines(s.Goodput, c.Step, goodputStyle)...)
	p.Add(plotters...)
	// Add widens the axes to the data; the scales are the chart's.
	p.X.Min, p.X.Max = 0, xmax
	p.Y.Min, p.Y.Max = 0, ymax
	return p
}

// lines returns the values of one series as lines, one per run of finite
// values (a NaN or Inf leaves a gap), each point at the middle of its step.
// A run of a single value is drawn as a short level line across its step so
// it stays visible.
func lines(vals []float64, step float64, sty draw.LineStyle) []plot.Plotter {
	var out []plot.Plotter
	var run plotter.XYs
	flush := func() {
		switch len(run) {
		case 0:
			return
		case 1:
			x, y := run[0].X, run[0].Y
			run = plotter.XYs{{X: x - step/2, Y: y}, {X: x + step/2, Y: y}}
		}
		out = append(out, &plotter.Line{XYs: run, LineStyle: sty})
		run = nil
	}
	for i, v := range vals {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			flush()
			continue
		}
		run = append(run, plotter.XY{X: (float64(i) + 0.5) * step, Y: v})
	}
	flush()
	return out
}

// incident shades the incident's time span over the panel's full height.
type incident struct {
	start, end float64
	label      bool
}

func incidentOf(span [2]float64) (incident, bool) {
	s, e := span[0], span[1]
	for _, v := range span {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return incident{}, false
		}
	}
	if e <= s || e <= 0 {
		return incident{}, false
	}
	return incident{start: math.Max(s, 0), end: e}, true
}

func (in incident) Plot(c draw.Canvas, p *plot.Plot) {
	trX, _ := p.Transforms(&c)
	x0 := max(trX(in.start), c.Min.X)
	x1 := min(trX(in.end), c.Max.X)
	if x1 <= x0 {
		return
	}
	r := vg.Rectangle{Min: vg.Point{X: x0, Y: c.Min.Y}, Max: vg.Point{X: x1, Y: c.Max.Y}}
	c.SetColor(shadeColor)
	c.Fill(r.Path())
	if in.label {
		sty := style(sans, noteSize, noteColor)
		sty.XAlign = draw.XCenter
		sty.YAlign = draw.YTop
		c.FillText(sty, vg.Point{X: (x0 + x1) / 2, Y: c.Max.Y - 2}, "incident")
	}
}

// capacityLine is the dashed reference line at the server's capacity.
type capacityLine float64

func (cl capacityLine) Plot(c draw.Canvas, p *plot.Plot) {
	_, trY := p.Transforms(&c)
	y := trY(float64(cl))
	c.StrokeLine2(capacityStyle, c.Min.X, y, c.Max.X, y)
}
