package chart

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
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

func TestWriteSVG(t *testing.T) {
	c := sampleChart()
	svg := renderSVG(t, c)
	width, height, texts := svgDoc(t, svg)

	if w := pixels(t, width); math.Abs(w-800) > 20 {
		t.Errorf("width = %q = %.0f px, want about 800 px", width, w)
	}
	if h := pixels(t, height); h < 600 || h > 1000 {
		t.Errorf("height = %q = %.0f px, want two readable panels (600-1000 px)", height, h)
	}

	want := []string{c.Title, "time (s)", "attempts/s", "successes/s", "incident", "capacity 1500/s"}
	for _, s := range c.Series {
		want = append(want, s.Name)
	}
	for _, w := range want {
		found := false
		for _, tx := range texts {
			if tx == w {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("SVG has no text %q", w)
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
// looking at: CHART_SAMPLE=/tmp/chart-sample.svg go test -run Sample.
func TestSample(t *testing.T) {
	path := os.Getenv("CHART_SAMPLE")
	if path == "" {
		t.Skip("set CHART_SAMPLE to a file name to write the sample chart")
	}
	if err := os.WriteFile(path, renderSVG(t, sampleChart()), 0o644); err != nil {
		t.Fatal(err)
	}
}
