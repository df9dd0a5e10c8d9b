package scenario

import (
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/infergate/infergate/bench/load"
	"github.com/infergate/infergate/bench/report"
)

// BatchPoint is one configuration at one offered load. Latencies are in
// milliseconds, measured from each request's intended send time.
type BatchPoint struct {
	Config string `json:"config"`
	// Load is the offered load as a fraction of the unbatched capacity.
	Load float64 `json:"load"`
	// Offered is the open-loop rate in requests per second.
	Offered    float64 `json:"offered_rps"`
	Throughput float64 `json:"throughput_rps"`
	// Goodput counts completed requests with latency within the SLO, per
	// second of measured time.
	Goodput   float64          `json:"goodput_rps"`
	P50       float64          `json:"p50_ms"`
	P99       float64          `json:"p99_ms"`
	P999      float64          `json:"p999_ms"`
	Max       float64          `json:"max_ms"`
	Completed int64            `json:"completed"`
	Failed    int64            `json:"failed"`
	Errors    map[string]int64 `json:"errors,omitempty"`
	Late      int64            `json:"late"`
	Dropped   int64            `json:"dropped"`
	Seconds   float64          `json:"duration_s"`
	// MeanBatch is the mean upstream batch size over the measured window,
	// from infergate_batch_size; zero when unknown. With batching off and
	// no batch metric it is 1 by construction.
	MeanBatch float64 `json:"mean_batch,omitempty"`
	// Batches is the number of batches dispatched in the window.
	Batches float64 `json:"batches,omitempty"`
	// Saturated marks goodput under half the offered rate.
	Saturated bool `json:"saturated,omitempty"`
	// Skipped marks a load not run because the configuration was already
	// saturated at lower loads; its goodput is taken as 0.
	Skipped bool `json:"skipped,omitempty"`
}

// newBatchPoint summarises one measured run.
func newBatchPoint(s BatchSetting, ld float64, res *load.Result, delta BatchCounters, slo time.Duration) BatchPoint {
	p := BatchPoint{
		Config: s.Name, Load: ld, Offered: res.Rate, Throughput: res.Throughput,
		P50: res.Latency.P50, P99: res.Latency.P99, P999: res.Latency.P999, Max: res.Latency.Max,
		Completed: res.Completed, Failed: res.Failed, Errors: res.Errors,
		Late: res.Late, Dropped: res.Dropped, Seconds: res.Seconds,
	}
	if res.Seconds > 0 {
		p.Goodput = float64(countWithin(res, slo)) / res.Seconds
	}
	switch {
	case delta.Found && delta.Batches > 0:
		p.MeanBatch, p.Batches = delta.MeanBatch(), delta.Batches
	case s.Mode == BatchOff && !delta.Found:
		p.MeanBatch = 1
	}
	p.Saturated = p.Goodput < 0.5*p.Offered
	return p
}

// countWithin returns how many successful requests took at most slo,
// within the histogram's precision.
func countWithin(res *load.Result, slo time.Duration) int64 {
	h := res.Histogram()
	if h == nil {
		return 0
	}
	limit := slo.Microseconds()
	var n int64
	for _, b := range h.Distribution() {
		if b.From <= limit {
			n += b.Count
		}
	}
	return n
}

// CapacityRun is one closed-loop run of the capacity measurement.
type CapacityRun struct {
	Concurrency int     `json:"concurrency"`
	Throughput  float64 `json:"throughput_rps"`
	P50         float64 `json:"p50_ms"`
	P99         float64 `json:"p99_ms"`
	Failed      int64   `json:"failed"`
}

// Capacity is the unbatched capacity: the best closed-loop throughput
// through infergate with batching off.
type Capacity struct {
	Throughput  float64       `json:"max_rps"`
	Concurrency int           `json:"concurrency"`
	Runs        []CapacityRun `json:"runs"`
	// PhysicalLimit is the model's best batch throughput, rows per
	// second: closed loop straight to the model server with requests of
	// PhysicalBatch rows. Zero when not measured.
	PhysicalLimit float64 `json:"physical_limit_rows_per_s,omitempty"`
	PhysicalBatch int     `json:"physical_batch,omitempty"`
}

