package report_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/infergate/infergate/bench/load"
	"github.com/infergate/infergate/bench/report"
)

func TestTableMarkdown(t *testing.T) {
	tab := report.Table{
		Title:  "demo",
		Header: []string{"path", "rps", "p99 ms"},
		Rows: [][]string{
			{"direct", "12000", "0.412"},
			{"a|b", "9"},
		},
		Notes: []string{"note one"},
	}
	want := `### demo

| path   |   rps | p99 ms |
| ------ | ----: | -----: |
| direct | 12000 |  0.412 |
| a\|b   |     9 |        |

note one
`
	if got := tab.Markdown(); got != want {
		t.Errorf("Markdown() =\n%s\nwant\n%s", got, want)
	}
}

func sample() []*load.Result {
	return []*load.Result{
		{
			Label: "direct", Mode: load.Closed, Concurrency: 8, Completed: 1000, Throughput: 2000.4,
			Latency: load.Latency{P50: 0.5, P90: 1.25, P99: 3.5, P999: 12.34, Max: 150, Mean: 0.75},
			Errors:  map[string]int64{"Unavailable": 3, "DeadlineExceeded": 1}, Failed: 4,
		},
		{
			Label: "nginx", Mode: load.Open, Rate: 1000, Arrival: "poisson", Completed: 500, Throughput: 999.6,
			Latency: load.Latency{P50: 0.6, P90: 1, P99: 2, P999: 3, Max: 4, Mean: 0.7}, Late: 2, Dropped: 1,
		},
	}
}

func TestLoadTable(t *testing.T) {
	want := `### load

| run    | mode   | load           |   ok |  rps | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | mean ms |                           errors | late/dropped |
| ------ | ------ | -------------- | ---: | ---: | -----: | -----: | -----: | -------: | -----: | ------: | -------------------------------: | -----------: |
| direct | closed | c=8            | 1000 | 2000 |  0.500 |   1.25 |   3.50 |     12.3 |    150 |   0.750 | DeadlineExceeded=1 Unavailable=3 |          0/0 |
| nginx  | open   | 1000/s poisson |  500 | 1000 |  0.600 |   1.00 |   2.00 |     3.00 |   4.00 |   0.700 |                                - |          2/1 |

Open-loop latencies are measured from each request's intended send time.
`
	if got := report.LoadTable("load", sample()).Markdown(); got != want {
		t.Errorf("LoadTable =\n%s\nwant\n%s", got, want)
	}
}

func TestLoadSpec(t *testing.T) {
	r := sample()
	if got := report.LoadSpec(r[0]); got != "c=8" {
		t.Errorf("LoadSpec(closed) = %q", got)
	}
	if got := report.LoadSpec(r[1]); got != "1000/s poisson" {
		t.Errorf("LoadSpec(open) = %q", got)
	}
}

func TestWriteJSON(t *testing.T) {
	var buf bytes.Buffer
	if err := report.WriteJSON(&buf, sample()[0]); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	lat, _ := m["latency_ms"].(map[string]any)
	if m["mode"] != "closed" || m["throughput_rps"] != 2000.4 || lat["p99"] != 3.5 || lat["p999"] != 12.34 {
		t.Errorf("json = %s", buf.String())
	}
	if errs, _ := m["errors"].(map[string]any); errs["Unavailable"] != float64(3) {
		t.Errorf("errors = %v", m["errors"])
	}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := report.WriteJSONFile(path, sample()); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(data, []byte("[\n  {")) {
		t.Errorf("file = %q, %v", data, err)
	}
}

func TestFormat(t *testing.T) {
	cases := []struct{ got, want string }{
		{report.Ms(0.0514), "0.051"},
		{report.Ms(3.256), "3.26"},
		{report.Ms(42.25), "42.2"},
		{report.Ms(1530.2), "1530"},
		{report.SignedMs(0.05), "+0.050"},
		{report.SignedMs(-0.05), "-0.050"},
		{report.Ratio(0.8749), "0.87x"},
		{report.Rate(999.6), "1000"},
		{report.Counts(nil), "-"},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// TestStreamTable: a stream run gets three rows (a result read back from
// JSON has no histograms: its counts show "-"); others none.
func TestStreamTable(t *testing.T) {
	if report.StreamTable("x", []*load.Result{{Label: "unary"}}) != nil {
		t.Error("a table for runs without streams")
	}
	var r load.Result
	if err := json.Unmarshal([]byte(`{"label":"llm","stream":{"first_response_ms":{"p50":21.5,"max":30},
		"response_gap_ms":{"p50":5.5},"responses_per_request":{"p50":16,"max":16,"mean":16}}}`), &r); err != nil {
		t.Fatal(err)
	}
	tab := report.StreamTable("per request", []*load.Result{&r})
	if tab == nil || len(tab.Rows) != 3 {
		t.Fatalf("table %+v", tab)
	}
	if got := tab.Rows[2]; got[1] != "responses" || got[2] != "-" || got[3] != "16" || got[8] != "16.0" {
		t.Errorf("responses row %q", got)
	}
}
