package chart

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// sampleChart is a made-up outage from 10 s to 30 s with nine policies,
// some of which recover and some of which stay in a retry storm.
func sampleChart() Chart {
	const (
		step     = 0.5
		n        = 120 // 60 s
		demand   = 1000.0
		capacity = 1500.0
	)
	type policy struct {
		name     string
		amplify  float64 // offered load during the outage, as a multiple of demand
		after    float64 // offered load after the outage (metastable if > capacity)
		goodAfer float64 // goodput after the outage
		recovery float64 // seconds to settle after the outage
	}
	policies := []policy{
		{"No retries", 1, 1000, 1000, 0.5},
		{"Standard, shared quota", 1.4, 1000, 1000, 2},
		{"Standard, no quota", 3, 1050, 1000, 6},
		{"Exponential backoff", 2.2, 1000, 1000, 4},
		{"Backoff + full jitter", 1.8, 1000, 1000, 3},
		{"Retry budget 10%", 1.1, 1000, 1000, 1},
		{"Circuit breaker", 0.3, 1000, 1000, 5},
		{"Immediate retry x3", 4, 3900, 420, 0},
		{"Adaptive token bucket", 1.2, 1000, 1000, 2.5},
	}
	c := Chart{
		Title:    "outage: 100 clients, 1000 req/s, capacity 1500/s",
		Step:     step,
		Incident: [2]float64{10, 30},
		Capacity: capacity,
	}
	for k, p := range policies {
		s := Series{Name: p.name, Offered: make([]float64, n), Goodput: make([]float64, n)}
		for i := range n {
			t := float64(i) * step
			wobble := 25 * math.Sin(float64(i)*0.7+float64(k))
			switch {
			case t < 10:
				s.Offered[i] = demand + wobble
				s.Goodput[i] = demand + wobble
			case t < 30:
				ramp := math.Min(1, (t-10)/3)
				s.Offered[i] = demand*(1+(p.amplify-1)*ramp) + 2*wobble
				s.Goodput[i] = 80 + 60*float64(k%3) + wobble
			default:
				if p.recovery == 0 {
					s.Offered[i] = p.after + 3*wobble
					s.Goodput[i] = p.goodAfer + wobble
					break
				}
				f := math.Exp(-(t - 30) / p.recovery)
				peak := demand * p.amplify
				s.Offered[i] = p.after + (peak-p.after)*f + wobble
				s.Goodput[i] = p.goodAfer - (p.goodAfer-100)*f + wobble
			}
		}
		c.Series = append(c.Series, s)
	}
	return c
}

func renderSVG(t *testing.T, c Chart) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WriteSVG(&b, c); err != nil {
		t.Fatalf("WriteSVG: %v", err)
	}
	return b.Bytes()
}

// svgDoc parses an SVG document and returns the root element's width and
// height attributes and all of its character data.
func svgDoc(t *testing.T, svg []byte) (width, height string, texts []string) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(svg))
	depth, roots := 0, 0
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				roots++
				if tok.Name.Local != "svg" {
					t.Fatalf("root element is <%s>, want <svg>", tok.Name.Local)
				}
				for _, a := range tok.Attr {
					switch a.Name.Local {
					case "width":
						width = a.Value
					case "height":
						height = a.Value
					}
				}
			}
			depth++
		case xml.EndElement:
			depth--
		case xml.CharData:
			if s := strings.TrimSpace(string(tok)); s != "" {
				texts = append(texts, s)
			}
		}
	}
	if roots != 1 || depth != 0 {
		t.Fatalf("SVG has %d root elements and ends at depth %d", roots, depth)
	}
	return width, height, texts
}

// pixels converts an SVG length to CSS pixels (96 px per inch).
func pixels(t *testing.T, length string) float64 {
	t.Helper()
	units := map[string]float64{"pt": 96.0 / 72, "px": 1, "in": 96, "": 1}
	for _, u := range []string{"pt", "px", "in", ""} {
		if num, ok := strings.CutSuffix(length, u); ok {
			v, err := strconv.ParseFloat(num, 64)
			if err == nil {
				return v * units[u]
			}
		}
	}
	t.Fatalf("cannot read SVG length %q", length)
	return 0
}

