package monitor

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestSizeClassOf(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{
		{0, SizeClass4KiB}, {4 << 10, SizeClass4KiB}, {4<<10 + 1, SizeClass64KiB}, {64 << 10, SizeClass64KiB},
		{3 * 224 * 224 * 4, SizeClass1MiB}, {1 << 20, SizeClass1MiB}, {1<<20 + 1, SizeClass16MiB},
		{16 << 20, SizeClass16MiB}, {16<<20 + 1, SizeClassOver}, {1 << 40, SizeClassOver},
	} {
		if got := SizeClassOf(c.n); got != c.want {
			t.Errorf("SizeClassOf(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

func TestInputShapeString(t *testing.T) {
	s := InputShape{Name: "INPUT0", Datatype: "FP32", Shape: []int64{8, 3, 224, 224}, Dims: 4}
	if got := s.String(); got != "INPUT0:FP32[8,3,224,224]" {
		t.Errorf("got %q", got)
	}
	s = InputShape{Name: "x", Datatype: "DT_FLOAT", Shape: []int64{1, 2}, Dims: 9}
	if got := s.String(); got != "x:DT_FLOAT[1,2,...]" {
		t.Errorf("got %q", got)
	}
}

// TestSizeClassSeries checks that the size class splits a model's latency
// metrics (so p99 by input size is one query), that the counters keep
// adding up per label set, and that the series cap bounds the classes as
// any other key: past it calls go to the overflow series.
func TestSizeClassSeries(t *testing.T) {
	r, _ := newTestRegistry(t, Options{MaxSeries: 3})
	reg := prometheus.NewPedanticRegistry()
	if err := r.Register(reg); err != nil {
		t.Fatal(err)
	}
	for i, class := range SizeClasses {
		k := testKey
		k.SizeClass = class
		r.Record(k, Sample{Total: time.Duration(i+1) * time.Millisecond, Code: "OK", BytesIn: 10})
	}
	r.Rotate()
	got := exposition(t, reg)
	for _, want := range []string{
		`infergate_request_duration_seconds_count{method="ModelInfer",model="resnet",route="primary",size_class="le_4KiB",upstream="triton",version="1"} 1`,
		`infergate_request_duration_seconds_count{method="ModelInfer",model="resnet",route="primary",size_class="le_64KiB",upstream="triton",version="1"} 1`,
		`infergate_request_latency_seconds_count{code_class="ok",method="ModelInfer",model="resnet",route="primary",size_class="le_1MiB",upstream="triton",version="1",window="1m"} 1`,
		`infergate_requests_total{code="OK",method="ModelInfer",model="resnet",route="primary",size_class="le_4KiB",upstream="triton",version="1"} 1`,
		// The last two classes met the cap.
		`infergate_requests_total{code="OK",method="other",model="other",route="other",size_class="other",upstream="other",version="other"} 2`,
		`infergate_series_overflow_total{reason="max_series"} 2`,
		`infergate_series 3`,
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("exposition lacks %s", want)
		}
	}
	if strings.Contains(got, `size_class="le_16MiB"`) {
		t.Errorf("a class past the cap has a series of its own:\n%s", got)
	}
}
