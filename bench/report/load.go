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
