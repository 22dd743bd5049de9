// Package chart renders the results of `retry sim` as an SVG (or PNG) image
// that a person can read at a glance: one small panel per retry policy,
// all on the same scales, each with the attempts the clients sent and the
// requests that succeeded per second, the server's capacity, and the
// incident shaded; a title that states the scenario.
//
// Drawing is done with gonum.org/v1/plot; the output is deterministic (same
// input, same bytes), so rendered charts can be committed and compared.
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
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
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
	Title    string     // the scenario, e.g. "outage: every attempt fails from 10 s to 30 s"
	Subtitle string     // a line under it, e.g. the fleet and the server
	Step     float64    // seconds per point
	Incident [2]float64 // start and end of the incident, in seconds
	Capacity float64    // the server's normal capacity, attempts/s: a dashed line in every panel (0: none)
	Series   []Series
}

// Size of the image. An SVG length in points is rendered by browsers at
// 96/72 px per point, so 600 pt is 800 px.
const (
	canvasWidth = vg.Length(600) // 800 px
	panelHeight = vg.Length(118) // one row of panels, its title included
	xAxisHeight = vg.Length(22)  // the time axis's numbers and label, under the last row

	margin    = vg.Length(8)  // around the whole image
	panelGapX = vg.Length(12) // between panels side by side
	panelGapY = vg.Length(6)  // between rows
	keyGap    = vg.Length(16) // between entries of the key
	keyThumb  = vg.Length(26) // length of a line sample in the key
	headroom  = 1.08          // the y axis goes this much above the highest value
)

// Fonts. Liberation Sans ships with gonum; in the SVG it is named
// "Liberation Sans" and viewers without it substitute a similar sans font.
var (
	sans = font.Font{Typeface: "Liberation", Variant: "Sans"}
	bold = font.Font{Typeface: "Liberation", Variant: "Sans", Weight: xfont.WeightBold}

	titleSize    = vg.Points(13)
	subtitleSize = vg.Points(9.5)
	keySize      = vg.Points(9.5)
	panelSize    = vg.Points(9.5)
	labelSize    = vg.Points(9)
	tickSize     = vg.Points(8)
	noteSize     = vg.Points(7.5)
)

// The two lines of every panel, and the references behind them. The colors
// are the Tableau 10 orange and blue, told apart with most color-vision
// deficiencies, and the offered load is also thinner, so that they differ
// in grayscale too.
var (
	offeredStyle  = draw.LineStyle{Color: rgb(0xff, 0x7f, 0x0e), Width: vg.Points(1.1)}
	goodputStyle  = draw.LineStyle{Color: rgb(0x1f, 0x77, 0xb4), Width: vg.Points(1.8)}
	capacityStyle = draw.LineStyle{Color: color.Gray{Y: 0x30}, Width: vg.Points(0.8), Dashes: pts(4, 2.5)}

	shadeColor = color.NRGBA{R: 0x70, G: 0x70, B: 0x70, A: 0x30}
	noteColor  = color.Gray{Y: 0x50}
	gridColor  = color.Gray{Y: 0xdd}
)

func rgb(r, g, b uint8) color.Color { return color.RGBA{R: r, G: g, B: b, A: 0xff} }

func pts(v ...float64) []vg.Length {
	out := make([]vg.Length, len(v))
	for i, x := range v {
		out[i] = vg.Points(x)
	}
	return out
}

func style(f font.Font, size vg.Length, c color.Color) text.Style {
	return text.Style{
		Color:   c,
		Font:    font.From(f, size),
		Handler: plot.DefaultTextHandler,
	}
}

// WriteSVG draws c as an SVG image 800 px wide: the title and a key on
// top, then one small panel per series, three to a row, all on the same
// time and load scales so that they compare at a glance. Each panel draws
// the attempts sent and the requests that succeeded per second, the
// capacity as a dashed line, and the incident shaded; ticks are whole
// numbers with their units (s, /s).
func WriteSVG(w io.Writer, c Chart) error {
	return write(w, c, func(width, height vg.Length) vg.CanvasWriterTo { return vgsvg.New(width, height) }, true)
}

// WritePNG draws c as WriteSVG does, as a PNG image at 96 dpi (800 px
// wide), to look at where no SVG viewer is at hand.
func WritePNG(w io.Writer, c Chart) error {
	return write(w, c, func(width, height vg.Length) vg.CanvasWriterTo {
		return vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(96))}
	}, false)
}

