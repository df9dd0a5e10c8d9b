package scenario

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/infergate/infergate/bench/report"
)

// SoakSample is infergate's state at one moment of the soak and the calls
// of the interval that ended then.
type SoakSample struct {
	// At is the time since the load started, in seconds; the first sample
	// (0) is taken just before it.
	At float64 `json:"t_s"`
	// RSSBytes is VmRSS from /proc/<pid>/status.
	RSSBytes int64 `json:"rss_bytes"`
	// Goroutines is go_goroutines from infergate's /metrics.
	Goroutines int `json:"goroutines"`
	// MetricsBytes is the size of the /metrics body (text format), and
	// MetricsSamples its sample lines.
	MetricsBytes   int `json:"metrics_bytes"`
	MetricsSamples int `json:"metrics_samples"`
	// ScrapeMs is the time to fetch /metrics, body included.
	ScrapeMs float64 `json:"scrape_ms"`
	// Sent counts calls started in the interval; OK and Failed the calls
	// that finished in it, Errors the failures by gRPC code name.
	Sent   int64            `json:"sent"`
	OK     int64            `json:"ok"`
	Failed int64            `json:"failed"`
	Errors map[string]int64 `json:"errors,omitempty"`
	// P50 and P99 are latencies of the interval's successful calls in ms,
	// measured from their intended send times; zero when none succeeded.
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
}

// at returns the sample's time as a duration.
func (s SoakSample) at() time.Duration {
	return time.Duration(s.At * float64(time.Second))
}

// progress is the one-line summary printed as each sample is taken.
func (s SoakSample) progress() string {
	return fmt.Sprintf("t=%s rss=%s goroutines=%d metrics=%s scrape=%sms sent=%d ok=%d failed=%d p50=%s p99=%s",
		fmtAt(s.at()), fmtMiB(s.RSSBytes), s.Goroutines, fmtKiB(s.MetricsBytes), report.Ms(s.ScrapeMs),
		s.Sent, s.OK, s.Failed, latencyCell(s.OK, s.P50), latencyCell(s.OK, s.P99))
}

// SoakCheck compares one quantity between the baseline and the last sample.
type SoakCheck struct {
	Quantity   string  `json:"quantity"`
	BaselineAt float64 `json:"baseline_t_s"`
	Baseline   float64 `json:"baseline"`
	LastAt     float64 `json:"last_t_s"`
	Last       float64 `json:"last"`
	// Change is (Last − Baseline) / Baseline.
	Change float64 `json:"change"`
	Pass   bool    `json:"pass"`
}

// Soak verdicts.
const (
	SoakPass = "PASS"
	SoakFail = "FAIL"
	// SoakNone means the run had no sample after the baseline to compare.
	SoakNone = "n/a"
)

// SoakReport is the outcome of RunSoak.
type SoakReport struct {
	Rate          float64  `json:"rate"`
	Arrival       string   `json:"arrival"`
	Duration      float64  `json:"duration_s"`
	Sample        float64  `json:"sample_s"`
	Baseline      float64  `json:"baseline_s"`
	Tolerance     float64  `json:"tolerance"`
	Mix           string   `json:"mix"`
	InfergateArgs []string `json:"infergate_args,omitempty"`

	Samples []SoakSample `json:"samples"`
	// Late counts calls that waited for an in-flight slot; Dropped those
	// never sent because the run was stopped.
	Late    int64 `json:"late"`
	Dropped int64 `json:"dropped"`

	Checks  []SoakCheck `json:"checks,omitempty"`
	Verdict string      `json:"verdict"`
	// VerdictLine says the verdict with the numbers.
	VerdictLine string `json:"verdict_line"`
}

func newSoakReport(cfg SoakConfig) *SoakReport {
	return &SoakReport{
		Rate: cfg.Rate, Arrival: cfg.Arrival.String(), Duration: cfg.Duration.Seconds(), Sample: cfg.Sample.Seconds(),
		Baseline: cfg.Baseline.Seconds(), Tolerance: cfg.Tolerance, Mix: soakMixText(cfg),
		InfergateArgs: cfg.InfergateArgs,
	}
}

// soakMixText describes the call mix in one line.
func soakMixText(cfg SoakConfig) string {
	rest := 1 - cfg.JunkFraction - cfg.StreamFraction
	parts := make([]string, 0, 6)
	for _, w := range soakWeights {
		proto := "KServe ModelInfer"
		if w.kind == SoakHalfPlusTwo {
			proto = "TF Predict"
		}
		parts = append(parts, fmt.Sprintf("%s %s %s", pct(rest*w.weight), proto, w.kind))
	}
	parts = append(parts,
		fmt.Sprintf("%s ModelStreamInfer simple (%d messages)", pct(cfg.StreamFraction), cfg.StreamMessages),
		fmt.Sprintf("%s junk model names (each new)", pct(cfg.JunkFraction)))
	return strings.Join(parts, ", ") + fmt.Sprintf("; %s of model calls with a %s..%s deadline, the rest %s",
		pct(cfg.ShortFraction), cfg.ShortMin, cfg.ShortMax, cfg.Timeout)
}

