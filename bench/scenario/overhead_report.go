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

// The load generators a run can be measured with.
const (
	// ToolBench is the project's own load generator (bench/load).
	ToolBench = "bench"
	// ToolGhz is ghz (github.com/bojand/ghz), a standard gRPC load tool.
	ToolGhz = "ghz"
)

// cellKey is one load of the matrix: closed loop with Callers callers, or
// the open loop, on Conns connections.
type cellKey struct {
	Mode    load.Mode
	Callers int
	Conns   int
}

func (k cellKey) String() string {
	if k.Mode == load.Open {
		return fmt.Sprintf("open x%d", k.Conns)
	}
	return fmt.Sprintf("c%d x%d", k.Callers, k.Conns)
}

// runKey names one run: client, path, load and repetition.
type runKey struct {
	tool, path string
	cell       cellKey
	rep        int
}

// runLabel is a run's label in the raw tables and JSON:
// "4KiB/nginx/c8 x1#2", "4KiB/nginx/ghz c8 x1#2", "4KiB/nginx/open x4#1".
func runLabel(payload, tool, path string, k cellKey, rep int) string {
	prefix := ""
	if tool != ToolBench {
		prefix = tool + " "
	}
	return fmt.Sprintf("%s/%s/%s%s#%d", payload, path, prefix, k, rep)
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
	Conns        []int    `json:"conns"`
	Callers      []int    `json:"callers,omitempty"`
	Arrival      string   `json:"arrival"`
	OpenBase     string   `json:"open_base"`
	OpenFraction float64  `json:"open_fraction"`
	Tools        []string `json:"tools"`
	Ghz          string   `json:"ghz,omitempty"`
	NginxWorkers string   `json:"nginx_workers,omitempty"`
	// HAProxyThreads is HAProxy's nbthread, when it ran.
	HAProxyThreads int      `json:"haproxy_threads,omitempty"`
	NumCPU         int      `json:"num_cpu"`
	GOMAXPROCS     int      `json:"gomaxprocs"`
	Paths          []Path   `json:"paths"`
	Notes          []string `json:"notes"`
}

// PathSummary is one path's figures for one load, over repetitions.
// Latencies are in milliseconds.
type PathSummary struct {
	Path string `json:"path"`
	// RPS is the throughput: the max in the closed loop, the rate served
	// in the open loop.
	RPS Spread `json:"rps"`
	// VsDirect is RPS divided by the direct path's, per repetition
	// (closed loop only).
	VsDirect *Spread `json:"throughput_vs_direct,omitempty"`
	P50      Spread  `json:"p50_ms"`
	P99      Spread  `json:"p99_ms"`
	// AddedP50 and AddedP99 are this path minus direct, per repetition.
	AddedP50 Spread `json:"added_p50_ms"`
	AddedP99 Spread `json:"added_p99_ms"`
	// Failed counts failed requests over all of this path's runs.
	Failed int64 `json:"failed"`
	// Saturated is true when the open-loop rate was at least 95% of this
	// path's max throughput: its latency then mostly measures queueing.
	Saturated bool `json:"saturated,omitempty"`
}

// CellSummary is one load measured by one client on every path.
type CellSummary struct {
	Tool    string    `json:"tool"`
	Mode    load.Mode `json:"mode"`
	Callers int       `json:"callers,omitempty"`
	Conns   int       `json:"conns"`
	// Rate is the open-loop rate, per repetition.
	Rate  *Spread       `json:"open_loop_rate,omitempty"`
	Paths []PathSummary `json:"paths"`
	// InfergateVsNginx is infergate's throughput over nginx's (closed
	// loop), when both ran.
	InfergateVsNginx *Spread `json:"infergate_vs_nginx_throughput,omitempty"`
	// InfergateVsHAProxy is infergate's throughput over HAProxy's (h2,
	// closed loop), when both ran.
	InfergateVsHAProxy *Spread `json:"infergate_vs_haproxy_throughput,omitempty"`
}

func (c *CellSummary) key() cellKey { return cellKey{c.Mode, c.Callers, c.Conns} }

func (c *CellSummary) path(name string) *PathSummary {
	for i := range c.Paths {
		if c.Paths[i].Path == name {
			return &c.Paths[i]
		}
	}
	return nil
}