func write(w io.Writer, c Chart, newCanvas func(w, h vg.Length) vg.CanvasWriterTo, svg bool) (err error) {
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
	if _, err := render(c, newCanvas).WriteTo(&buf); err != nil {
		return err
	}
	out := buf.Bytes()
	if svg {
		// gonum names the font family alone; add metric-compatible
		// fallbacks (Liberation Sans has Arial's metrics) so that viewers
		// without Liberation lay text out as measured here.
		out = bytes.ReplaceAll(out, []byte("font-family:Liberation Sans;"),
			[]byte("font-family:'Liberation Sans',Arial,Helvetica,sans-serif;"))
	}
	_, err = w.Write(out)
	return err
}

// grid returns the columns and rows of panels for n series.
func grid(n int) (cols, rows int) {
	cols = 3
	switch {
	case n <= 3:
		cols = n
	case n == 4:
		cols = 2
	}
	return cols, (n + cols - 1) / cols
}

// render lays out and draws the whole image.
func render(c Chart, newCanvas func(w, h vg.Length) vg.CanvasWriterTo) vg.CanvasWriterTo {
	head := newHeading(c)
	keySty := style(sans, keySize, color.Black)
	keySty.YAlign = draw.YCenter
	keyH := keySty.Height("Mg") + 14

	cols, rows := grid(len(c.Series))
	nameSty, nameLines := panelNames(c.Series, cols)
	lineH := nameSty.Height("Mg")
	rowH := panelHeight + vg.Length(nameLines-1)*lineH
	height := margin + head.height + keyH + vg.Length(rows)*rowH + vg.Length(rows-1)*panelGapY + xAxisHeight + margin
	canvas := newCanvas(canvasWidth, height)
	dc := draw.New(canvas)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())

	y := head.draw(dc, height-margin)
	sc := scalesOf(c)
	drawKey(dc, keySty, y-keyH/2+3, sc.capacity > 0, sc.hasInc)

	plots := panels(c, sc, cols, rows, nameLines)
	area := draw.Crop(dc, margin, -margin, margin, -(margin + head.height + keyH))
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: panelGapX, PadY: panelGapY}
	drawPanels(dc, c.Series, plots, plot.Align(plots, tiles, area), nameSty, nameLines)
	return canvas
}

// heading is the chart's title and subtitle, wrapped to the image's width.
type heading struct {
	titleSty, subSty text.Style
	title, subtitle  []string
	height           vg.Length // of all the lines, with 3 pt under each
}

// newHeading wraps and measures c's title and subtitle.
func newHeading(c Chart) heading {
	h := heading{
		titleSty: style(bold, titleSize, color.Black),
		subSty:   style(sans, subtitleSize, noteColor),
	}
	h.titleSty.XAlign, h.titleSty.YAlign = draw.XCenter, draw.YTop
	h.subSty.XAlign, h.subSty.YAlign = draw.XCenter, draw.YTop
	h.title = wrap(h.titleSty, c.Title, canvasWidth-2*margin)
	h.subtitle = wrap(h.subSty, c.Subtitle, canvasWidth-2*margin)
	for _, l := range h.title {
		h.height += h.titleSty.Height(l) + 3
	}
	for _, l := range h.subtitle {
		h.height += h.subSty.Height(l) + 3
	}
	return h
}

// draw draws the heading centered, from y down, and returns the y under
// it.
func (h heading) draw(dc draw.Canvas, y vg.Length) vg.Length {
	for _, l := range h.title {
		dc.FillText(h.titleSty, vg.Point{X: canvasWidth / 2, Y: y}, l)
		y -= h.titleSty.Height(l) + 3
	}
	for _, l := range h.subtitle {
		dc.FillText(h.subSty, vg.Point{X: canvasWidth / 2, Y: y}, l)
		y -= h.subSty.Height(l) + 3
	}
	return y
}

// panelNames returns the style of the panels' names and the lines each
// panel leaves for its name. A name too long for its panel takes two
// lines, and then every panel leaves room for two, so that the rows stay
// aligned.
func panelNames(series []Series, cols int) (text.Style, int) {
	sty := style(bold, panelSize, color.Black)
	sty.XAlign, sty.YAlign = draw.XCenter, draw.YBottom
	n, w := 1, nameWidth(cols)
	for _, s := range series {
		if len(wrap(sty, s.Name, w)) > 1 {
			n = 2
		}
	}
	return sty, n
}

// scales is what every panel shares, so that the panels compare at a
// glance: the ends of the axes, the capacity line and the incident.
type scales struct {
	xmax, ymax float64
	capacity   float64 // 0: no capacity line
	inc        incident
	hasInc     bool
}

