package scenario

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"

	"github.com/infergate/infergate/bench/load"
	"github.com/infergate/infergate/bench/report"
)

// Spread summarises one figure over the repetitions.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
}

// spreadOf returns the median, min and max of vs; NaN values are skipped.
func spreadOf(vs []float64) Spread {
	xs := make([]float64, 0, len(vs))
	for _, v := range vs {
		if !math.IsNaN(v) {
			xs = append(xs, v)
		}
	}
	if len(xs) == 0 {
		return Spread{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	slices.Sort(xs)
	med := xs[len(xs)/2]
	if len(xs)%2 == 0 {
		med = (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
	}
	return Spread{Median: med, Min: xs[0], Max: xs[len(xs)-1], N: len(xs)}
}

// MarshalJSON keeps NaN (no data) valid JSON as null.
func (s Spread) MarshalJSON() ([]byte, error) {
	f := func(v float64) string {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return "null"
		}
		return fmt.Sprintf("%g", v)
	}
	return fmt.Appendf(nil, `{"median":%s,"min":%s,"max":%s,"n":%d}`, f(s.Median), f(s.Min), f(s.Max), s.N), nil
}

// format renders the median, with "[min–max]" when repetitions differ.
func (s Spread) format(f func(float64) string) string {
	if s.N <= 1 || s.Min == s.Max {
		return f(s.Median)
	}
	return fmt.Sprintf("%s [%s..%s]", f(s.Median), f(s.Min), f(s.Max))
}

// OverheadSetup records how the scenario ran, for reading the numbers.
type OverheadSetup struct {
	Proto        string   `json:"proto"`
	Model        string   `json:"model"`
	Input        string   `json:"input"`
	Datatype     string   `json:"datatype"`
	Duration     string   `json:"duration"`
	Warmup       string   `json:"warmup"`
	Repeat       int      `json:"repeat"`
	Conns        int      `json:"conns"`
	Arrival      string   `json:"arrival"`
	NginxWorkers string   `json:"nginx_workers,omitempty"`
	NumCPU       int      `json:"num_cpu"`
	GOMAXPROCS   int      `json:"gomaxprocs"`
	Paths        []Path   `json:"paths"`
	Notes        []string `json:"notes"`
}

// PathSummary is one path's figures for one payload, over repetitions.
// Latencies are open-loop, in milliseconds, at the payload's Rate.
type PathSummary struct {
	Path string `json:"path"`
	// MaxRPS is the closed-loop throughput.
	MaxRPS Spread `json:"max_rps"`
	// VsDirect is MaxRPS divided by the direct path's, per repetition.
	VsDirect Spread `json:"throughput_vs_direct"`
	P50      Spread `json:"p50_ms"`
	P99      Spread `json:"p99_ms"`
	// AddedP50 and AddedP99 are this path minus direct, per repetition.
	AddedP50 Spread `json:"added_p50_ms"`
	AddedP99 Spread `json:"added_p99_ms"`
	// Failed counts failed requests over all of this path's runs.
	Failed int64 `json:"failed"`
	// Saturated is true when the open-loop rate was at least 95% of this
	// path's max throughput: its latency then mostly measures queueing.
	Saturated bool `json:"saturated"`
}

// PayloadSummary holds every path's figures for one payload.
type PayloadSummary struct {
	PayloadSpec
	RequestBytes int `json:"request_bytes"`
	// Rate is the open-loop rate (OpenFraction of OpenBase's max), per repetition.
	Rate  Spread        `json:"open_loop_rate"`
	Paths []PathSummary `json:"paths"`
	// InfergateVsNginx is infergate's max throughput over nginx's, when both ran.
	InfergateVsNginx *Spread `json:"infergate_vs_nginx_throughput,omitempty"`
	// Runs are the raw results, labelled payload/path/mode#repetition.
	Runs []*load.Result `json:"runs"`
}

// OverheadReport is the outcome of the overhead scenario.
type OverheadReport struct {
	Setup    OverheadSetup    `json:"setup"`
	Payloads []PayloadSummary `json:"payloads"`

	paths []string
}

func newOverheadReport(cfg OverheadConfig, paths []Path) *OverheadReport {
	r := &OverheadReport{Setup: OverheadSetup{
		Proto: cfg.Proto.String(), Model: cfg.Model, Input: cfg.Input, Datatype: cfg.Datatype,
		Duration: cfg.Duration.String(), Warmup: cfg.Warmup.String(), Repeat: cfg.Repeat,
		Conns: cfg.Conns, Arrival: cfg.Arrival.String(),
		NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Paths: paths,
		Notes: []string{
			fmt.Sprintf("Max throughput: closed loop at the payload's concurrency. Latency: open loop at %.2f of the %s path's max rate, measured from intended send times.", cfg.OpenFraction, cfg.OpenBase),
			"The load generator, simserver and the proxy share this machine's CPUs; compare paths within one run, not across machines.",
		},
	}}
	for _, p := range paths {
		r.paths = append(r.paths, p.Name)
		if p.Name == PathNginx {
			r.Setup.NginxWorkers = cfg.NginxWorkers
			r.Setup.Notes = append(r.Setup.Notes, fmt.Sprintf(
				"nginx: worker_processes %s, HTTP/2 (h2c) grpc_pass with upstream keepalive 32; infergate: one Go process, GOMAXPROCS = its default (all cores).", cfg.NginxWorkers))
		}
	}
	for _, ps := range cfg.Payloads {
		r.Payloads = append(r.Payloads, PayloadSummary{PayloadSpec: ps})
	}
	return r
}

// add stores one run of payload i; its label names path, mode and repetition.
func (r *OverheadReport) add(i int, res *load.Result) {
	p := &r.Payloads[i]
	p.RequestBytes = res.RequestBytes
	p.Runs = append(p.Runs, res)
}

// find returns the run of payload p for path, mode and repetition, or nil.
func (p *PayloadSummary) find(path string, mode load.Mode, rep int) *load.Result {
	label := fmt.Sprintf("%s/%s/%s#%d", p.Name, path, mode, rep)
	for _, res := range p.Runs {
		if res.Label == label {
			return res
		}
	}
	return nil
}

// summarise computes every Spread from the runs.
func (r *OverheadReport) summarise() {
	nan := math.NaN()
	for i := range r.Payloads {
		p := &r.Payloads[i]
		p.Paths = nil
		direct := r.paths[0]
		var rates []float64
		for rep := 1; rep <= r.Setup.Repeat; rep++ {
			if o := p.find(direct, load.Open, rep); o != nil {
				rates = append(rates, o.Rate)
			}
		}
		p.Rate = spreadOf(rates)
		for _, path := range r.paths {
			var maxRPS, vs, p50, p99, add50, add99 []float64
			var failed int64
			for rep := 1; rep <= r.Setup.Repeat; rep++ {
				c, o := p.find(path, load.Closed, rep), p.find(path, load.Open, rep)
				dc, do := p.find(direct, load.Closed, rep), p.find(direct, load.Open, rep)
				if c != nil {
					maxRPS = append(maxRPS, c.Throughput)
					failed += c.Failed
					if dc != nil && dc.Throughput > 0 {
						vs = append(vs, c.Throughput/dc.Throughput)
					}
				}
				if o != nil {
					failed += o.Failed
					if o.Completed == 0 {
						p50, p99 = append(p50, nan), append(p99, nan)
						continue
					}
					p50, p99 = append(p50, o.Latency.P50), append(p99, o.Latency.P99)
					if do != nil && do.Completed > 0 {
						add50 = append(add50, o.Latency.P50-do.Latency.P50)
						add99 = append(add99, o.Latency.P99-do.Latency.P99)
					}
				}
			}
			p.Paths = append(p.Paths, PathSummary{
				Path: path, MaxRPS: spreadOf(maxRPS), VsDirect: spreadOf(vs),
				P50: spreadOf(p50), P99: spreadOf(p99), AddedP50: spreadOf(add50), AddedP99: spreadOf(add99),
				Failed: failed, Saturated: spreadOf(maxRPS).Median < p.Rate.Median/0.95,
			})
		}
		var ratio []float64
		for rep := 1; rep <= r.Setup.Repeat; rep++ {
			ig, ng := p.find(PathInfergate, load.Closed, rep), p.find(PathNginx, load.Closed, rep)
			if ig != nil && ng != nil && ng.Throughput > 0 {
				ratio = append(ratio, ig.Throughput/ng.Throughput)
			}
		}
		if len(ratio) > 0 {
			s := spreadOf(ratio)
			p.InfergateVsNginx = &s
		}
	}
}

// Markdown renders the summary tables, one per payload, then the setup.
func (r *OverheadReport) Markdown() string {
	var b strings.Builder
	s := r.Setup
	reps := "1 repetition"
	if s.Repeat > 1 {
		reps = fmt.Sprintf("%d repetitions, median [min..max]", s.Repeat)
	}
	fmt.Fprintf(&b, "## Proxy overhead: %s %s, %s per measurement (+%s warmup), %s\n\n", s.Proto, s.Model, s.Duration, s.Warmup, reps)
	for _, p := range r.Payloads {
		t := report.Table{
			Title: fmt.Sprintf("%s (shape %v, request %d bytes): max rps at c=%d, latency at %s/s",
				p.Name, p.Shape, p.RequestBytes, p.Concurrency, p.Rate.format(report.Rate)),
			Header: []string{"path", "max rps", "vs direct", "p50 ms", "p99 ms", "added p50 ms", "added p99 ms", "failed"},
		}
		saturated := false
		for _, ps := range p.Paths {
			added50, added99 := ps.AddedP50.format(report.SignedMs), ps.AddedP99.format(report.SignedMs)
			if ps.Path == r.paths[0] {
				added50, added99 = "-", "-"
			}
			p50, p99 := ps.P50.format(report.Ms), ps.P99.format(report.Ms)
			if ps.Saturated {
				saturated = true
				p50, p99 = p50+" *", p99+" *"
			}
			t.Rows = append(t.Rows, []string{
				ps.Path, ps.MaxRPS.format(report.Rate), ps.VsDirect.format(report.Ratio),
				p50, p99, added50, added99, fmt.Sprint(ps.Failed),
			})
		}
		if saturated {
			t.Notes = append(t.Notes, "\\* the open-loop rate is at or near this path's max throughput, so its latency is mostly queueing.")
		}
		if p.InfergateVsNginx != nil {
			t.Notes = append(t.Notes, "infergate / nginx max throughput: "+p.InfergateVsNginx.format(report.Ratio))
		}
		b.WriteString(t.Markdown())
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "Setup: %d CPUs (GOMAXPROCS %d), %d client connection(s) per run, open-loop arrival %s.\n", s.NumCPU, s.GOMAXPROCS, s.Conns, s.Arrival)
	for _, n := range s.Notes {
		b.WriteString("- " + n + "\n")
	}
	return b.String()
}

// RunsMarkdown renders every raw run as one load table per payload.
func (r *OverheadReport) RunsMarkdown() string {
	var b strings.Builder
	for _, p := range r.Payloads {
		b.WriteString(report.LoadTable("runs: "+p.Name, p.Runs).Markdown())
		b.WriteString("\n")
	}
	return b.String()
}
