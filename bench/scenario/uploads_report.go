package scenario

import (
	"fmt"
	"math"
	"runtime"
	"strings"

	"github.com/infergate/infergate/bench/load"
	"github.com/infergate/infergate/bench/report"
)

// UploadsRSS is a proxy's memory during one run, in bytes.
type UploadsRSS struct {
	// Method says what PeakBytes is: RSSHWM or RSSSampledWorkers.
	Method string `json:"method"`
	// PeakBytes is the headline: VmHWM for a one-process proxy (never
	// below the sampled peak), the sampled peak of the workers' sum for
	// nginx.
	PeakBytes int64 `json:"peak_bytes"`
	// SampledPeakBytes is the peak of the sampled (summed) VmRSS, the
	// same method on every path.
	SampledPeakBytes int64 `json:"sampled_peak_bytes"`
	// StartBytes is the (summed) VmRSS just before the callers connected.
	StartBytes int64 `json:"start_bytes"`
	// HWMBytes is VmHWM read at the end of the run; zero for nginx.
	HWMBytes int64 `json:"hwm_bytes,omitempty"`
	// HWMSinceStart is set when VmHWM could not be reset, so it is the
	// peak since the process started, earlier runs included.
	HWMSinceStart bool `json:"hwm_since_start,omitempty"`
	// Samples is the number of samples; Processes how many processes the
	// last one summed.
	Samples   int `json:"samples"`
	Processes int `json:"processes"`
}

// UploadsRun is one path's run in one round.
type UploadsRun struct {
	Path   string       `json:"path"`
	Round  int          `json:"round"`
	Result *load.Result `json:"result"`
	// MBps is request bytes of completed calls per second, in 10^6 bytes;
	// the answers carry as many back.
	MBps float64    `json:"request_mb_per_s"`
	RSS  UploadsRSS `json:"rss"`
}

// UploadsPathSummary is one path's figures over the rounds: calls summed,
// the rest as median [min..max]. Latencies in milliseconds, RSS in MiB.
type UploadsPathSummary struct {
	Path      string           `json:"path"`
	OK        int64            `json:"calls_ok"`
	Failed    int64            `json:"calls_failed"`
	Errors    map[string]int64 `json:"errors,omitempty"`
	CallsPerS Spread           `json:"calls_per_s"`
	MBps      Spread           `json:"request_mb_per_s"`
	// VsNginx is this path's calls/s over nginx's, per round.
	VsNginx *Spread `json:"throughput_vs_nginx,omitempty"`
	P50     Spread  `json:"p50_ms"`
	P99     Spread  `json:"p99_ms"`
	// PeakRSS is UploadsRSS.PeakBytes, SampledRSS its SampledPeakBytes,
	// StartRSS its StartBytes, in MiB.
	PeakRSS    Spread `json:"peak_rss_mib"`
	SampledRSS Spread `json:"sampled_peak_rss_mib"`
	StartRSS   Spread `json:"start_rss_mib"`
	RSSMethod  string `json:"rss_method"`
}

// UploadsSetup records how the scenario ran.
type UploadsSetup struct {
	Callers      int    `json:"callers"`
	Conns        int    `json:"conns"`
	RequestBytes int    `json:"request_bytes"`
	TensorBytes  int    `json:"tensor_bytes"`
	Model        string `json:"model"`
	Duration     string `json:"duration"`
	Repeat       int    `json:"repeat"`
	CallTimeout  string `json:"call_timeout"`
	Sample       string `json:"rss_sample_interval"`
	// InfergateStart is infergate's memory limit and buffer budget from
	// its start line.
	InfergateStart string   `json:"infergate_start,omitempty"`
	NumCPU         int      `json:"num_cpu"`
	Paths          []Path   `json:"paths"`
	Notes          []string `json:"notes"`
}