// scalesOf returns the scales of c's panels: the longest series, and the
// highest value of any (or the capacity).
func scalesOf(c Chart) scales {
	var sc scales
	sc.capacity = c.Capacity
	if !(sc.capacity > 0) || math.IsInf(sc.capacity, 0) {
		sc.capacity = 0
	}
	sc.inc, sc.hasInc = incidentOf(c.Incident)
	xmax, ymax := 0.0, sc.capacity
	for _, s := range c.Series {
		xmax = math.Max(xmax, float64(max(len(s.Offered), len(s.Goodput)))*c.Step)
		ymax = math.Max(ymax, math.Max(highest(s.Offered), highest(s.Goodput)))
	}
	if sc.hasInc {
		xmax = math.Max(xmax, sc.inc.end)
	}
	if xmax <= 0 {
		xmax = c.Step
	}
	sc.xmax, sc.ymax = xmax, niceMax(ymax*headroom)
	return sc
}

// panels makes the plots of c's series on the scales sc, in rows of cols.
func panels(c Chart, sc scales, cols, rows, nameLines int) [][]*plot.Plot {
	plots := make([][]*plot.Plot, rows)
	for r := range plots {
		plots[r] = make([]*plot.Plot, cols)
	}
	for i, s := range c.Series {
		r, col := i/cols, i%cols
		// Numbers on the left column's y axis and on the lowest panel of
		// each column's x axis only: the scales are shared.
		bottom := i+cols >= len(c.Series)
		plots[r][col] = newPanel(c, i, s, sc.xmax, sc.ymax, sc.capacity, sc.inc, sc.hasInc, col == 0, bottom, nameLines)
	}
	return plots
}

// drawPanels draws each series' plot in its tile, and its name, in nameSty
// on up to nameLines lines, over it.
func drawPanels(dc draw.Canvas, series []Series, plots [][]*plot.Plot, tiles [][]draw.Canvas, nameSty text.Style, nameLines int) {
	cols := len(plots[0])
	lineH := nameSty.Height("Mg")
	for i, s := range series {
		r, col := i/cols, i%cols
		p, tile := plots[r][col], tiles[r][col]
		p.Draw(tile)
		// The panel's name, centered over its data: plot's own title would
		// be centered over the tile, whose y axis numbers shift it.
		data := p.DataCanvas(tile)
		name := s.Name
		if name == "" {
			name = "series " + strconv.Itoa(i+1)
		}
		lines := wrapLines(nameSty, name, data.Max.X-data.Min.X, nameLines)
		for j := range lines {
			y := data.Max.Y + 4 + vg.Length(len(lines)-1-j)*lineH
			dc.FillText(nameSty, vg.Point{X: (data.Min.X + data.Max.X) / 2, Y: y}, lines[j])
		}
	}
}

// nameWidth is about the width of the data of a panel in a row of cols:
// the room a panel's name has. (The left column's is narrower by its
// y axis's numbers, which this leaves out of every panel.)
func nameWidth(cols int) vg.Length {
	tile := (canvasWidth - 2*margin - vg.Length(cols-1)*panelGapX) / vg.Length(cols)
	numbers := style(sans, tickSize, color.Black).Width("00000/s") + 8
	return tile - numbers
}

// drawKey draws, centered on a line at height y, what the lines and shades
// of the panels mean.
func drawKey(dc draw.Canvas, sty text.Style, y vg.Length, capacity, incident bool) {
	type entry struct {
		line  *draw.LineStyle
		shade bool
		label string
	}
	entries := []entry{
		{line: &offeredStyle, label: "attempts sent, retries included"},
		{line: &goodputStyle, label: "requests that succeeded"},
	}
	if capacity {
		entries = append(entries, entry{line: &capacityStyle, label: "server capacity"})
	}
	if incident {
		entries = append(entries, entry{shade: true, label: "incident"})
	}
	var width vg.Length
	for i, e := range entries {
		if i > 0 {
			width += keyGap
		}
		width += keyThumb + 4 + sty.Width(e.label)
	}
	x := max(margin, (canvasWidth-width)/2)
	for _, e := range entries {
		if e.shade {
			r := vg.Rectangle{Min: vg.Point{X: x, Y: y - 5}, Max: vg.Point{X: x + keyThumb, Y: y + 5}}
			dc.SetColor(shadeColor)
			dc.Fill(r.Path())
		} else {
			dc.StrokeLine2(*e.line, x, y, x+keyThumb, y)
		}
		x += keyThumb + 4
		dc.FillText(sty, vg.Point{X: x, Y: y}, e.label)
		x += sty.Width(e.label) + keyGap
	}
}