// Agreement compares what the project's load generator and ghz say about
// infergate against nginx for one load and one figure.
type Agreement struct {
	Mode    load.Mode `json:"mode"`
	Callers int       `json:"callers,omitempty"`
	Conns   int       `json:"conns"`
	// Figure is "throughput" (Bench and Ghz are infergate / nginx, median
	// of the per-repetition ratios) or "added p50" / "added p99" (infergate
	// minus nginx, ms, medians).
	Figure string  `json:"figure"`
	Bench  float64 `json:"bench"`
	Ghz    float64 `json:"ghz"`
	// BenchFaster and GhzFaster name the faster proxy by each client:
	// "infergate", "nginx" or "tie".
	BenchFaster string `json:"bench_faster"`
	GhzFaster   string `json:"ghz_faster"`
	Agree       bool   `json:"agree"`
}

// PayloadSummary holds every load's figures for one payload.
type PayloadSummary struct {
	PayloadSpec
	RequestBytes int           `json:"request_bytes"`
	Cells        []CellSummary `json:"cells"`
	Agreement    []Agreement   `json:"agreement,omitempty"`
	// Runs are the raw results of both clients, labelled by runLabel.
	Runs []*load.Result `json:"runs"`

	keys []runKey // parallel to Runs
}

// OverheadReport is the outcome of the overhead scenario.
type OverheadReport struct {
	Setup    OverheadSetup    `json:"setup"`
	Payloads []PayloadSummary `json:"payloads"`

	paths []string
	tools []string
	cells [][]cellKey // per payload, in measurement order
}

func newOverheadReport(cfg OverheadConfig, paths []Path) *OverheadReport {
	r := &OverheadReport{Setup: OverheadSetup{
		Proto: cfg.Proto.String(), Model: cfg.Model, Input: cfg.Input, Datatype: cfg.Datatype,
		Duration: cfg.Duration.String(), Warmup: cfg.Warmup.String(), Repeat: cfg.Repeat,
		Conns: cfg.Conns, Callers: cfg.Callers, Arrival: cfg.Arrival.String(),
		OpenBase: cfg.OpenBase, OpenFraction: cfg.OpenFraction,
		NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Paths: paths,
		Notes: []string{
			fmt.Sprintf("Max throughput: closed loop at each caller count. Open loop: %.2f of the %s path's max rate (its best closed-loop throughput in the round; with ghz, the lower of the two clients'); the project's client measures from intended send times.", cfg.OpenFraction, cfg.OpenBase),
			"Rounds are interleaved: each repetition measures every load on every path, each of the project's runs followed at once by ghz's on the same path and load.",
			"The load generator, simserver and the proxy share this machine's CPUs; compare paths within one run, not across machines.",
		},
	}}
	r.tools = []string{ToolBench}
	if cfg.Ghz != "" {
		r.tools = append(r.tools, ToolGhz)
		r.Setup.Ghz = cfg.Ghz
		r.Setup.Notes = append(r.Setup.Notes, fmt.Sprintf(
			"ghz (%s, written against %s) sends the same request bytes (--binary-file) on the same connections and callers (--connections, --concurrency), warmed up by an unrecorded ghz run of the warmup's length; its open loop is --rps with --async, and it measures each call from its actual start (so a stalled path can hide queueing that the project's client shows). ghz reports no p99.9.",
			cfg.Ghz, GhzVersion))
	} else {
		why := cfg.GhzSkipped
		if why == "" {
			why = "no ghz binary given"
		}
		r.Setup.Notes = append(r.Setup.Notes, "ghz: skipped ("+why+"); install it with `go install github.com/bojand/ghz/cmd/ghz@"+GhzVersion+"`.")
	}
	if cfg.HAProxySkipped != "" {
		r.Setup.Notes = append(r.Setup.Notes, "haproxy: skipped ("+cfg.HAProxySkipped+"); install it with `apt-get install -y haproxy`.")
	}
	r.Setup.Tools = r.tools
	for _, p := range paths {
		r.paths = append(r.paths, p.Name)
		if p.Name == PathNginx {
			r.Setup.NginxWorkers = cfg.NginxWorkers
			r.Setup.Notes = append(r.Setup.Notes, fmt.Sprintf(
				"nginx: worker_processes %s, HTTP/2 (h2c) grpc_pass with upstream keepalive 32; infergate: one Go process, GOMAXPROCS = its default (all cores).", cfg.NginxWorkers))
		}
		if p.Name == PathHAProxy {
			r.Setup.HAProxyThreads = cfg.HAProxyThreads
			r.Setup.Notes = append(r.Setup.Notes, fmt.Sprintf(
				"haproxy: HAProxy, one process with nbthread %d, h2 (h2c) on both sides, http-reuse always, so client streams share its upstream connections.", cfg.HAProxyThreads))
		}
		if p.Name == PathHAProxyTCP {
			r.Setup.Notes = append(r.Setup.Notes, fmt.Sprintf(
				"haproxy-tcp: HAProxy in mode tcp (nbthread %d): one upstream connection per client connection, bytes relayed, nothing parsed; the plain TCP relay floor for big messages.", cfg.HAProxyThreads))
		}
		if p.Name == PathByteRelay {
			r.Setup.Notes = append(r.Setup.Notes,
				"tcp-relay: a TCP byte relay (bench relay): one upstream connection per client connection, bytes moved with splice(2), nothing parsed. It pays only what any proxy pays for a second TCP hop, so its throughput against direct bounds any proxy's on this machine.")
		}
	}
	for _, ps := range cfg.Payloads {
		r.Payloads = append(r.Payloads, PayloadSummary{PayloadSpec: ps})
		var cells []cellKey
		for _, conns := range cfg.Conns {
			for _, c := range cfg.callers(ps) {
				cells = append(cells, cellKey{load.Closed, c, conns})
			}
		}
		for _, conns := range cfg.Conns {
			cells = append(cells, cellKey{Mode: load.Open, Conns: conns})
		}
		r.cells = append(r.cells, cells)
	}
	return r
}

