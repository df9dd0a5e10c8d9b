package scenario

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/infergate/infergate/bench/report"
)

// Markdown renders the summary, the main table, the per-point detail, the
// sweep and the capacity runs.
func (r *BatchingReport) Markdown() string {
	var b strings.Builder
	s := r.Setup
	fmt.Fprintf(&b, "## Batching: %s, open-loop Poisson, goodput within p99 SLO %s, %s per point (+%s warmup)\n\n",
		s.Model, s.SLO, s.Duration, s.Warmup)
	fmt.Fprintf(&b, "Unbatched capacity (closed loop through infergate, batching off): **%s rps** at c=%d.\n\n",
		report.Rate(r.Capacity.Throughput), r.Capacity.Concurrency)
	b.WriteString(r.SummaryTable().Markdown())
	b.WriteString("\n")
	if t := r.StrictTable(); len(t.Rows) > 0 {
		b.WriteString(t.Markdown())
		b.WriteString("\n")
	}
	b.WriteString(r.PerConfigTable().Markdown())
	b.WriteString("\n")
	b.WriteString(r.MainTable().Markdown())
	b.WriteString("\n")
	b.WriteString(r.DetailTable().Markdown())
	if len(r.Sweep) > 0 {
		b.WriteString("\n")
		b.WriteString(r.SweepTable().Markdown())
	}
	b.WriteString("\n")
	b.WriteString(r.CapacityTable().Markdown())
	fmt.Fprintf(&b, "\nSetup: %d CPUs, %d client connection(s), request timeout %s, low loads stretched to about %d requests (at most 3x the duration).\n",
		s.NumCPU, s.Conns, s.Timeout, s.MinRequests)
	for _, n := range s.Notes {
		b.WriteString("- " + n + "\n")
	}
	return b.String()
}

// SummaryTable lists the criteria with PASS/FAIL.
func (r *BatchingReport) SummaryTable() report.Table {
	t := report.Table{Title: "Criteria", Header: []string{"criterion", "value", "target", "result"}, LeftCols: 1}
	for i, c := range r.Criteria {
		v := "-"
		if c.Known {
			v = fmt.Sprintf("%.2f", c.Value)
		}
		t.Rows = append(t.Rows, []string{fmt.Sprintf("%d. %s", i+1, c.Name), v, fmt.Sprintf("%s %g", c.Op, c.Threshold), c.Result()})
		if c.Detail != "" {
			t.Notes = append(t.Notes, fmt.Sprintf("%d. %s", i+1, c.Detail))
		}
	}
	return t
}

// StrictTable reads the SLO strictly for adaptive, one row per load: the
// p99 of its successful calls against the SLO, its throughput against the
// physical limit, and what it refused to keep the p99 there.
func (r *BatchingReport) StrictTable() report.Table {
	t := report.Table{
		Title:    "Adaptive, strict reading: p99 of successful calls vs SLO, throughput vs physical limit",
		Header:   []string{"load", "offered/s", "tput", "tput / physical limit", "failed", "p50 ms", "p99 ms", "p99 / SLO", "p99 <= SLO"},
		LeftCols: 1,
	}
	ad, ok := r.configByRole(RoleAdaptive)
	if !ok {
		return t
	}
	sloMs, lim := r.sloMs(), r.Capacity.PhysicalLimit
	for _, ld := range r.loads() {
		p := r.point(ad.Name, ld)
		if p == nil || p.Skipped || p.Completed == 0 {
			continue
		}
		frac, failed := "-", fmt.Sprintf("%d (%.1f%%)", p.Failed, 100*float64(p.Failed)/float64(p.Completed+p.Failed))
		if lim > 0 {
			frac = fmt.Sprintf("%.2f", p.Throughput/lim)
		}
		within := "no"
		if p.P99 <= sloMs {
			within = "yes"
		}
		t.Rows = append(t.Rows, []string{fmt.Sprintf("%gx", ld), report.Rate(p.Offered), report.Rate(p.Throughput), frac, failed,
			report.Ms(p.P50), report.Ms(p.P99), fmt.Sprintf("%.2f", p.P99/sloMs), within})
	}
	note := "p50/p99 of successful calls only, from each call's intended send time; failed: calls answered with an error (with --batch-shed, RESOURCE_EXHAUSTED for what could not be answered within the SLO)."
	if lim > 0 {
		note += fmt.Sprintf(" Physical limit: %s rows/s, batches of %d straight to the model server, closed loop; at loads below it, tput / physical limit is at most offered / limit.",
			report.Rate(lim), r.Capacity.PhysicalBatch)
	}
	t.Notes = []string{note}
	return t
}