// UploadsReport is the outcome of the uploads scenario.
type UploadsReport struct {
	Setup UploadsSetup         `json:"setup"`
	Paths []UploadsPathSummary `json:"summary"`
	Runs  []UploadsRun         `json:"runs"`
}

func newUploadsReport(cfg UploadsConfig, paths []Path) *UploadsReport {
	r := &UploadsReport{Setup: UploadsSetup{
		Callers: cfg.Callers, Conns: cfg.Callers, TensorBytes: cfg.Bytes, Model: cfg.Model,
		Duration: cfg.Duration.String(), Repeat: cfg.Repeat, CallTimeout: cfg.CallTimeout.String(),
		Sample: cfg.Sample.String(), NumCPU: runtime.NumCPU(), Paths: paths,
		Notes: []string{
			fmt.Sprintf("Each caller has its own connection and sends one %s ModelInfer request at a time (closed loop) to %s, which echoes it; %d callers hold up to %d x the request in flight.", byteSize(cfg.Bytes), cfg.Model, cfg.Callers, cfg.Callers),
			"Rounds are interleaved: each round runs every path once, in the order of the table. Calls in flight when a run's time is up finish and count.",
			"calls ok and failed are summed over the rounds; the other figures are medians [min..max] of the rounds. MB/s: request bytes of completed calls per second (10^6 bytes); as many come back.",
			"The callers, simserver and the proxy share this machine's CPUs; compare paths within one run.",
		},
	}}
	for _, p := range paths {
		if n := uploadsPathNote(cfg, p.Name); n != "" {
			r.Setup.Notes = append(r.Setup.Notes, n)
		}
	}
	if cfg.HAProxySkipped != "" {
		r.Setup.Notes = append(r.Setup.Notes, "haproxy: skipped ("+cfg.HAProxySkipped+"); install it with `apt-get install -y haproxy`.")
	}
	return r
}

// run returns path's run in round, or nil.
func (r *UploadsReport) run(path string, round int) *UploadsRun {
	for i := range r.Runs {
		if r.Runs[i].Path == path && r.Runs[i].Round == round {
			return &r.Runs[i]
		}
	}
	return nil
}

// summarise fills Paths from Runs.
func (r *UploadsReport) summarise() {
	if len(r.Runs) > 0 {
		r.Setup.RequestBytes = r.Runs[0].Result.RequestBytes
	}
	r.Paths = nil
	for _, p := range r.Setup.Paths {
		s := UploadsPathSummary{Path: p.Name}
		var rps, mbps, vs, p50, p99, peak, sampled, start []float64
		for round := 1; round <= r.Setup.Repeat; round++ {
			run := r.run(p.Name, round)
			if run == nil {
				continue
			}
			res := run.Result
			s.OK += res.Completed
			s.Failed += res.Failed
			for code, n := range res.Errors {
				if s.Errors == nil {
					s.Errors = map[string]int64{}
				}
				s.Errors[code] += n
			}
			rps, mbps = append(rps, res.Throughput), append(mbps, run.MBps)
			if ng := r.run(PathNginx, round); ng != nil && ng.Result.Throughput > 0 {
				vs = append(vs, res.Throughput/ng.Result.Throughput)
			}
			if res.Completed > 0 {
				p50, p99 = append(p50, res.Latency.P50), append(p99, res.Latency.P99)
			} else {
				p50, p99 = append(p50, math.NaN()), append(p99, math.NaN())
			}
			peak = append(peak, mib(run.RSS.PeakBytes))
			sampled = append(sampled, mib(run.RSS.SampledPeakBytes))
			start = append(start, mib(run.RSS.StartBytes))
			s.RSSMethod = run.RSS.Method
			if run.RSS.HWMSinceStart {
				s.RSSMethod = run.RSS.Method + " since start"
			}
		}
		s.CallsPerS, s.MBps, s.P50, s.P99 = spreadOf(rps), spreadOf(mbps), spreadOf(p50), spreadOf(p99)
		s.PeakRSS, s.SampledRSS, s.StartRSS = spreadOf(peak), spreadOf(sampled), spreadOf(start)
		if len(vs) > 0 {
			v := spreadOf(vs)
			s.VsNginx = &v
		}
		r.Paths = append(r.Paths, s)
	}
}