// SweepEntry is one static candidate of the sweep.
type SweepEntry struct {
	Setting BatchSetting `json:"setting"`
	// TotalGoodput sums goodput over the sweep loads (skipped loads add 0).
	TotalGoodput float64 `json:"total_goodput_rps"`
	// MeanP99 averages p99 over the measured, unsaturated loads; it breaks
	// ties. Zero means no such load.
	MeanP99 float64      `json:"mean_p99_ms"`
	Points  []BatchPoint `json:"points"`
	Chosen  bool         `json:"chosen,omitempty"`
}

func newSweepEntry(s BatchSetting, pts []BatchPoint) SweepEntry {
	e := SweepEntry{Setting: s, Points: pts}
	n := 0
	for _, p := range pts {
		e.TotalGoodput += p.Goodput
		if !p.Skipped && !p.Saturated && p.Completed > 0 {
			e.MeanP99 += p.P99
			n++
		}
	}
	if n > 0 {
		e.MeanP99 /= float64(n)
	}
	return e
}

// pickBest returns the index of the entry with the highest total goodput;
// within 1% of it, the lower mean p99 wins, because a 1% goodput gap is
// within run-to-run noise while a latency gap is not.
func pickBest(entries []SweepEntry) int {
	top := 0.0
	for _, e := range entries {
		top = max(top, e.TotalGoodput)
	}
	best := -1
	for i, e := range entries {
		if e.TotalGoodput < 0.99*top {
			continue
		}
		if best < 0 || p99Key(e) < p99Key(entries[best]) {
			best = i
		}
	}
	return max(best, 0)
}

// p99Key orders entries by mean p99, an entry without one last.
func p99Key(e SweepEntry) float64 {
	if e.MeanP99 <= 0 {
		return math.Inf(1)
	}
	return e.MeanP99
}

// reportedStatics returns the static configurations to report: best, then
// Triton's default (64, no delay), then a latency-heavy one (32 with the
// longest sweep delay, or 64 when best is that one). Duplicates are merged,
// keeping both roles.
func reportedStatics(best BatchSetting, delays []time.Duration) []BatchSetting {
	longest := 10 * time.Millisecond
	if len(delays) > 0 {
		longest = slices.Max(delays)
	}
	best.Role = RoleBest
	best.Name = "best " + strings.TrimPrefix(best.Name, "static ")
	triton := StaticSetting(64, 0)
	triton.Role, triton.Name = RoleTriton, "triton "+strings.TrimPrefix(triton.Name, "static ")
	heavy := StaticSetting(32, longest)
	if sameStatic(heavy, best) {
		heavy = StaticSetting(64, longest)
	}
	heavy.Role, heavy.Name = RoleLatency, "heavy "+strings.TrimPrefix(heavy.Name, "static ")
	out := []BatchSetting{best}
	for _, s := range []BatchSetting{triton, heavy} {
		if sameStatic(s, best) {
			out[0].Role += ", " + s.Role
			continue
		}
		out = append(out, s)
	}
	return out
}

// Criterion is one pass/fail target of the batching scenario.
type Criterion struct {
	Name string `json:"name"`
	// Value is the measured ratio; meaningful only when Known.
	Value     float64 `json:"value"`
	Known     bool    `json:"known"`
	Op        string  `json:"op"`
	Threshold float64 `json:"threshold"`
	Pass      bool    `json:"pass"`
	Detail    string  `json:"detail"`
}

func (c *Criterion) judge() {
	if !c.Known {
		c.Pass = false
		return
	}
	if c.Op == ">=" {
		c.Pass = c.Value >= c.Threshold
	} else {
		c.Pass = c.Value <= c.Threshold
	}
}