// PerConfigTable lists each configuration's best goodput and its best
// throughput at a load whose p99 is within the SLO, both relative to the
// unbatched capacity.
func (r *BatchingReport) PerConfigTable() report.Table {
	t := report.Table{
		Title:  "Per configuration (x = multiple of the unbatched capacity)",
		Header: []string{"config", "max goodput rps", "x", "at load", "max rps with p99 <= SLO", "x", "at load"},
	}
	cp := r.Capacity.Throughput
	ratio := func(v float64) string {
		if cp <= 0 || v <= 0 {
			return "-"
		}
		return report.Ratio(v / cp)
	}
	at := func(v, ld float64) string {
		if v <= 0 {
			return "-"
		}
		return fmt.Sprintf("%gx", ld)
	}
	for _, c := range r.PerConfig {
		t.Rows = append(t.Rows, []string{c.Config,
			report.Rate(c.MaxGoodput), ratio(c.MaxGoodput), at(c.MaxGoodput, c.MaxGoodputLoad),
			report.Rate(c.MaxWithinSLO), ratio(c.MaxWithinSLO), at(c.MaxWithinSLO, c.MaxWithinSLOLoad)})
	}
	t.Notes = []string{"Goodput counts each request within the SLO (criterion 1 uses it); the last columns read the SLO strictly: the point's own p99 (and no errors) must be within it."}
	return t
}

// MainTable has one row per load and, per configuration, throughput,
// goodput, p99 and mean batch size.
func (r *BatchingReport) MainTable() report.Table {
	t := report.Table{
		Title:    "Throughput (rps), goodput (rps within SLO), p99 (ms) and mean batch size by offered load",
		Header:   []string{"load", "offered/s"},
		LeftCols: 1,
	}
	for _, c := range r.Configs {
		t.Header = append(t.Header, c.Name+" tput", "good", "p99", "batch")
	}
	for _, ld := range r.loads() {
		row := []string{fmt.Sprintf("%gx", ld), "-"}
		for _, c := range r.Configs {
			p := r.point(c.Name, ld)
			if p == nil {
				row = append(row, "", "", "", "")
				continue
			}
			row[1] = report.Rate(p.Offered)
			if p.Skipped {
				row = append(row, "sat.", "0", "-", "-")
				continue
			}
			p99 := "-"
			if p.Completed > 0 {
				p99 = report.Ms(p.P99)
			}
			if p.Saturated {
				p99 += "*"
			}
			row = append(row, report.Rate(p.Throughput), report.Rate(p.Goodput), p99, batchCell(p.MeanBatch))
		}
		t.Rows = append(t.Rows, row)
	}
	t.Notes = []string{"\\* saturated: goodput under half the offered rate. sat.: skipped after two saturated loads in a row (goodput counted as 0)."}
	for _, c := range r.Configs {
		t.Notes = append(t.Notes, fmt.Sprintf("- %s (%s): %s", c.Name, c.Role, strings.Join(c.Args(r.Setup.Model), " ")))
	}
	return t
}

// DetailTable lists every measured point with its full latency figures.
func (r *BatchingReport) DetailTable() report.Table {
	t := report.Table{
		Title:    "Every point",
		Header:   []string{"config", "load", "offered/s", "tput", "goodput", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "batch", "ok", "errors", "late", "s"},
		LeftCols: 1,
	}
	for _, c := range r.Configs {
		for _, p := range r.Points {
			if p.Config != c.Name || p.Skipped {
				continue
			}
			t.Rows = append(t.Rows, []string{
				p.Config, fmt.Sprintf("%gx", p.Load), report.Rate(p.Offered), report.Rate(p.Throughput), report.Rate(p.Goodput),
				report.Ms(p.P50), report.Ms(p.P99), report.Ms(p.P999), report.Ms(p.Max), batchCell(p.MeanBatch),
				fmt.Sprint(p.Completed), report.Counts(p.Errors), fmt.Sprint(p.Late), fmt.Sprintf("%.1f", p.Seconds),
			})
		}
	}
	return t
}

