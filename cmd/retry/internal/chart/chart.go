// Package chart renders the results of `retry sim` as an SVG image that a
// person can read at a glance: offered load on top, goodput below, one line
// per retry policy, the incident shaded on both panels.
//
// Drawing is done with gonum.org/v1/plot and its SVG backend; the output is
// deterministic (same input, same bytes), so rendered charts can be committed
// and compared.
package chart

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"

	xfont "golang.org/x/image/font"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Series is one policy's time series: values per Step seconds, index i covering [i*Step, (i+1)*Step).
type Series struct {
	Name    string    // the policy, e.g. "Standard, shared quota"
	Offered []float64 // attempts sent per second (offered load)
	Goodput []float64 // successful requests per second
}

// Chart is what WriteSVG draws.
type Chart struct {
	Title    string     // e.g. "outage: 100 clients, 1000 req/s, capacity 1500/s"
	Step     float64    // seconds per point
	Incident [2]float64 // start and end of the incident, in seconds
	Capacity float64    // the server's normal capacity, attempts/s (draw as a dashed horizontal reference line on the offered-load panel; 0 = none)
	Series   []Series
}

// Size of the image. An SVG length in points is rendered by browsers at
// 96/72 px per point, so 600 pt is 800 px.
const (
	// canvasWidth is the width of the SVG canvas: 600 pt, 800 px.
	canvasWidth = vg.Length(600)
	// panelsHeight is the height given to the two panels, their axes
	// and titles: 525 pt, 700 px. The title and legend come on top of it.
	panelsHeight = vg.Length(525)

	margin      = vg.Length(8)  // around the whole image
	panelGap    = vg.Length(10) // between the two panels
	legendGap   = vg.Length(10) // between the lower panel and the legend
	thumbWidth  = vg.Length(34) // length of a legend line sample
	thumbGap    = vg.Length(5)  // between a sample and its name
	legendColSp = vg.Length(16) // between legend columns
	legendRowSp = vg.Length(3)  // between legend rows
	lineWidth   = vg.Length(1.6)
	headroom    = 1.12 // the y axis goes this much above the highest value
)

// Fonts. Liberation Sans ships with gonum; in the SVG it is named
// "Liberation Sans" and viewers without it substitute a similar sans font.
var (
	sans = font.Font{Typeface: "Liberation", Variant: "Sans"}
	bold = font.Font{Typeface: "Liberation", Variant: "Sans", Weight: xfont.WeightBold}

	titleSize  = vg.Points(13)
	panelSize  = vg.Points(11)
	labelSize  = vg.Points(10)
	tickSize   = vg.Points(9)
	legendSize = vg.Points(10)
	noteSize   = vg.Points(8.5)
)

// palette holds ten clearly distinct colors (the Tableau 10 / matplotlib
// "tab10" set, which stays distinguishable for most color-vision
// deficiencies when paired with the dash patterns below).
var palette = []color.Color{
	rgb(0x1f, 0x77, 0xb4), // blue
	rgb(0xff, 0x7f, 0x0e), // orange
	rgb(0x2c, 0xa0, 0x2c), // green
	rgb(0xd6, 0x27, 0x28), // red
	rgb(0x94, 0x67, 0xbd), // purple
	rgb(0x8c, 0x56, 0x4b), // brown
	rgb(0xe3, 0x77, 0xc2), // pink
	rgb(0x7f, 0x7f, 0x7f), // gray
	rgb(0xbc, 0xbd, 0x22), // olive
	rgb(0x17, 0xbe, 0xcf), // cyan
}

// dashes holds one dash pattern per palette color, so that series remain
// distinguishable in grayscale. nil is a solid line.
var dashes = [][]vg.Length{
	nil,
	pts(7, 3),
	pts(2, 2),
	pts(10, 3, 2, 3),
	pts(4, 2),
	pts(10, 2, 2, 2, 2, 2),
	pts(1, 1.5),
	pts(12, 4),
	pts(6, 2, 2, 2),
	pts(3, 4),
}

var (
	shadeColor    = color.NRGBA{R: 0x70, G: 0x70, B: 0x70, A: 0x2c}
	noteColor     = color.Gray{Y: 0x55}
	capacityColor = color.Gray{Y: 0x30}
	gridColor     = color.Gray{Y: 0xd4}
	frameColor    = color.Gray{Y: 0xbb}
)

func rgb(r, g, b uint8) color.Color { return color.RGBA{R: r, G: g, B: b, A: 0xff} }

func pts(v ...float64) []vg.Length {
	out := make([]vg.Length, len(v))
	for i, x := range v {
		out[i] = vg.Points(x)
	}
	return out
}

