package report

import (
	"fmt"

	"github.com/infergate/infergate/bench/load"
)

// LoadTable lays out load results one per row: the load applied,
// throughput, latency quantiles in milliseconds, errors by code and the
// open loop's late/dropped counts.
func LoadTable(title string, results []*load.Result) Table {
	t := Table{
		Title:    title,
		Header:   []string{"run", "mode", "load", "ok", "rps", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms", "mean ms", "errors", "late/dropped"},
		LeftCols: 3,
	}
	for _, r := range results {
		label := r.Label
		if label == "" {
			label = r.Model + "@" + r.Target
		}
		t.Rows = append(t.Rows, []string{
			label, string(r.Mode), LoadSpec(r),
			fmt.Sprint(r.Completed), Rate(r.Throughput),
			Ms(r.Latency.P50), Ms(r.Latency.P90), Ms(r.Latency.P99), Ms(r.Latency.P999), Ms(r.Latency.Max), Ms(r.Latency.Mean),
			Counts(r.Errors), fmt.Sprintf("%d/%d", r.Late, r.Dropped),
		})
	}
	for _, r := range results {
		if r.Mode == load.Open {
			t.Notes = append(t.Notes, "Open-loop latencies are measured from each request's intended send time.")
			break
		}
	}
	return t
}

// LoadSpec describes the load of one run: "c=8" or "1000/s fixed".
func LoadSpec(r *load.Result) string {
	if r.Mode == load.Open {
		return fmt.Sprintf("%s/s %s", Rate(r.Rate), r.Arrival)
	}
	return fmt.Sprintf("c=%d", r.Concurrency)
}

// StreamTable is the per-request view of Stream runs (load.Config.Stream):
// for each run, the quantiles of the time to the first response (TTFR),
// of the gaps between responses, and of the responses per request. Runs
// without streams are left out; nil when none is left.
func StreamTable(title string, results []*load.Result) *Table {
	t := Table{
		Title:    title,
		Header:   []string{"run", "per request", "n", "p50", "p90", "p99", "p99.9", "max", "mean"},
		LeftCols: 2,
	}
	for _, r := range results {
		st := r.Stream
		if st == nil {
			continue
		}
		label := r.Label
		if label == "" {
			label = r.Model + "@" + r.Target
		}
		n := func(name string) string {
			if h := st.Histogram(name); h != nil {
				return fmt.Sprint(h.TotalCount())
			}
			return "-" // a result read back from JSON
		}
		for _, row := range []struct {
			name, what string
			l          load.Latency
		}{
			{"first_response", "first response ms", st.FirstResponse},
			{"response_gap", "gap ms", st.ResponseGap},
		} {
			t.Rows = append(t.Rows, []string{label, row.what, n(row.name),
				Ms(row.l.P50), Ms(row.l.P90), Ms(row.l.P99), Ms(row.l.P999), Ms(row.l.Max), Ms(row.l.Mean)})
		}
		c := st.Responses
		t.Rows = append(t.Rows, []string{label, "responses", n("responses"),
			fmt.Sprint(c.P50), fmt.Sprint(c.P90), fmt.Sprint(c.P99), fmt.Sprint(c.P999), fmt.Sprint(c.Max), fmt.Sprintf("%.1f", c.Mean)})
	}
	if len(t.Rows) == 0 {
		return nil
	}
	t.Notes = append(t.Notes, "Measured as infergate measures streams: from each request to its first response, between its responses, and their number.")
	return &t
}
