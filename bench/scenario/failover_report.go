package scenario

import (
	"encoding/csv"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/infergate/infergate/bench/report"
)

// Fault kinds, in the order the scenario injects them.
const (
	FaultHang     = "hang"
	FaultErrors   = "errors"
	FaultSlowdown = "slowdown"
	FaultDrop     = "drop"
	FaultKill     = "kill"
)

// Targets of the failover scenario.
const (
	// FailoverHangTarget: after a hang, >= 99% of calls on the fallback within.
	FailoverHangTarget = time.Second
	// FailoverReturnTarget: after each heal, >= 99% of calls back on the
	// primary (and staying) within.
	FailoverReturnTarget = 10 * time.Second
	// FailoverFailedTarget: at most this share of all calls of the run fail.
	FailoverFailedTarget = 0.001
	// FailoverFlipsTarget: at most this many extra flips per fault (majority
	// route changes beyond a clean fault's two).
	FailoverFlipsTarget = 1
)

// FailoverFaultRow is one fault of the report.
type FailoverFaultRow struct {
	FailoverWindow
	FailoverFaultStats
	// ProxyChanges is the increase of infergate_route_changes_total (all
	// series summed) from the injection to the end of the recovery; nil
	// when infergate does not export it.
	ProxyChanges *float64 `json:"proxy_route_changes"`
	// Target lists the targets that apply; Verdict is PASS when all hold.
	Target  string `json:"target"`
	Verdict string `json:"verdict"`
}

// FailoverSummary covers every call of the run.
type FailoverSummary struct {
	// Sent counts calls sent; Outcomes counts them by outcome
	// (OutcomeOKPrimary, OutcomeOKFallback, gRPC code names).
	Sent     int64            `json:"sent"`
	Outcomes map[string]int64 `json:"outcomes"`
	Failed   int64            `json:"failed"`
	// FailedShare is Failed / Sent.
	FailedShare float64 `json:"failed_share"`
	// Accounted is true when sent = the sum of the outcomes and every OK
	// call has a route; AccountError says what is wrong otherwise.
	Accounted    bool   `json:"accounted"`
	AccountError string `json:"account_error,omitempty"`
	// P99 is over every call of the run (ms).
	P99     float64 `json:"p99_ms"`
	Target  string  `json:"target"`
	Verdict string  `json:"verdict"`
}

// FailoverReport is the outcome of RunFailover.
type FailoverReport struct {
	Model         string   `json:"model"`
	FallbackModel string   `json:"fallback_model"`
	Rate          float64  `json:"rate"`
	Timeout       float64  `json:"timeout_s"`
	FaultTime     float64  `json:"fault_s"`
	Recovery      float64  `json:"recovery_s"`
	Lead          float64  `json:"lead_s"`
	Duration      float64  `json:"duration_s"`
	Mode          string   `json:"mode"` // "config" (YAML upstreams) or "flags"
	InfergateArgs []string `json:"infergate_args"`
	ConfigYAML    string   `json:"config_yaml,omitempty"`
	// RouteHeaderSeen counts OK calls whose route came from the
	// x-infergate-route header (the rest from the response's model_name).
	RouteHeaderSeen int64 `json:"route_header_seen"`
	// ProxyCounter says whether infergate exported infergate_route_changes_total.
	ProxyCounter bool               `json:"proxy_counter"`
	Faults       []FailoverFaultRow `json:"faults"`
	Summary      FailoverSummary    `json:"summary"`
	Seconds      []FailoverSecond   `json:"seconds"`
	Late         int64              `json:"late"`
	Verdict      string             `json:"verdict"`
	Definitions  map[string]string  `json:"definitions"`
	// calls are the run's calls, for WriteCallsCSV.
	calls []FailoverCall
}

// failoverDefinitions documents the columns, in the JSON and under the table.
var failoverDefinitions = map[string]string{
	"bucket":      "calls are grouped by intended send time in 100 ms buckets aligned on the injection (or the heal)",
	"to_fallback": "end of the first bucket after the injection with >= 99% of its calls (failed ones included) answered by the fallback",
	"to_primary":  "end of the first bucket after the heal from which every non-empty bucket to the end of the recovery has >= 99% of its calls answered by the primary",
	"route":       "the x-infergate-route response header (fallback; absent or primary = primary), else the response's model_name",
	"flips": "majority route of a bucket = the route at least 2/3 of its OK calls took (no OK call or a closer split: unchanged); route changes = changes of it " +
		"between consecutive buckets from the injection to the end of the recovery, starting on the primary; a clean fault has exactly 2 " +
		"(over and back); extra flips = changes - 2 (at least 0)",
	"p99": "over every call intended during the fault (injection to heal), failed ones at their latency, from intended send times",
}