// lineStyle returns the style of the i-th series.
func lineStyle(i int) draw.LineStyle {
	n := len(palette)
	// Past n series the dash pattern shifts by one each round, so color and
	// dash together stay unique for up to n*n series.
	return draw.LineStyle{
		Color:  palette[i%n],
		Dashes: dashes[(i+i/n)%len(dashes)],
		Width:  lineWidth,
	}
}

func style(f font.Font, size vg.Length, c color.Color) text.Style {
	return text.Style{
		Color:   c,
		Font:    font.From(f, size),
		Handler: plot.DefaultTextHandler,
	}
}

// WriteSVG draws c as an SVG image about 800 px wide: two panels stacked
// vertically sharing the time axis — offered load (attempts/s) on top and
// successful requests/s below — one line per series with a distinct color
// (and dash pattern, so it survives grayscale), a legend, axes with units
// ("time (s)", "attempts/s", "successes/s"), and the incident shaded on both panels.
func WriteSVG(w io.Writer, c Chart) (err error) {
	if len(c.Series) == 0 {
		return errors.New("chart: no series to draw")
	}
	if !(c.Step > 0) || math.IsInf(c.Step, 0) {
		return fmt.Errorf("chart: step must be a positive number of seconds, got %v", c.Step)
	}
	// The plotting library panics on some inputs it considers programmer
	// errors; the chart is an optional output of the simulator, so report
	// those as errors rather than crash. Nothing has been written to w yet
	// when drawing panics.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("chart: drawing failed: %v", r)
		}
	}()
	var buf bytes.Buffer
	if _, err := render(c).WriteTo(&buf); err != nil {
		return err
	}
	// gonum names the font family alone; add metric-compatible fallbacks
	// (Liberation Sans has Arial's metrics) so that viewers without
	// Liberation lay text out as measured here instead of in a serif font.
	svg := bytes.ReplaceAll(buf.Bytes(), []byte("font-family:Liberation Sans;"),
		[]byte("font-family:'Liberation Sans',Arial,Helvetica,sans-serif;"))
	_, err = w.Write(svg)
	return err
}

// render lays out and draws the whole image.
func render(c Chart) *vgsvg.Canvas {
	names := make([]string, len(c.Series))
	for i, s := range c.Series {
		names[i] = s.Name
		if names[i] == "" {
			names[i] = "series " + strconv.Itoa(i+1)
		}
	}

	titleSty := style(bold, titleSize, color.Black)
	titleSty.XAlign = draw.XCenter
	titleSty.YAlign = draw.YTop
	title := fit(titleSty, c.Title, canvasWidth-2*margin)
	var titleH vg.Length
	if title != "" {
		titleH = titleSty.Height(title) + 6*vg.Points(1)
	}

	leg := layoutLegend(names, canvasWidth-2*margin)
	height := margin + titleH + panelsHeight + legendGap + leg.height + margin

	canvas := vgsvg.New(canvasWidth, height)
	dc := draw.New(canvas)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())

	if title != "" {
		dc.FillText(titleSty, vg.Point{X: canvasWidth / 2, Y: height - margin}, title)
	}

	xmax := 0.0
	for _, s := range c.Series {
		xmax = math.Max(xmax, float64(max(len(s.Offered), len(s.Goodput)))*c.Step)
	}
	inc, hasInc := incidentOf(c.Incident)
	if hasInc {
		xmax = math.Max(xmax, inc.end)
	}
	if xmax <= 0 {
		xmax = c.Step
	}

	capacity := c.Capacity
	if !(capacity > 0) || math.IsInf(capacity, 0) {
		capacity = 0
	}

	top := newPanel("Offered load: attempts sent, retries included", "attempts/s", false, xmax)
	bottom := newPanel("Goodput: requests that succeeded", "successes/s", true, xmax)
	topMax, bottomMax := capacity, 0.0
	for i, s := range c.Series {
		sty := lineStyle(i)
		topMax = math.Max(topMax, addLines(top, s.Offered, c.Step, sty))
		bottomMax = math.Max(bottomMax, addLines(bottom, s.Goodput, c.Step, sty))
	}
	setYMax(top, topMax)
	setYMax(bottom, bottomMax)
	if hasInc {
		inc.label = true
		top.plotters = append([]plot.Plotter{inc}, top.plotters...)
		inc.label = false
		bottom.plotters = append([]plot.Plotter{inc}, bottom.plotters...)
	}
	if capacity > 0 {
		top.plotters = append(top.plotters, capacityLine(capacity))
	}
	top.finish()
	bottom.finish()

	area := draw.Crop(dc, margin, -margin, margin+leg.height+legendGap, -(margin + titleH))
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: panelGap}
	cs := plot.Align([][]*plot.Plot{{top.p}, {bottom.p}}, tiles, area)
	top.p.Draw(cs[0][0])
	bottom.p.Draw(cs[1][0])

	data := bottom.p.DataCanvas(cs[1][0])
	leg.draw(dc, c.Series, names, data.Min.X, data.Max.X, margin+leg.height)
	return canvas
}