// The chart is one panel per series, named, under a title and a key; its
// ticks are whole numbers with units. Series that coincide (here three
// identical ones) still each get a panel of their own.
func TestWriteSVG(t *testing.T) {
	c := sampleChart()
	c.Subtitle = "100 clients send 1000 req/s; one panel per retry policy"
	twin := c.Series[1]
	for _, name := range []string{"Twin A", "Twin B"} {
		twin.Name = name
		c.Series = append(c.Series, twin)
	}
	svg := renderSVG(t, c)
	width, height, texts := svgDoc(t, svg)

	if w := pixels(t, width); math.Abs(w-800) > 20 {
		t.Errorf("width = %q = %.0f px, want about 800 px", width, w)
	}
	// 11 series: four rows of three panels.
	if h := pixels(t, height); h < 600 || h > 1000 {
		t.Errorf("height = %q = %.0f px, want four rows of readable panels (600-1000 px)", height, h)
	}
	count := make(map[string]int)
	for _, tx := range texts {
		count[tx]++
	}
	want := []string{c.Title, c.Subtitle, "attempts sent, retries included", "requests that succeeded", "server capacity", "incident"}
	for _, w := range want {
		if count[w] == 0 {
			t.Errorf("SVG has no text %q", w)
		}
	}
	for _, s := range c.Series {
		if count[s.Name] != 1 {
			t.Errorf("series %q is named %d times, want once: one panel each", s.Name, count[s.Name])
		}
	}
	tick := regexp.MustCompile(`^[0-9][0-9.,]*( s|/s)?$`)
	whole := regexp.MustCompile(`^(0|[1-9][0-9]*( s|/s))$`)
	units := make(map[string]bool)
	for _, tx := range texts {
		if !tick.MatchString(tx) {
			continue
		}
		if !whole.MatchString(tx) {
			t.Errorf("tick %q is not a whole number with its unit", tx)
		}
		if len(tx) > 2 {
			units[tx[len(tx)-2:]] = true
		}
	}
	if !units[" s"] || !units["/s"] {
		t.Errorf("ticks with units %v, want seconds and per second", units)
	}
}

// Ticks are whole numbers, a few per axis, for spans small and large.
func TestWholeTicks(t *testing.T) {
	for _, span := range []float64{0.5, 1, 1.5, 7, 60, 61, 1500, 15000, 3.3e6} {
		ticks := wholeTicks{unit: "/s", target: 3}.Ticks(0, span)
		if len(ticks) < 1 || len(ticks) > 7 {
			t.Errorf("span %v: %d ticks", span, len(ticks))
		}
		for _, tk := range ticks {
			if tk.Value != math.Trunc(tk.Value) || tk.Value < 0 || tk.Value > span {
				t.Errorf("span %v: tick at %v", span, tk.Value)
			}
			if want := strconv.FormatFloat(tk.Value, 'f', 0, 64) + "/s"; tk.Value != 0 && tk.Label != want {
				t.Errorf("span %v: label %q, want %q", span, tk.Label, want)
			}
		}
		top := niceMax(span)
		ticks = wholeTicks{target: 3}.Ticks(0, top)
		if top < span || ticks[len(ticks)-1].Value != top {
			t.Errorf("niceMax(%v) = %v: no tick at the top of the axis", span, top)
		}
	}
}

func TestWriteSVGDeterministic(t *testing.T) {
	a := renderSVG(t, sampleChart())
	b := renderSVG(t, sampleChart())
	if !bytes.Equal(a, b) {
		t.Fatal("two renders of the same chart differ")
	}
}

func TestWriteSVGEmpty(t *testing.T) {
	for name, c := range map[string]Chart{
		"zero":      {},
		"no series": {Title: "t", Step: 1, Capacity: 10, Incident: [2]float64{1, 2}},
		"no step":   {Series: []Series{{Name: "a", Offered: []float64{1}}}},
		"NaN step":  {Step: math.NaN(), Series: []Series{{Name: "a", Offered: []float64{1}}}},
	} {
		var b bytes.Buffer
		if err := WriteSVG(&b, c); err == nil {
			t.Errorf("%s: WriteSVG returned no error", name)
		}
		if b.Len() != 0 {
			t.Errorf("%s: WriteSVG wrote %d bytes despite the error", name, b.Len())
		}
	}
}