// Markdown renders the summary table, then the setup.
func (r *UploadsReport) Markdown() string {
	var b strings.Builder
	s := r.Setup
	rounds := "1 round"
	if s.Repeat > 1 {
		rounds = fmt.Sprintf("%d interleaved rounds, median [min..max]", s.Repeat)
	}
	fmt.Fprintf(&b, "## Big concurrent uploads: %d callers on %d connections, %s requests, %s per run, %s\n\n",
		s.Callers, s.Conns, byteSize(s.RequestBytes), s.Duration, rounds)
	b.WriteString(r.table().Markdown())
	b.WriteString("\n")
	fmt.Fprintf(&b, "Setup: %d CPUs, model %s, request %d bytes, call timeout %s, RSS sampled every %s.\n", s.NumCPU, s.Model, s.RequestBytes, s.CallTimeout, s.Sample)
	if s.InfergateStart != "" {
		b.WriteString("- infergate's start line: " + s.InfergateStart + "\n")
	}
	for _, n := range s.Notes {
		b.WriteString("- " + n + "\n")
	}
	return b.String()
}

func (r *UploadsReport) table() report.Table {
	t := report.Table{
		Title: "per path: calls, throughput, latency (ms) and the proxy's memory (MiB)",
		Header: []string{"path", "calls ok", "failed", "calls/s", "vs nginx", "MB/s", "p50", "p99",
			"peak RSS", "sampled peak", "RSS at start", "peak RSS is"},
		LeftCols: 1,
	}
	mibf := fixed(1)
	for _, p := range r.Paths {
		vs := "-"
		if p.VsNginx != nil && p.Path != PathNginx {
			vs = p.VsNginx.format(report.Ratio)
		}
		failed := fmt.Sprint(p.Failed)
		if len(p.Errors) > 0 {
			failed += " (" + report.Counts(p.Errors) + ")"
		}
		t.Rows = append(t.Rows, []string{p.Path, fmt.Sprint(p.OK), failed,
			p.CallsPerS.format(fixed(1)), vs, p.MBps.format(fixed(0)),
			p.P50.format(report.Ms), p.P99.format(report.Ms),
			p.PeakRSS.format(mibf), p.SampledRSS.format(mibf), p.StartRSS.format(mibf), shortRSSMethod(p.RSSMethod)})
	}
	t.Notes = append(t.Notes, "vs nginx: calls/s over nginx's, per round. peak RSS is: VmHWM, the kernel's peak of the proxy's one process; workers, the peak of its workers' summed VmRSS sampled every "+r.Setup.Sample+". sampled peak: the peak of the (summed) VmRSS sampled every "+r.Setup.Sample+", the same method on every path.")
	return t
}

// shortRSSMethod names a method in the table's last column.
func shortRSSMethod(m string) string {
	switch m {
	case RSSSampledWorkers:
		return "workers"
	case RSSHWM + " since start":
		return "VmHWM since start"
	}
	return m
}

// fixed formats with prec decimals, "-" for no data.
func fixed(prec int) func(float64) string {
	return func(v float64) string {
		if math.IsNaN(v) {
			return "-"
		}
		return fmt.Sprintf("%.*f", prec, v)
	}
}

// byteSize names a byte count: "4 MiB", "1.5 MiB", "512 KiB", "100 B".
func byteSize(n int) string {
	switch {
	case n >= 1<<20:
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", float64(n)/(1<<20)), "0"), ".") + " MiB"
	case n >= 1<<10:
		return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", float64(n)/(1<<10)), "0"), ".") + " KiB"
	}
	return fmt.Sprintf("%d B", n)
}