// panel is one of the two stacked plots under construction.
type panel struct {
	p        *plot.Plot
	plotters []plot.Plotter
}

func newPanel(title, ylabel string, showX bool, xmax float64) *panel {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle = style(bold, panelSize, color.Black)
	p.Title.TextStyle.XAlign = draw.XCenter
	p.Title.TextStyle.YAlign = draw.YTop
	p.Title.Padding = vg.Length(4)

	for _, ax := range []*plot.Axis{&p.X, &p.Y} {
		ax.Label.TextStyle.Font = font.From(sans, labelSize)
		ax.Tick.Label.Font = font.From(sans, tickSize)
		ax.Color = color.Gray{Y: 0x40}
		ax.Tick.Color = color.Gray{Y: 0x40}
		ax.Tick.Marker = niceTicks{}
	}
	p.X.Min, p.X.Max = 0, xmax
	p.Y.Min = 0
	p.Y.Label.Text = ylabel
	p.Y.Label.Padding = vg.Length(4)
	if showX {
		p.X.Label.Text = "time (s)"
	} else {
		// Shared time axis: tick marks only, numbers on the lower panel.
		p.X.Tick.Marker = unlabeled{niceTicks{}}
	}

	grid := plotter.NewGrid()
	grid.Vertical.Color = gridColor
	grid.Horizontal.Color = gridColor
	grid.Vertical.Width = vg.Points(0.6)
	grid.Horizontal.Width = vg.Points(0.6)
	return &panel{p: p, plotters: []plot.Plotter{grid}}
}

// finish adds the collected plotters to the plot. Plotters are added only
// now and not through Plot.Add earlier so that the axis ranges set by hand
// are final and no NaN can leak into them.
func (pn *panel) finish() {
	r := pn.p.X
	ry := pn.p.Y
	pn.p.Add(pn.plotters...)
	pn.p.X.Min, pn.p.X.Max = r.Min, r.Max
	pn.p.Y.Min, pn.p.Y.Max = ry.Min, ry.Max
}

func setYMax(pn *panel, m float64) {
	if !(m > 0) {
		m = 1
	}
	pn.p.Y.Max = m * headroom
	if math.IsInf(pn.p.Y.Max, 0) {
		pn.p.Y.Max = m
	}
}

// addLines adds the values of one series to a panel as lines, one per run of
// finite values (a NaN or Inf leaves a gap), each point at the middle of its
// step. A run of a single value is drawn as a short level line across its
// step so it stays visible. It returns the largest value added, 0 if none.
func addLines(pn *panel, vals []float64, step float64, sty draw.LineStyle) float64 {
	hi := 0.0
	var run plotter.XYs
	flush := func() {
		switch len(run) {
		case 0:
			return
		case 1:
			x, y := run[0].X, run[0].Y
			run = plotter.XYs{{X: x - step/2, Y: y}, {X: x + step/2, Y: y}}
		}
		pn.plotters = append(pn.plotters, &plotter.Line{XYs: run, LineStyle: sty})
		run = nil
	}
	for i, v := range vals {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			flush()
			continue
		}
		hi = math.Max(hi, v)
		run = append(run, plotter.XY{X: (float64(i) + 0.5) * step, Y: v})
	}
	flush()
	return hi
}

// niceTicks is a Ticker that puts at most about seven labeled ticks at round
// numbers (1, 2, 2.5 or 5 times a power of ten), so axes read at a glance:
// every 10 s on a minute of time, every 1000 on a load of 4000/s.
type niceTicks struct{}