// newFailoverReport analyses a run: the calls, how many were sent, the
// fault windows and the proxy counter's deltas by fault kind (nil entries
// or a nil map: not exported). It is pure; RunFailover fills the header.
func newFailoverReport(base FailoverReport, sent int64, calls []FailoverCall, windows []FailoverWindow, deltas map[string]*float64) *FailoverReport {
	r := base
	r.calls = calls
	r.Definitions = failoverDefinitions
	r.Seconds = failoverSeconds(calls)
	outcomes, err := failoverAccount(sent, calls)
	sum := FailoverSummary{Sent: sent, Outcomes: outcomes, Accounted: err == nil}
	if err != nil {
		sum.AccountError = err.Error()
	}
	lat := make([]float64, 0, len(calls))
	for _, c := range calls {
		if c.Code != codes.OK {
			sum.Failed++
		}
		lat = append(lat, c.Latency)
	}
	sum.P99 = zeroIfNaN(quantile(lat, 0.99))
	// Unaccounted calls count as failed: a call with no outcome was lost.
	if lost := sent - int64(len(calls)); lost > 0 {
		sum.Failed += lost
	}
	if sent > 0 {
		sum.FailedShare = float64(sum.Failed) / float64(sent)
	}
	sum.Target = fmt.Sprintf("failed <= %g%% of all calls; sent = sum of outcomes", FailoverFailedTarget*100)
	sum.Verdict = SoakPass
	if !sum.Accounted || sum.FailedShare > FailoverFailedTarget || sent == 0 {
		sum.Verdict = SoakFail
	}
	r.Summary = sum
	r.Verdict = sum.Verdict
	r.Faults = nil
	for _, w := range windows {
		row := FailoverFaultRow{FailoverWindow: w, FailoverFaultStats: analyzeFault(calls, w)}
		if d := deltas[w.Kind]; d != nil {
			row.ProxyChanges = d
			r.ProxyCounter = true
		}
		judgeFault(&row)
		if row.Verdict == SoakFail {
			r.Verdict = SoakFail
		}
		r.Faults = append(r.Faults, row)
	}
	return &r
}

// judgeFault sets the row's targets and verdict.
func judgeFault(row *FailoverFaultRow) {
	var targets []string
	pass := true
	if row.Kind == FaultHang {
		targets = append(targets, fmt.Sprintf(">= 99%% on fallback <= %s", FailoverHangTarget))
		pass = pass && row.ToFallback >= 0 && row.ToFallback <= FailoverHangTarget.Seconds()+1e-9
	}
	targets = append(targets, fmt.Sprintf("back <= %s", FailoverReturnTarget),
		fmt.Sprintf("extra flips <= %d", FailoverFlipsTarget))
	pass = pass && row.ToPrimary >= 0 && row.ToPrimary <= FailoverReturnTarget.Seconds()+1e-9
	pass = pass && row.ExtraFlips <= FailoverFlipsTarget
	row.Target = strings.Join(targets, "; ")
	row.Verdict = SoakFail
	if pass {
		row.Verdict = SoakPass
	}
}

// secondsCell prints a delay in seconds ("0.3s"), or "never" when negative.
func secondsCell(s float64) string {
	if s < 0 {
		return "never"
	}
	return fmt.Sprintf("%.1fs", s)
}

func sharePct(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.2f%%", 100*v)
}

// Table returns one row per fault and the summary row.
func (r *FailoverReport) Table() report.Table {
	t := report.Table{
		Header: []string{"fault", "injected at", "to fallback", "on fallback", "failed / calls (fault+recovery)", "p99 ms (fault)",
			"back on primary", "route changes (extra flips)", "proxy route changes", "target", "verdict"},
		LeftCols: 2,
	}
	for _, f := range r.Faults {
		proxy := "-"
		if f.ProxyChanges != nil {
			proxy = fmt.Sprintf("%.0f", *f.ProxyChanges)
		}
		failed := fmt.Sprintf("%d / %d", f.Failed, f.Calls)
		if len(f.Errors) > 0 {
			failed += " (" + report.Counts(f.Errors) + ")"
		}
		t.Rows = append(t.Rows, []string{
			fmt.Sprintf("%s: %s", f.Kind, f.What), fmtAt(secs(f.Injected)),
			secondsCell(f.ToFallback), sharePct(f.FallbackShare), failed, report.Ms(f.P99),
			secondsCell(f.ToPrimary), fmt.Sprintf("%d (%d)", f.Changes, f.ExtraFlips), proxy, f.Target, f.Verdict,
		})
	}
	s := r.Summary
	t.Rows = append(t.Rows, []string{
		"whole sequence", fmt.Sprintf("0s - %s", fmtAt(secs(r.Duration))), "-", "-",
		fmt.Sprintf("%d / %d (%s)", s.Failed, s.Sent, sharePct(s.FailedShare)), report.Ms(s.P99) + " (all)",
		"-", "-", "-", s.Target, s.Verdict,
	})
	return t
}