// Result renders "PASS", "FAIL" or "n/a".
func (c Criterion) Result() string {
	switch {
	case !c.Known:
		return "n/a (FAIL)"
	case c.Pass:
		return "PASS"
	default:
		return "FAIL"
	}
}

// BatchingSetup records how the scenario ran.
type BatchingSetup struct {
	Model       string    `json:"model"`
	SLO         string    `json:"slo"`
	Loads       []float64 `json:"loads"`
	Duration    string    `json:"duration"`
	Warmup      string    `json:"warmup"`
	MinRequests int       `json:"min_requests"`
	Timeout     string    `json:"timeout"`
	Conns       int       `json:"conns"`
	NumCPU      int       `json:"num_cpu"`
	Notes       []string  `json:"notes"`
}

// BatchingReport is the outcome of the batching scenario.
type BatchingReport struct {
	Setup    BatchingSetup  `json:"setup"`
	Capacity Capacity       `json:"capacity"`
	Sweep    []SweepEntry   `json:"sweep,omitempty"`
	Configs  []BatchSetting `json:"configs"`
	// Flags holds each configuration's infergate batching flags, by name.
	Flags  map[string]string `json:"flags"`
	Points []BatchPoint      `json:"points"`
	// Criteria are the three targets, computed by Summarise.
	Criteria []Criterion `json:"criteria"`
	// PerConfig summarises each configuration, computed by Summarise.
	PerConfig []ConfigSummary `json:"per_config"`
}

// ConfigSummary is one configuration's best figures over the loads.
type ConfigSummary struct {
	Config string `json:"config"`
	// MaxGoodput is the highest goodput, at load MaxGoodputLoad.
	MaxGoodput     float64 `json:"max_goodput_rps"`
	MaxGoodputLoad float64 `json:"max_goodput_load"`
	// MaxWithinSLO is the highest throughput of a point whose p99 itself
	// is within the SLO (the strict reading of "throughput within the
	// SLO"), at load MaxWithinSLOLoad; zero when no point qualifies.
	MaxWithinSLO     float64 `json:"max_throughput_p99_within_slo_rps"`
	MaxWithinSLOLoad float64 `json:"max_throughput_p99_within_slo_load"`
}

func newBatchingReport(cfg BatchingConfig) *BatchingReport {
	return &BatchingReport{Setup: BatchingSetup{
		Model: cfg.Model, SLO: cfg.SLO.String(), Loads: cfg.Loads,
		Duration: cfg.Duration.String(), Warmup: cfg.Warmup.String(), MinRequests: cfg.MinRequests,
		Timeout: cfg.Timeout.String(), Conns: cfg.Conns, NumCPU: runtime.NumCPU(),
		Notes: []string{
			"Open-loop Poisson arrivals, the same seeded schedule for every configuration; latency from each request's intended send time.",
			"Goodput: completed requests within the SLO per second. A configuration stops after two loads in a row with goodput under half the offered rate; later loads are marked skipped and count as 0.",
			"Every configuration runs with a fresh simserver and a fresh infergate. simserver draws an execution's long tail from its seed and the execution's first row, so every configuration meets the same slow executions for the same requests, batched or not: the comparison is paired.",
			"Load generator, infergate and simserver share this machine's CPUs.",
		},
	}}
}

// point returns the point of config at load, or nil.
func (r *BatchingReport) point(config string, ld float64) *BatchPoint {
	for i := range r.Points {
		if p := &r.Points[i]; p.Config == config && p.Load == ld {
			return p
		}
	}
	return nil
}

// loads returns the distinct loads of the points, ascending.
func (r *BatchingReport) loads() []float64 {
	var out []float64
	for _, p := range r.Points {
		if !slices.Contains(out, p.Load) {
			out = append(out, p.Load)
		}
	}
	slices.Sort(out)
	return out
}