// add stores one run of payload i.
func (r *OverheadReport) add(i int, k runKey, res *load.Result) {
	p := &r.Payloads[i]
	p.RequestBytes = res.RequestBytes
	p.Runs = append(p.Runs, res)
	p.keys = append(p.keys, k)
}

// find returns the run of payload p with key k, or nil.
func (p *PayloadSummary) find(k runKey) *load.Result {
	for i, key := range p.keys {
		if key == k {
			return p.Runs[i]
		}
	}
	return nil
}

// capacity is a path's best closed-loop throughput in repetition rep by
// tool; NaN when none ran.
func (p *PayloadSummary) capacity(tool, path string, rep int) float64 {
	best := math.NaN()
	for i, k := range p.keys {
		if k.tool == tool && k.path == path && k.rep == rep && k.cell.Mode == load.Closed {
			if math.IsNaN(best) || p.Runs[i].Throughput > best {
				best = p.Runs[i].Throughput
			}
		}
	}
	return best
}

// summarise computes every Spread from the runs, then the agreement
// between the two clients.
func (r *OverheadReport) summarise() {
	for i := range r.Payloads {
		p := &r.Payloads[i]
		p.Cells, p.Agreement = nil, nil
		for _, tool := range r.tools {
			for _, k := range r.cells[i] {
				p.Cells = append(p.Cells, r.summariseCell(p, tool, k))
			}
		}
		if len(r.tools) > 1 {
			p.Agreement = agreement(p)
		}
	}
}

