package report

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Series is one line of a panel: the points (X[i], Y[i]). Points with a
// NaN or infinite coordinate are left out, and so are points a log axis
// cannot show (zero or negative).
type Series struct {
	Name string
	X, Y []float64
	// Reference draws the series as a thin dashed grey line without point
	// markers, for guides such as "offered = served" or an SLO.
	Reference bool
}

// Panel is one chart of a figure.
type Panel struct {
	Title, XLabel, YLabel string
	// LogX and LogY select logarithmic axes, labelled 1-2-5 per decade.
	LogX, LogY bool
	// LegendBottom and LegendRight move the legend from the top-left corner
	// to where the lines are not.
	LegendBottom, LegendRight bool
	// Headroom raises the y axis's top to this multiple of the highest
	// point (0: none), leaving the legend a strip of its own above lines
	// that fill the whole width.
	Headroom float64
	Series   []Series
	// Spans are x intervals shaded light grey behind the lines, over the
	// height of the drawn points (fault windows, phases).
	Spans []Span
}

// Span is an x interval [From, To] of a panel.
type Span struct{ From, To float64 }

// Plot formats accepted by WritePlot and RenderPlot.
const (
	FormatPNG = "png"
	FormatSVG = "svg"
)

// Figure sizes: each panel is PanelWidth × PanelHeight, stacked vertically.
const (
	PanelWidth  = 7 * vg.Inch
	PanelHeight = 3.6 * vg.Inch
)

// WritePlot draws the panels, stacked vertically, into path; the
// extension (.png or .svg) picks the format.
func WritePlot(path string, panels []Panel) error {
	format := strings.TrimPrefix(strings.ToLower(filepath.Ext(path)), ".")
	var buf bytes.Buffer
	if err := RenderPlot(&buf, format, panels); err != nil {
		return err
	}
	return WriteFile(path, buf.Bytes())
}

// RenderPlot draws the panels, stacked vertically, as a PNG (FormatPNG)
// or SVG (FormatSVG) image onto w.
func RenderPlot(w io.Writer, format string, panels []Panel) error {
	if len(panels) == 0 {
		return errors.New("report: plot: no panels")
	}
	plots := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		pl, err := buildPlot(p)
		if err != nil {
			return fmt.Errorf("report: plot %q: %w", p.Title, err)
		}
		plots[i] = []*plot.Plot{pl}
	}
	width, height := PanelWidth, PanelHeight*vg.Length(len(panels))
	var (
		canvas vg.CanvasSizer
		out    io.WriterTo
	)
	switch format {
	case FormatPNG:
		c := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(110))
		canvas, out = c, vgimg.PngCanvas{Canvas: c}
	case FormatSVG:
		c := vgsvg.New(width, height)
		canvas, out = c, c
	default:
		return fmt.Errorf("report: plot: format %q: want png or svg", format)
	}
	dc := draw.New(canvas)
	// White background: vgsvg leaves it transparent, which reads badly in
	// dark-themed viewers.
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadX: vg.Millimeter, PadY: 4 * vg.Millimeter,
		PadTop: 2 * vg.Millimeter, PadBottom: 2 * vg.Millimeter, PadLeft: 2 * vg.Millimeter, PadRight: 4 * vg.Millimeter}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	if _, err := out.WriteTo(w); err != nil {
		return fmt.Errorf("report: plot: write %s: %w", format, err)
	}
	return nil
}

// buildPlot turns one panel into a gonum plot.
func buildPlot(p Panel) (*plot.Plot, error) {
	pl := plot.New()
	pl.Title.Text = p.Title
	pl.X.Label.Text = p.XLabel
	pl.Y.Label.Text = p.YLabel
	pl.Legend.Top, pl.Legend.Left = !p.LegendBottom, !p.LegendRight
	pl.Legend.Padding = vg.Millimeter
	pl.Add(plotter.NewGrid())
	if p.LogX {
		pl.X.Scale, pl.X.Tick.Marker = plot.LogScale{}, logTicks{}
	}
	if p.LogY {
		pl.Y.Scale, pl.Y.Tick.Marker = plot.LogScale{}, logTicks{}
	}
	if err := addSpans(pl, p); err != nil {
		return nil, err
	}
	drawn := 0
	for i, s := range p.Series {
		xys := points(s, p.LogX, p.LogY)
		if len(xys) == 0 {
			continue
		}
		if s.Reference {
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, err
			}
			l.Width = vg.Points(1)
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
			l.Color = grey
			pl.Add(l)
			pl.Legend.Add(s.Name, l)
			drawn++
			continue
		}
		l, sc, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		l.Color, sc.Color = plotutil.Color(i), plotutil.Color(i)
		l.Width = vg.Points(1.5)
		sc.Shape = plotutil.Shape(i)
		pl.Add(l, sc)
		pl.Legend.Add(s.Name, l, sc)
		drawn++
	}
	if drawn == 0 {
		return nil, errors.New("no points to draw")
	}
	if p.Headroom > 1 && pl.Y.Max > 0 {
		pl.Y.Max *= p.Headroom
	}
	return pl, nil
}

// addSpans shades p.Spans over the y range of p's drawable points; it
// is called before the lines are added, so they are drawn on top.
func addSpans(pl *plot.Plot, p Panel) error {
	if len(p.Spans) == 0 {
		return nil
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range p.Series {
		for _, xy := range points(s, p.LogX, p.LogY) {
			lo, hi = math.Min(lo, xy.Y), math.Max(hi, xy.Y)
		}
	}
	if lo > hi {
		return nil // nothing drawn: RenderPlot reports it
	}
	if !p.LogY {
		lo = math.Min(lo, 0)
	}
	if hi == lo {
		hi = lo + 1
	}
	for _, sp := range p.Spans {
		if !(sp.To > sp.From) || (p.LogX && sp.From <= 0) {
			continue
		}
		poly, err := plotter.NewPolygon(plotter.XYs{{X: sp.From, Y: lo}, {X: sp.To, Y: lo}, {X: sp.To, Y: hi}, {X: sp.From, Y: hi}})
		if err != nil {
			return err
		}
		poly.Color = spanFill
		poly.LineStyle.Width = 0
		pl.Add(poly)
	}
	return nil
}

// spanFill shades spans.
var spanFill = color.Gray{Y: 225}

// grey draws reference lines.
var grey = color.Gray{Y: 120}

// points keeps the drawable points of s.
func points(s Series, logX, logY bool) plotter.XYs {
	n := min(len(s.X), len(s.Y))
	xys := make(plotter.XYs, 0, n)
	ok := func(v float64, log bool) bool {
		return !math.IsNaN(v) && !math.IsInf(v, 0) && (!log || v > 0)
	}
	for i := range n {
		if ok(s.X[i], logX) && ok(s.Y[i], logY) {
			xys = append(xys, plotter.XY{X: s.X[i], Y: s.Y[i]})
		}
	}
	return xys
}

// logTicks labels 1, 2 and 5 of each decade and marks the other integers,
// because plot.LogTicks labels powers of ten only, which leaves a panel
// spanning one or two decades with one or two numbers on its axis.
type logTicks struct{}

// Ticks implements plot.Ticker.
func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !(hi >= lo) {
		return nil
	}
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		decade := math.Pow(10, e)
		for m := 1.0; m < 10; m++ {
			v := m * decade
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}