func TestWriteSVGOddData(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	for name, c := range map[string]Chart{
		"NaN and Inf": {Step: 1, Capacity: nan, Incident: [2]float64{nan, inf}, Series: []Series{
			{Name: "a", Offered: []float64{1, nan, 3, inf, -inf, 2, 5}, Goodput: []float64{nan, nan, 1}},
		}},
		"all NaN": {Step: 1, Series: []Series{{Name: "a", Offered: []float64{nan, nan}, Goodput: []float64{inf}}}},
		"different lengths": {Step: 0.25, Capacity: 3, Incident: [2]float64{1, 100}, Series: []Series{
			{Name: "long", Offered: make([]float64, 400), Goodput: []float64{1, 2}},
			{Name: "short", Offered: []float64{4}},
			{Name: ""},
		}},
		"empty series": {Title: "nothing yet", Step: 1, Series: []Series{{Name: "a"}, {Name: "b"}}},
		"negative and huge": {Step: 1, Incident: [2]float64{30, 10}, Series: []Series{
			{Name: "a", Offered: []float64{-5, math.MaxFloat64, 0}, Goodput: []float64{-1, -2}},
		}},
		"many series, long name": {Step: 1, Series: func() []Series {
			var ss []Series
			for i := range 25 {
				ss = append(ss, Series{Name: strings.Repeat("policy ", i+1), Offered: []float64{float64(i), 1}})
			}
			return ss
		}()},
	} {
		t.Run(name, func(t *testing.T) {
			svg := renderSVG(t, c)
			svgDoc(t, svg)
		})
	}
}

// TestSample writes the sample chart to the file named by CHART_SAMPLE, for
// looking at: CHART_SAMPLE=/tmp/chart-sample.svg go test -run Sample (or
// .png).
func TestSample(t *testing.T) {
	path := os.Getenv("CHART_SAMPLE")
	if path == "" {
		t.Skip("set CHART_SAMPLE to a file name to write the sample chart")
	}
	data := renderSVG(t, sampleChart())
	if strings.HasSuffix(path, ".png") {
		var b bytes.Buffer
		if err := WritePNG(&b, sampleChart()); err != nil {
			t.Fatal(err)
		}
		data = b.Bytes()
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A name too long for its panel takes two lines, broken after its colon,
// rather than running into the next panel; a name too long even for two is
// shortened with an ellipsis.
func TestLongPanelNames(t *testing.T) {
	short := sampleChart()
	long := sampleChart()
	long.Series[1].Name = "avast/retry-go v4/v5 defaults: 10 att., 100ms·2^n"
	long.Series[2].Name = "a name far too long for even two lines of a panel of this chart, whose words go on and on"
	_, shortH, _ := svgDoc(t, renderSVG(t, short))
	_, longH, texts := svgDoc(t, renderSVG(t, long))
	have := make(map[string]bool)
	for _, tx := range texts {
		have[tx] = true
	}
	if !have["avast/retry-go v4/v5 defaults:"] || !have["10 att., 100ms·2^n"] {
		t.Errorf("the long name is not on two lines broken after its colon; texts: %q", texts)
	}
	ellipses := 0
	for _, tx := range texts {
		if strings.HasSuffix(tx, "…") {
			ellipses++
			if !strings.HasPrefix(tx, "two lines") && !strings.Contains(tx, "panel") {
				t.Errorf("shortened text %q is not the end of the longest name", tx)
			}
		}
	}
	if ellipses != 1 {
		t.Errorf("%d texts shortened, want 1 (the name too long for two lines); texts: %q", ellipses, texts)
	}
	if pixels(t, longH) <= pixels(t, shortH) {
		t.Errorf("height with two-line names %s, without %s: want room for the second line", longH, shortH)
	}
}