// SweepTable lists the static candidates with their goodput per load.
func (r *BatchingReport) SweepTable() report.Table {
	t := report.Table{Title: "Static sweep: goodput (rps) per load", Header: []string{"candidate"}, LeftCols: 1}
	if len(r.Sweep) == 0 {
		return t
	}
	for _, p := range r.Sweep[0].Points {
		t.Header = append(t.Header, fmt.Sprintf("%gx", p.Load))
	}
	t.Header = append(t.Header, "total", "mean p99 ms", "")
	for _, e := range r.Sweep {
		row := []string{e.Setting.Name}
		for _, p := range e.Points {
			cell := report.Rate(p.Goodput)
			if p.Skipped {
				cell = "sat."
			}
			row = append(row, cell)
		}
		mark := ""
		if e.Chosen {
			mark = "best"
		}
		row = append(row, report.Rate(e.TotalGoodput), p99Cell(e.MeanP99), mark)
		t.Rows = append(t.Rows, row)
	}
	t.Notes = []string{"best: highest total goodput; within 1% of it, the lowest mean p99 of unsaturated points."}
	return t
}

// CapacityTable lists the closed-loop capacity runs.
func (r *BatchingReport) CapacityTable() report.Table {
	t := report.Table{Title: "Unbatched capacity runs (batching off, closed loop)", Header: []string{"c", "rps", "p50 ms", "p99 ms", "failed"}}
	for _, c := range r.Capacity.Runs {
		t.Rows = append(t.Rows, []string{fmt.Sprint(c.Concurrency), report.Rate(c.Throughput), report.Ms(c.P50), report.Ms(c.P99), fmt.Sprint(c.Failed)})
	}
	return t
}

// Panels returns the plot: throughput, goodput and p99 against offered
// load, one line per configuration.
func (r *BatchingReport) Panels() []report.Panel {
	xLabel := fmt.Sprintf("offered load (req/s; unbatched capacity %s req/s)", report.Rate(r.Capacity.Throughput))
	tput := report.Panel{Title: "Throughput", XLabel: xLabel, YLabel: "completed req/s", LogX: true, LogY: true, LegendBottom: true, LegendRight: true}
	good := report.Panel{Title: "Goodput (requests within the " + r.Setup.SLO + " SLO)", XLabel: xLabel, YLabel: "req/s within SLO",
		LogX: true, LogY: true, LegendBottom: true, LegendRight: true}
	p99 := report.Panel{Title: "p99 latency", XLabel: xLabel, YLabel: "p99 (ms)", LogX: true, LogY: true}
	var offered []float64
	for _, ld := range r.loads() {
		offered = append(offered, ld*r.Capacity.Throughput)
	}
	for _, c := range r.Configs {
		var xs, ts, gs, ps []float64
		for _, p := range r.Points {
			if p.Config != c.Name || p.Skipped {
				continue
			}
			xs, ts, gs = append(xs, p.Offered), append(ts, p.Throughput), append(gs, p.Goodput)
			if p.Completed > 0 {
				ps = append(ps, p.P99)
			} else {
				ps = append(ps, math.NaN())
			}
		}
		tput.Series = append(tput.Series, report.Series{Name: c.Name, X: xs, Y: ts})
		good.Series = append(good.Series, report.Series{Name: c.Name, X: xs, Y: gs})
		p99.Series = append(p99.Series, report.Series{Name: c.Name, X: xs, Y: ps})
	}
	if len(offered) > 0 {
		ref := report.Series{Name: "offered", X: offered, Y: offered, Reference: true}
		tput.Series = append(tput.Series, ref)
		good.Series = append(good.Series, ref)
		if slo, err := time.ParseDuration(r.Setup.SLO); err == nil {
			ms := float64(slo) / float64(time.Millisecond)
			p99.Series = append(p99.Series, report.Series{Name: "SLO", X: []float64{offered[0], offered[len(offered)-1]}, Y: []float64{ms, ms}, Reference: true})
		}
	}
	return []report.Panel{tput, good, p99}
}

func batchCell(v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", v)
}

func p99Cell(v float64) string {
	if v <= 0 {
		return "-"
	}
	return report.Ms(v)
}

// fmtMs formats milliseconds for progress lines.
func fmtMs(v float64) string { return report.Ms(v) }