func (r *OverheadReport) summariseCell(p *PayloadSummary, tool string, k cellKey) CellSummary {
	nan := math.NaN()
	direct := r.paths[0]
	c := CellSummary{Tool: tool, Mode: k.Mode, Callers: k.Callers, Conns: k.Conns}
	if k.Mode == load.Open {
		var rates []float64
		for rep := 1; rep <= r.Setup.Repeat; rep++ {
			if o := p.find(runKey{tool, direct, k, rep}); o != nil {
				rates = append(rates, o.Rate)
			}
		}
		s := spreadOf(rates)
		c.Rate = &s
	}
	for _, path := range r.paths {
		var rps, vs, p50, p99, add50, add99, capacity []float64
		var failed int64
		for rep := 1; rep <= r.Setup.Repeat; rep++ {
			res, d := p.find(runKey{tool, path, k, rep}), p.find(runKey{tool, direct, k, rep})
			capacity = append(capacity, p.capacity(tool, path, rep))
			if res == nil {
				continue
			}
			failed += res.Failed
			rps = append(rps, res.Throughput)
			if k.Mode == load.Closed && d != nil && d.Throughput > 0 {
				vs = append(vs, res.Throughput/d.Throughput)
			}
			if res.Completed == 0 {
				p50, p99 = append(p50, nan), append(p99, nan)
				continue
			}
			p50, p99 = append(p50, res.Latency.P50), append(p99, res.Latency.P99)
			if d != nil && d.Completed > 0 {
				add50 = append(add50, res.Latency.P50-d.Latency.P50)
				add99 = append(add99, res.Latency.P99-d.Latency.P99)
			}
		}
		ps := PathSummary{
			Path: path, RPS: spreadOf(rps),
			P50: spreadOf(p50), P99: spreadOf(p99), AddedP50: spreadOf(add50), AddedP99: spreadOf(add99),
			Failed: failed,
		}
		if k.Mode == load.Closed {
			s := spreadOf(vs)
			ps.VsDirect = &s
		} else {
			ps.Saturated = spreadOf(capacity).Median < c.Rate.Median/0.95
		}
		c.Paths = append(c.Paths, ps)
	}
	if k.Mode == load.Closed {
		c.InfergateVsNginx = r.infergateVs(p, tool, PathNginx, k)
		c.InfergateVsHAProxy = r.infergateVs(p, tool, PathHAProxy, k)
	}
	return c
}

// infergateVs is infergate's throughput over peer's for load k, per
// repetition; nil when either did not run.
func (r *OverheadReport) infergateVs(p *PayloadSummary, tool, peer string, k cellKey) *Spread {
	var ratio []float64
	for rep := 1; rep <= r.Setup.Repeat; rep++ {
		ig, pr := p.find(runKey{tool, PathInfergate, k, rep}), p.find(runKey{tool, peer, k, rep})
		if ig != nil && pr != nil && pr.Throughput > 0 {
			ratio = append(ratio, ig.Throughput/pr.Throughput)
		}
	}
	if len(ratio) == 0 {
		return nil
	}
	s := spreadOf(ratio)
	return &s
}

// agreement compares infergate with nginx by each client, load by load:
// throughput in the closed loop, added p50 and p99 in both.
func agreement(p *PayloadSummary) []Agreement {
	byKey := map[cellKey]map[string]*CellSummary{}
	var order []cellKey
	for i := range p.Cells {
		c := &p.Cells[i]
		if byKey[c.key()] == nil {
			byKey[c.key()] = map[string]*CellSummary{}
			order = append(order, c.key())
		}
		byKey[c.key()][c.Tool] = c
	}
	var out []Agreement
	for _, k := range order {
		b, g := byKey[k][ToolBench], byKey[k][ToolGhz]
		if b == nil || g == nil {
			continue
		}
		bi, bn, gi, gn := b.path(PathInfergate), b.path(PathNginx), g.path(PathInfergate), g.path(PathNginx)
		if bi == nil || bn == nil || gi == nil || gn == nil {
			continue
		}
		add := func(figure string, bv, gv float64, faster func(float64) string) {
			if math.IsNaN(bv) || math.IsNaN(gv) {
				return
			}
			bf, gf := faster(bv), faster(gv)
			out = append(out, Agreement{Mode: k.Mode, Callers: k.Callers, Conns: k.Conns, Figure: figure,
				Bench: bv, Ghz: gv, BenchFaster: bf, GhzFaster: gf, Agree: bf == gf})
		}
		if k.Mode == load.Closed && b.InfergateVsNginx != nil && g.InfergateVsNginx != nil {
			add("throughput", b.InfergateVsNginx.Median, g.InfergateVsNginx.Median, func(v float64) string {
				switch {
				case v > 1:
					return PathInfergate
				case v < 1:
					return PathNginx
				}
				return "tie"
			})
		}
		lower := func(v float64) string {
			switch {
			case v < 0:
				return PathInfergate
			case v > 0:
				return PathNginx
			}
			return "tie"
		}
		add("added p50", bi.AddedP50.Median-bn.AddedP50.Median, gi.AddedP50.Median-gn.AddedP50.Median, lower)
		add("added p99", bi.AddedP99.Median-bn.AddedP99.Median, gi.AddedP99.Median-gn.AddedP99.Median, lower)
	}
	return out
}