// configByRole returns the first configuration with the role, or false.
func (r *BatchingReport) configByRole(role string) (BatchSetting, bool) {
	for _, c := range r.Configs {
		if c.Role == role {
			return c, true
		}
	}
	return BatchSetting{}, false
}

// Summarise computes the criteria from the points:
//  1. adaptive's best goodput / unbatched capacity >= 8;
//  2. at every load, adaptive goodput >= 0.95 × the best static goodput;
//  3. at the lowest load (10%), adaptive p99 <= 1.1 × batching-off p99;
//  4. at 8x, the strict p99 of adaptive's successful calls <= the SLO;
//  5. adaptive's best throughput among points whose strict p99 is within
//     the SLO >= 0.75 × the physical limit.
func (r *BatchingReport) Summarise() {
	ad, hasAd := r.configByRole(RoleAdaptive)
	off, hasOff := r.configByRole(RoleOff)

	c1 := Criterion{Name: "adaptive max goodput / unbatched max throughput", Op: ">=", Threshold: 8}
	if hasAd && r.Capacity.Throughput > 0 {
		var best *BatchPoint
		for i := range r.Points {
			if p := &r.Points[i]; p.Config == ad.Name && (best == nil || p.Goodput > best.Goodput) {
				best = p
			}
		}
		if best != nil {
			c1.Known, c1.Value = true, best.Goodput/r.Capacity.Throughput
			c1.Detail = fmt.Sprintf("adaptive %s rps within SLO at load %gx; unbatched max %s rps (closed loop c=%d)",
				report.Rate(best.Goodput), best.Load, report.Rate(r.Capacity.Throughput), r.Capacity.Concurrency)
		}
	}

	c2 := Criterion{Name: "min over loads of adaptive goodput / best static goodput", Op: ">=", Threshold: 0.95}
	if hasAd {
		worst := math.Inf(1)
		for _, ld := range r.loads() {
			var sBest *BatchPoint
			for _, c := range r.Configs {
				if c.Mode != BatchStatic {
					continue
				}
				if p := r.point(c.Name, ld); p != nil && (sBest == nil || p.Goodput > sBest.Goodput) {
					sBest = p
				}
			}
			if sBest == nil || sBest.Goodput <= 0 {
				continue
			}
			a := r.point(ad.Name, ld)
			got := 0.0
			if a != nil {
				got = a.Goodput
			}
			if ratio := got / sBest.Goodput; ratio < worst {
				worst = ratio
				c2.Detail = fmt.Sprintf("worst at load %gx: adaptive %s rps vs %s %s rps", ld, report.Rate(got), sBest.Config, report.Rate(sBest.Goodput))
			}
		}
		if !math.IsInf(worst, 1) {
			c2.Known, c2.Value = true, worst
		}
	}

	c3 := Criterion{Name: "adaptive p99 / batching-off p99 at the lowest load", Op: "<=", Threshold: 1.1}
	if lds := r.loads(); hasAd && hasOff && len(lds) > 0 {
		a, o := r.point(ad.Name, lds[0]), r.point(off.Name, lds[0])
		if a != nil && o != nil && a.Completed > 0 && o.Completed > 0 && o.P99 > 0 {
			c3.Known, c3.Value = true, a.P99/o.P99
			c3.Detail = fmt.Sprintf("at load %gx (%s/s): adaptive p99 %s ms, off p99 %s ms; p50 %s vs %s ms",
				lds[0], report.Rate(o.Offered), report.Ms(a.P99), report.Ms(o.P99), report.Ms(a.P50), report.Ms(o.P50))
		}
	}
	c4, c5 := r.strictCriteria(ad, hasAd)
	r.Criteria = []Criterion{c1, c2, c3, c4, c5}
	r.PerConfig = r.perConfig()
	r.Flags = make(map[string]string, len(r.Configs))
	for _, c := range r.Configs {
		r.Flags[c.Name] = strings.Join(c.Args(r.Setup.Model), " ")
	}
	for i := range r.Criteria {
		r.Criteria[i].judge()
	}
}