func (niceTicks) Ticks(lo, hi float64) []plot.Tick {
	span := hi - lo
	if !(span > 0) || math.IsInf(span, 0) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	raw := span / 6
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	if !(step > 0) || math.IsInf(step, 0) {
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	decimals := max(0, -int(math.Floor(math.Log10(step)+1e-9)))
	if r := step / math.Pow(10, math.Floor(math.Log10(step)+1e-9)); math.Abs(r-2.5) < 1e-9 {
		decimals++ // 2.5, 0.25, ...: one more digit than the power of ten
	}
	var ticks []plot.Tick
	first := math.Ceil(lo/step-1e-9) * step
	for i := range 50 {
		v := first + float64(i)*step
		if v > hi+step*1e-9 {
			break
		}
		label := strconv.FormatFloat(v+0, 'f', decimals, 64)
		if math.Abs(v) >= 1e7 {
			label = strconv.FormatFloat(v, 'g', 4, 64)
		}
		if label == "-0" {
			label = "0"
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
		c.FillText(sty, vg.Point{X: (x0 + x1) / 2, Y: c.Max.Y - 3*vg.Points(1)}, "incident")
	}
}

// capacityLine is the dashed reference line at the server's capacity.
type capacityLine float64

func (cl capacityLine) Plot(c draw.Canvas, p *plot.Plot) {
	_, trY := p.Transforms(&c)
	y := trY(float64(cl))
	c.StrokeLine2(draw.LineStyle{
		Color:  capacityColor,
		Width:  vg.Points(1),
		Dashes: pts(5, 3),
	}, c.Min.X, y, c.Max.X, y)
	sty := style(sans, noteSize, capacityColor)
	sty.XAlign = draw.XRight
	sty.YAlign = draw.YBottom
	label := "capacity " + strconv.FormatFloat(float64(cl), 'f', -1, 64) + "/s"
	c.FillText(sty, vg.Point{X: c.Max.X - 3*vg.Points(1), Y: y + 2*vg.Points(1)}, label)
}

// legend is a grid of entries below the panels, filled column by column.
type legend struct {
	sty          text.Style
	cols, rows   int
	colW, rowH   vg.Length
	height       vg.Length
	maxTextWidth vg.Length
}

// layoutLegend chooses as many columns as fit in avail.
func layoutLegend(names []string, avail vg.Length) legend {
	l := legend{sty: style(sans, legendSize, color.Black)}
	l.sty.YAlign = draw.YCenter
	for _, n := range names {
		l.maxTextWidth = max(l.maxTextWidth, l.sty.Width(n))
	}
	// Leave room for the y axis labels on the left of the data area.
	avail -= vg.Length(50)
	maxText := avail - thumbWidth - thumbGap
	l.maxTextWidth = min(l.maxTextWidth, maxText)
	l.colW = thumbWidth + thumbGap + l.maxTextWidth
	l.cols = int((avail + legendColSp) / (l.colW + legendColSp))
	l.cols = max(1, min(l.cols, len(names)))
	l.rows = (len(names) + l.cols - 1) / l.cols
	// Balance the columns: 9 entries in 3 columns of 3 rather than 4+4+1.
	l.cols = (len(names) + l.rows - 1) / l.rows
	ext := l.sty.FontExtents()
	l.rowH = ext.Ascent + ext.Descent + legendRowSp
	l.height = vg.Length(l.rows)*l.rowH + 6*vg.Points(1)
	return l
}

// draw draws the legend centered between left and right, its top at topY.
func (l legend) draw(dc draw.Canvas, series []Series, names []string, left, right, topY vg.Length) {
	width := vg.Length(l.cols)*l.colW + vg.Length(l.cols-1)*legendColSp
	x0 := max(margin, (left+right)/2-width/2)
	if x0+width > canvasWidth-margin {
		x0 = max(margin, canvasWidth-margin-width)
	}
	frame := vg.Rectangle{
		Min: vg.Point{X: x0 - 6*vg.Points(1), Y: topY - l.height},
		Max: vg.Point{X: x0 + width + 6*vg.Points(1), Y: topY},
	}
	dc.StrokeLines(draw.LineStyle{Color: frameColor, Width: vg.Points(0.5)},
		[]vg.Point{frame.Min, {X: frame.Max.X, Y: frame.Min.Y}, frame.Max, {X: frame.Min.X, Y: frame.Max.Y}, frame.Min})
	for i := range series {
		col, row := i/l.rows, i%l.rows
		x := x0 + vg.Length(col)*(l.colW+legendColSp)
		y := topY - 3*vg.Points(1) - (vg.Length(row)+0.5)*l.rowH
		dc.StrokeLine2(lineStyle(i), x, y, x+thumbWidth, y)
		dc.FillText(l.sty, vg.Point{X: x + thumbWidth + thumbGap, Y: y}, fit(l.sty, names[i], l.maxTextWidth))
	}
}

// fit shortens s with an ellipsis until it is at most w wide.
func fit(sty text.Style, s string, w vg.Length) string {
	if sty.Width(s) <= w {
		return s
	}
	r := []rune(s)
	for len(r) > 1 {
		r = r[:len(r)-1]
		if t := string(r) + "…"; sty.Width(t) <= w {
			return t
		}
	}
	return string(r)
}