func pct(f float64) string {
	return strconv.FormatFloat(math.Round(f*1000)/10, 'f', -1, 64) + "%"
}

// Judge compares RSS and goroutines between the first sample at or after
// Baseline and the last sample, and sets Checks, Verdict and VerdictLine.
func (r *SoakReport) Judge() {
	r.Checks = nil
	base := -1
	for i, s := range r.Samples {
		if s.At >= r.Baseline {
			base = i
			break
		}
	}
	last := len(r.Samples) - 1
	if base < 0 || base >= last {
		r.Verdict = SoakNone
		r.VerdictLine = fmt.Sprintf("Verdict: %s: no sample after the baseline at %s to compare (run longer than -baseline + -sample)",
			SoakNone, fmtAt(secs(r.Baseline)))
		return
	}
	b, l := r.Samples[base], r.Samples[last]
	check := func(q string, bv, lv float64) SoakCheck {
		c := SoakCheck{Quantity: q, BaselineAt: b.At, Baseline: bv, LastAt: l.At, Last: lv}
		if bv > 0 {
			c.Change = (lv - bv) / bv
		} else if lv > 0 {
			c.Change = math.Inf(1)
		}
		c.Pass = math.Abs(c.Change) <= r.Tolerance+1e-9
		return c
	}
	r.Checks = []SoakCheck{
		check("RSS", float64(b.RSSBytes), float64(l.RSSBytes)),
		check("goroutines", float64(b.Goroutines), float64(l.Goroutines)),
	}
	r.Verdict = SoakPass
	parts := make([]string, len(r.Checks))
	for i, c := range r.Checks {
		word := SoakPass
		if !c.Pass {
			word, r.Verdict = SoakFail, SoakFail
		}
		format := func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
		if c.Quantity == "RSS" {
			format = func(v float64) string { return fmtMiB(int64(v)) + " MiB" }
		}
		parts[i] = fmt.Sprintf("%s %s %s (%s → %s, %s)", c.Quantity, word, format(c.Baseline)+" → "+format(c.Last),
			fmtAt(secs(c.BaselineAt)), fmtAt(secs(c.LastAt)), signedPct(c.Change))
	}
	r.VerdictLine = fmt.Sprintf("Verdict: %s (within ±%s between %s and the end): %s",
		r.Verdict, pct(r.Tolerance), fmtAt(secs(b.At)), strings.Join(parts, "; "))
}

func signedPct(f float64) string {
	if math.IsInf(f, 0) {
		return "+inf%"
	}
	return fmt.Sprintf("%+.1f%%", f*100)
}

// Table returns one row per sample.
func (r *SoakReport) Table() report.Table {
	t := report.Table{
		Header: []string{"t", "RSS MiB", "goroutines", "/metrics KiB", "/metrics lines", "scrape ms",
			"sent", "ok", "failed", "errors", "p50 ms", "p99 ms"},
	}
	for _, s := range r.Samples {
		t.Rows = append(t.Rows, []string{
			fmtAt(s.at()), fmtMiB(s.RSSBytes), strconv.Itoa(s.Goroutines), fmtKiB(s.MetricsBytes),
			strconv.Itoa(s.MetricsSamples), report.Ms(s.ScrapeMs),
			strconv.FormatInt(s.Sent, 10), strconv.FormatInt(s.OK, 10), strconv.FormatInt(s.Failed, 10),
			report.Counts(s.Errors), latencyCell(s.OK, s.P50), latencyCell(s.OK, s.P99),
		})
	}
	return t
}

// Markdown renders the report: what ran, the sample table and the verdict.
func (r *SoakReport) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Soak: %s req/s (%s) for %s, a sample every %s\n\n",
		report.Rate(r.Rate), r.Arrival, fmtAt(secs(r.Duration)), fmtAt(secs(r.Sample)))
	fmt.Fprintf(&b, "Mix: %s.\n", r.Mix)
	if len(r.InfergateArgs) > 0 {
		fmt.Fprintf(&b, "infergate args: `%s`.\n", strings.Join(r.InfergateArgs, " "))
	}
	b.WriteString("Each row: infergate's state at t and the calls of the interval ending at t " +
		"(latencies of successful calls, from their intended send times).\n\n")
	b.WriteString(r.Table().Markdown())
	if r.Late > 0 || r.Dropped > 0 {
		fmt.Fprintf(&b, "\n%d calls waited for an in-flight slot (late), %d never sent (dropped).\n", r.Late, r.Dropped)
	}
	b.WriteString("\n" + r.VerdictLine + "\n")
	return b.String()
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// fmtAt prints a duration rounded to the second ("2m30s"), or to the
// millisecond below a second.
func fmtAt(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func fmtMiB(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }

func fmtKiB(b int) string { return fmt.Sprintf("%.1f", float64(b)/(1<<10)) }

func latencyCell(ok int64, v float64) string {
	if ok == 0 {
		return "-"
	}
	return report.Ms(v)
}