// Markdown renders the report.
func (r *FailoverReport) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Failover: %s on the primary, fallback %s on the edge, %s calls/s\n\n", r.Model, r.FallbackModel, report.Rate(r.Rate))
	fmt.Fprintf(&b, "Open-loop KServe ModelInfer at %s calls/s through infergate (%s), every call with a %s deadline, latency from "+
		"intended send times. Each fault is held %s on the primary, then healed, then %s of recovery; %s of steady load first.\n\n",
		report.Rate(r.Rate), r.modeText(), fmtAt(secs(r.Timeout)), fmtAt(secs(r.FaultTime)), fmtAt(secs(r.Recovery)), fmtAt(secs(r.Lead)))
	b.WriteString(r.Table().Markdown())
	b.WriteString("\n")
	for _, k := range []string{"bucket", "route", "to_fallback", "to_primary", "flips", "p99"} {
		fmt.Fprintf(&b, "- %s: %s.\n", k, r.Definitions[k])
	}
	if !r.ProxyCounter {
		b.WriteString("- proxy route changes: infergate exported no infergate_route_changes_total.\n")
	}
	s := r.Summary
	fmt.Fprintf(&b, "\nCalls: %d sent = %s", s.Sent, report.Counts(s.Outcomes))
	if s.Accounted {
		b.WriteString(" (every call accounted for)")
	} else {
		b.WriteString(" (NOT ACCOUNTED: " + s.AccountError + ")")
	}
	fmt.Fprintf(&b, "; route from the header for %d OK calls, from model_name for the rest.\n", r.RouteHeaderSeen)
	if r.Late > 0 {
		fmt.Fprintf(&b, "%d calls waited for an in-flight slot.\n", r.Late)
	}
	fmt.Fprintf(&b, "\nVerdict: %s\n", r.Verdict)
	return b.String()
}

func (r *FailoverReport) modeText() string {
	if r.Mode == FailoverModeFlags {
		return "--upstream/--fallback flags"
	}
	return "YAML upstreams, breaker and route"
}

// Panels plots the p99 per second and the share of calls on the fallback
// per second over the run, the faults shaded.
func (r *FailoverReport) Panels() []report.Panel {
	var x, p99, share []float64
	for _, s := range r.Seconds {
		x, p99, share = append(x, s.At), append(p99, s.P99), append(share, s.FallbackShare)
	}
	var spans []report.Span
	for _, w := range r.Faults {
		spans = append(spans, report.Span{From: w.Injected, To: w.Healed})
	}
	deadline := []float64{r.Timeout * 1000, r.Timeout * 1000}
	var ends []float64
	if len(x) > 0 {
		ends = []float64{x[0], x[len(x)-1]}
	}
	return []report.Panel{
		{Title: "p99 latency per second, all calls (faults shaded: hang, errors, slowdown, drop, kill)", XLabel: "seconds", YLabel: "ms",
			LogY: true, Headroom: 4, Spans: spans, Series: []report.Series{
				{Name: "p99", X: x, Y: p99},
				{Name: "deadline", X: ends, Y: deadline[:len(ends)], Reference: true},
			}},
		{Title: "share of calls answered by the fallback per second", XLabel: "seconds", YLabel: "share", Spans: spans,
			Headroom: 1.3, Series: []report.Series{
				{Name: "on fallback", X: x, Y: share},
				{Name: "100%", X: ends, Y: []float64{1, 1}[:len(ends)], Reference: true},
			}},
	}
}

// WritePlots writes failover.png and failover.svg into dir.
func (r *FailoverReport) WritePlots(dir string) error {
	for _, ext := range []string{report.FormatPNG, report.FormatSVG} {
		if err := report.WritePlot(filepath.Join(dir, "failover."+ext), r.Panels()); err != nil {
			return err
		}
	}
	return nil
}

// WriteCallsCSV writes every call of the run to path, one a line:
// intended send time (s since the load started), latency (ms), outcome.
func (r *FailoverReport) WriteCallsCSV(path string) error {
	var b strings.Builder
	w := csv.NewWriter(&b)
	_ = w.Write([]string{"t_s", "latency_ms", "outcome"})
	for _, c := range r.calls {
		_ = w.Write([]string{strconv.FormatFloat(c.At, 'f', 4, 64), strconv.FormatFloat(c.Latency, 'f', 3, 64), c.Outcome()})
	}
	w.Flush()
	return report.WriteFile(path, []byte(b.String()))
}