// Markdown renders, per payload, the closed-loop throughput, the latency
// of every load and the two clients' agreement, side by side; then the
// setup.
func (r *OverheadReport) Markdown() string {
	var b strings.Builder
	s := r.Setup
	reps := "1 repetition"
	if s.Repeat > 1 {
		reps = fmt.Sprintf("%d interleaved repetitions, median [min..max]", s.Repeat)
	}
	fmt.Fprintf(&b, "## Proxy overhead: %s, %s per measurement (+%s warmup), %s; clients: %s\n\n",
		s.Proto, s.Duration, s.Warmup, reps, strings.Join(r.tools, ", "))
	for _, p := range r.Payloads {
		what := fmt.Sprintf("%s %s, shape %v", p.Name, s.Model, p.Shape)
		if len(p.Inputs) > 0 {
			what = fmt.Sprintf("%s (model %s, %d inputs)", p.Name, p.Model, len(p.Inputs))
		}
		b.WriteString(r.throughputTable(p, what).Markdown())
		b.WriteString("\n")
		b.WriteString(r.latencyTable(p, what).Markdown())
		b.WriteString("\n")
		if t := agreementTable(p, what); t != nil {
			b.WriteString(t.Markdown())
			b.WriteString("\n")
		}
	}
	fmt.Fprintf(&b, "Setup: %d CPUs (GOMAXPROCS %d), client connections %v, open-loop arrival %s.\n", s.NumCPU, s.GOMAXPROCS, s.Conns, s.Arrival)
	for _, n := range s.Notes {
		b.WriteString("- " + n + "\n")
	}
	return b.String()
}

// cell returns payload p's summary of load k by tool, or nil.
func (p *PayloadSummary) cell(tool string, k cellKey) *CellSummary {
	for i := range p.Cells {
		if p.Cells[i].Tool == tool && p.Cells[i].key() == k {
			return &p.Cells[i]
		}
	}
	return nil
}

// keysOf lists p's loads of mode in measurement order.
func (r *OverheadReport) keysOf(p *PayloadSummary, mode load.Mode) []cellKey {
	var out []cellKey
	for _, c := range p.Cells {
		if c.Tool == r.tools[0] && c.Mode == mode {
			out = append(out, c.key())
		}
	}
	return out
}

// toolHeader repeats each figure per client: "rps", "rps ghz".
func (r *OverheadReport) toolHeader(figures ...string) []string {
	var h []string
	for _, f := range figures {
		for _, tool := range r.tools {
			if tool == ToolBench {
				h = append(h, f)
			} else {
				h = append(h, f+" "+tool)
			}
		}
	}
	return h
}

func (r *OverheadReport) throughputTable(p PayloadSummary, what string) report.Table {
	figures := []string{"rps", "vs direct", "vs nginx", "failed"}
	withHAProxy := slices.Contains(r.paths, PathHAProxy)
	if withHAProxy {
		figures = []string{"rps", "vs direct", "vs nginx", "vs haproxy", "failed"}
	}
	t := report.Table{
		Title:    fmt.Sprintf("%s, request %d bytes: closed-loop max rps", what, p.RequestBytes),
		Header:   append([]string{"callers", "conns", "path"}, r.toolHeader(figures...)...),
		LeftCols: 3,
	}
	ratio := func(path string, s *Spread) string {
		if path != PathInfergate || s == nil {
			return "-"
		}
		return s.format(report.Ratio)
	}
	for _, k := range r.keysOf(&p, load.Closed) {
		for _, path := range r.paths {
			row := []string{fmt.Sprint(k.Callers), fmt.Sprint(k.Conns), path}
			cols := make([][]string, len(figures))
			for _, tool := range r.tools {
				c := p.cell(tool, k)
				ps := c.path(path)
				vs := "-"
				if ps.VsDirect != nil && path != r.paths[0] {
					vs = ps.VsDirect.format(report.Ratio)
				}
				cols[0] = append(cols[0], ps.RPS.format(report.Rate))
				cols[1] = append(cols[1], vs)
				cols[2] = append(cols[2], ratio(path, c.InfergateVsNginx))
				if withHAProxy {
					cols[3] = append(cols[3], ratio(path, c.InfergateVsHAProxy))
				}
				cols[len(cols)-1] = append(cols[len(cols)-1], fmt.Sprint(ps.Failed))
			}
			for _, c := range cols {
				row = append(row, c...)
			}
			t.Rows = append(t.Rows, row)
		}
	}
	return t
}

