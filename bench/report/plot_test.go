package report

import (
	"bytes"
	"encoding/xml"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func samplePanels() []Panel {
	return []Panel{
		{Title: "Throughput", XLabel: "offered", YLabel: "req/s", LogX: true, LogY: true, LegendBottom: true, LegendRight: true,
			Series: []Series{
				{Name: "off", X: []float64{10, 100, 200}, Y: []float64{10, 100, 150}},
				{Name: "adaptive", X: []float64{10, 100, 200, 1600}, Y: []float64{10, 100, 200, 1580}},
				{Name: "offered", X: []float64{10, 1600}, Y: []float64{10, 1600}, Reference: true},
			}},
		{Title: "p99", XLabel: "offered", YLabel: "ms", LogY: true,
			Series: []Series{
				// NaN and zero points are left out on a log axis.
				{Name: "off", X: []float64{10, 100, 200}, Y: []float64{6, math.NaN(), 0}},
				{Name: "adaptive", X: []float64{10, 100}, Y: []float64{6, 20}},
			}},
	}
}

func TestRenderPlotPNG(t *testing.T) {
	var buf bytes.Buffer
	if err := RenderPlot(&buf, FormatPNG, samplePanels()); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	// Two stacked panels: twice as tall as one, and not blank.
	b := img.Bounds()
	if float64(b.Dy()) < 2*float64(b.Dx())*float64(PanelHeight/PanelWidth)-2 {
		t.Errorf("bounds %v: not two panels high", b)
	}
	white := 0
	for y := b.Min.Y; y < b.Max.Y; y += 7 {
		for x := b.Min.X; x < b.Max.X; x += 7 {
			if r, g, bl, _ := img.At(x, y).RGBA(); r == 0xffff && g == 0xffff && bl == 0xffff {
				white++
			}
		}
	}
	if total := (b.Dx() / 7) * (b.Dy() / 7); white == 0 || white > total*99/100 {
		t.Errorf("%d of ~%d sampled pixels white: no background or nothing drawn", white, total)
	}
}

func TestRenderPlotSpans(t *testing.T) {
	panels := []Panel{{Title: "spans", Series: []Series{{Name: "a", X: []float64{0, 10}, Y: []float64{1, 5}}},
		Spans: []Span{{From: 2, To: 4}, {From: 6, To: 6}}}}
	var with, without bytes.Buffer
	if err := RenderPlot(&with, FormatSVG, panels); err != nil {
		t.Fatal(err)
	}
	panels[0].Spans = nil
	if err := RenderPlot(&without, FormatSVG, panels); err != nil {
		t.Fatal(err)
	}
	// One filled polygon for the one non-empty span, in the span's grey.
	if !strings.Contains(with.String(), "fill:#E1E1E1") || strings.Contains(without.String(), "fill:#E1E1E1") {
		t.Errorf("span fill missing or drawn without spans")
	}
}

func TestWritePlotSVG(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plot.svg")
	if err := WritePlot(path, samplePanels()); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(data))
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("invalid SVG: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		t.Errorf("root element %q, want svg", root)
	}
	for _, want := range []string{"Throughput", "adaptive", "offered"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
}

func TestRenderPlotErrors(t *testing.T) {
	cases := []struct {
		name   string
		format string
		panels []Panel
		want   string
	}{
		{"no panels", FormatPNG, nil, "report: plot: no panels"},
		{"bad format", "gif", samplePanels(), `report: plot: format "gif": want png or svg`},
		{"nothing drawable", FormatPNG, []Panel{{Title: "empty", LogY: true, Series: []Series{{Name: "a", X: []float64{1}, Y: []float64{0}}}}},
			`report: plot "empty": no points to draw`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := RenderPlot(io.Discard, tc.format, tc.panels)
			if err == nil || err.Error() != tc.want {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestLogTicks(t *testing.T) {
	var labels []string
	for _, tk := range (logTicks{}).Ticks(15, 1200) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if got := strings.Join(labels, " "); got != "20 50 100 200 500 1000" {
		t.Errorf("labels = %q", got)
	}
	if got := (logTicks{}).Ticks(0, 10); got != nil {
		t.Errorf("Ticks(0, 10) = %v, want nil", got)
	}
}
