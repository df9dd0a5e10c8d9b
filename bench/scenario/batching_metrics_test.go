package scenario

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const batchExposition = `# HELP infergate_batch_size Requests per upstream batch.
# TYPE infergate_batch_size histogram
infergate_batch_size_bucket{model="resnet50",upstream="a",le="1"} 2
infergate_batch_size_bucket{model="resnet50",upstream="a",le="+Inf"} 10
infergate_batch_size_sum{model="resnet50",upstream="a"} 60
infergate_batch_size_count{model="resnet50",upstream="a"} 10
infergate_batch_size_bucket{model="resnet50",upstream="b",le="1"} 0
infergate_batch_size_bucket{model="resnet50",upstream="b",le="+Inf"} 5
infergate_batch_size_sum{model="resnet50",upstream="b"} 40
infergate_batch_size_count{model="resnet50",upstream="b"} 5
infergate_batch_size_bucket{model="mobilenet_v3",upstream="a",le="+Inf"} 7
infergate_batch_size_sum{model="mobilenet_v3",upstream="a"} 700
infergate_batch_size_count{model="mobilenet_v3",upstream="a"} 7
# HELP infergate_batches_total Batches dispatched.
# TYPE infergate_batches_total counter
infergate_batches_total{model="resnet50",upstream="a"} 10
infergate_batches_total{model="resnet50",upstream="b"} 5
infergate_batches_total{model="mobilenet_v3",upstream="a"} 7
# HELP infergate_requests_total Requests.
# TYPE infergate_requests_total counter
infergate_requests_total{model="resnet50"} 100
`

func TestParseBatchCounters(t *testing.T) {
	cases := []struct {
		name, text, model string
		want              BatchCounters
	}{
		{"sums upstreams of the model", batchExposition, "resnet50", BatchCounters{Found: true, Items: 100, Batches: 15, BatchesTotal: 15}},
		{"other model", batchExposition, "mobilenet_v3", BatchCounters{Found: true, Items: 700, Batches: 7, BatchesTotal: 7}},
		{"model without series", batchExposition, "bert", BatchCounters{}},
		{"no batching metrics", "# TYPE up gauge\nup 1\n", "resnet50", BatchCounters{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseBatchCounters(strings.NewReader(tc.text), tc.model)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	if _, err := ParseBatchCounters(strings.NewReader("this is { not prometheus\n"), "resnet50"); err == nil ||
		!strings.HasPrefix(err.Error(), "scenario: parse metrics: ") {
		t.Errorf("bad text: err = %v", err)
	}
}

func TestBatchCountersDelta(t *testing.T) {
	before := BatchCounters{Found: true, Items: 100, Batches: 15, BatchesTotal: 15}
	after := BatchCounters{Found: true, Items: 420, Batches: 55, BatchesTotal: 55}
	d := after.Sub(before)
	if d.Items != 320 || d.Batches != 40 || d.BatchesTotal != 40 || !d.Found {
		t.Errorf("delta = %+v", d)
	}
	if got := d.MeanBatch(); got != 8 {
		t.Errorf("MeanBatch = %g, want 8", got)
	}
	if got := (BatchCounters{}).MeanBatch(); got != 0 {
		t.Errorf("MeanBatch of nothing = %g, want 0", got)
	}
}

func TestScrapeBatchCounters(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte(batchExposition))
	}))
	defer srv.Close()
	admin := strings.TrimPrefix(srv.URL, "http://")
	got, err := ScrapeBatchCounters(t.Context(), admin, "resnet50")
	if err != nil {
		t.Fatal(err)
	}
	if got.Items != 100 || got.Batches != 15 {
		t.Errorf("got %+v", got)
	}

	missing := httptest.NewServer(http.NotFoundHandler())
	defer missing.Close()
	if _, err := ScrapeBatchCounters(t.Context(), strings.TrimPrefix(missing.URL, "http://"), "resnet50"); err == nil ||
		!strings.Contains(err.Error(), "404") {
		t.Errorf("404: err = %v", err)
	}
}