func (r *OverheadReport) latencyTable(p PayloadSummary, what string) report.Table {
	t := report.Table{
		Title:    fmt.Sprintf("%s: latency (ms) closed loop and open loop", what),
		Header:   append([]string{"load", "path"}, r.toolHeader("p50", "p99", "added p50", "added p99")...),
		LeftCols: 2,
	}
	saturated := false
	for _, mode := range []load.Mode{load.Closed, load.Open} {
		for _, k := range r.keysOf(&p, mode) {
			name := k.String()
			if mode == load.Open {
				if c := p.cell(ToolBench, k); c != nil && c.Rate != nil {
					name = fmt.Sprintf("open %s/s x%d", c.Rate.format(report.Rate), k.Conns)
				}
			}
			for _, path := range r.paths {
				row := []string{name, path}
				cols := make([][]string, 4)
				for _, tool := range r.tools {
					ps := p.cell(tool, k).path(path)
					p50, p99 := ps.P50.format(report.Ms), ps.P99.format(report.Ms)
					if ps.Saturated {
						saturated = true
						p50, p99 = p50+" *", p99+" *"
					}
					a50, a99 := ps.AddedP50.format(report.SignedMs), ps.AddedP99.format(report.SignedMs)
					if path == r.paths[0] {
						a50, a99 = "-", "-"
					}
					cols[0] = append(cols[0], p50)
					cols[1] = append(cols[1], p99)
					cols[2] = append(cols[2], a50)
					cols[3] = append(cols[3], a99)
				}
				for _, c := range cols {
					row = append(row, c...)
				}
				t.Rows = append(t.Rows, row)
			}
		}
	}
	t.Notes = append(t.Notes, "Load: cN xM is the closed loop with N callers on M connections; open R/s xM the open loop at R calls/s on M connections. Added: this path minus direct, per repetition.")
	if saturated {
		t.Notes = append(t.Notes, "\\* the open-loop rate is at or near this path's max throughput, so its latency is mostly queueing.")
	}
	return t
}

// agreementTable shows, per load and figure, who is faster by each
// client; nil when ghz did not run or nginx or infergate was left out.
func agreementTable(p PayloadSummary, what string) *report.Table {
	if len(p.Agreement) == 0 {
		return nil
	}
	t := report.Table{
		Title:    fmt.Sprintf("%s: infergate vs nginx, bench and ghz side by side", what),
		Header:   []string{"load", "figure", "bench", "ghz", "faster by bench", "faster by ghz", "verdict"},
		LeftCols: 2,
	}
	disagree := 0
	for _, a := range p.Agreement {
		k := cellKey{a.Mode, a.Callers, a.Conns}
		f := report.SignedMs
		if a.Figure == "throughput" {
			f = report.Ratio
		}
		verdict := "agree"
		if !a.Agree {
			verdict = "**DISAGREE**"
			disagree++
		}
		t.Rows = append(t.Rows, []string{k.String(), a.Figure, f(a.Bench), f(a.Ghz), a.BenchFaster, a.GhzFaster, verdict})
	}
	t.Notes = append(t.Notes, "throughput: infergate / nginx (median of per-repetition ratios); added p50/p99: infergate's minus nginx's added latency in ms (negative: infergate adds less).")
	if disagree > 0 {
		t.Notes = append(t.Notes, fmt.Sprintf(
			"The clients disagree on %d of %d figures. Known differences: ghz builds and parses every message through protobuf reflection (dynamic messages), so it takes more of the shared CPUs from the servers and the proxies; it measures from each call's actual start, and its open loop (--rps --async) starts calls on its own schedule; the two clients' runs follow each other, not run at once. Compare the spreads: a median difference inside both min..max ranges is noise.", disagree, len(p.Agreement)))
	}
	return &t
}

// RunsMarkdown renders every raw run as one load table per payload.
func (r *OverheadReport) RunsMarkdown() string {
	var b strings.Builder
	for _, p := range r.Payloads {
		t := report.LoadTable("runs: "+p.Name, p.Runs)
		if len(r.tools) > 1 {
			t.Notes = append(t.Notes, "ghz runs (labels with \"ghz\") report no p99.9 (shown as 0) and no late/dropped counts.")
		}
		b.WriteString(t.Markdown())
		b.WriteString("\n")
	}
	return b.String()
}