// perConfig computes each configuration's ConfigSummary.
func (r *BatchingReport) perConfig() []ConfigSummary {
	slo, _ := time.ParseDuration(r.Setup.SLO)
	sloMs := float64(slo) / float64(time.Millisecond)
	var out []ConfigSummary
	for _, c := range r.Configs {
		cs := ConfigSummary{Config: c.Name}
		for _, p := range r.Points {
			if p.Config != c.Name || p.Skipped {
				continue
			}
			if p.Goodput > cs.MaxGoodput {
				cs.MaxGoodput, cs.MaxGoodputLoad = p.Goodput, p.Load
			}
			if p.Completed > 0 && p.Failed == 0 && p.P99 <= sloMs && p.Throughput > cs.MaxWithinSLO {
				cs.MaxWithinSLO, cs.MaxWithinSLOLoad = p.Throughput, p.Load
			}
		}
		out = append(out, cs)
	}
	return out
}

// strictLoad is the load at which criterion 4 reads the strict p99.
const strictLoad = 8

// strictCriteria are criteria 4 and 5, the strict reading of the SLO:
// the p99 of adaptive's successful calls at 8x against the SLO, and its
// best throughput at a point whose p99 is within the SLO against the
// physical limit.
func (r *BatchingReport) strictCriteria(ad BatchSetting, hasAd bool) (Criterion, Criterion) {
	sloMs := r.sloMs()
	c4 := Criterion{Name: fmt.Sprintf("adaptive strict p99 of successful calls at %dx / SLO", strictLoad), Op: "<=", Threshold: 1}
	c5 := Criterion{Name: "adaptive max throughput with strict p99 <= SLO / physical limit", Op: ">=", Threshold: 0.75}
	if !hasAd {
		return c4, c5
	}
	if p := r.point(ad.Name, strictLoad); p != nil && !p.Skipped && p.Completed > 0 && sloMs > 0 {
		c4.Known, c4.Value = true, p.P99/sloMs
		c4.Detail = fmt.Sprintf("at %dx (%s/s offered): p99 %s ms of %d successful calls, SLO %s ms; %d failed (%.1f%%): %s",
			strictLoad, report.Rate(p.Offered), report.Ms(p.P99), p.Completed, report.Ms(sloMs), p.Failed,
			100*float64(p.Failed)/float64(max(p.Completed+p.Failed, 1)), errorList(p.Errors))
	}
	if lim := r.Capacity.PhysicalLimit; lim > 0 {
		var best *BatchPoint
		for i := range r.Points {
			p := &r.Points[i]
			if p.Config == ad.Name && !p.Skipped && p.Completed > 0 && p.P99 <= sloMs && (best == nil || p.Throughput > best.Throughput) {
				best = p
			}
		}
		c5.Known = true
		c5.Detail = fmt.Sprintf("physical limit %s rows/s (batches of %d straight to the model server); no adaptive point had p99 within the SLO",
			report.Rate(lim), r.Capacity.PhysicalBatch)
		if best != nil {
			c5.Value = best.Throughput / lim
			c5.Detail = fmt.Sprintf("adaptive %s rps at load %gx (p99 %s ms); physical limit %s rows/s (batches of %d straight to the model server)",
				report.Rate(best.Throughput), best.Load, report.Ms(best.P99), report.Rate(lim), r.Capacity.PhysicalBatch)
		}
	}
	return c4, c5
}

// sloMs is the setup's SLO in milliseconds.
func (r *BatchingReport) sloMs() float64 {
	slo, _ := time.ParseDuration(r.Setup.SLO)
	return float64(slo) / float64(time.Millisecond)
}

// errorList renders error counts as "Code=n, ..." in code order, "-" for none.
func errorList(errs map[string]int64) string {
	if len(errs) == 0 {
		return "-"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(errs)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, errs[k]))
	}
	return strings.Join(parts, ", ")
}
