package alert

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/infergate/infergate/alert/notify"
	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/baseline"
)

// BenchmarkStep1000Series is one evaluation of the default rules over
// 1,000 series (1,000 models, a few calls each per second) in a real
// monitor registry. At one evaluation a second, ns/op / 1e9 is the
// fraction of one core the engine takes; the target is at most 5%
// (50ms per op).
func BenchmarkStep1000Series(b *testing.B) {
	now := time.Date(2026, 11, 3, 14, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	reg := monitor.NewRegistry(monitor.Options{NoRequestHistogram: true, MaxSeries: 2000, Now: clock})
	bs := baseline.New(baseline.Options{Now: clock})
	key := func(i int) monitor.SeriesKey {
		return monitor.SeriesKey{Model: fmt.Sprintf("model-%04d", i), Version: "1",
			Method: "/inference.GRPCInferenceService/ModelInfer", Upstream: "u", CodeClass: monitor.CodeClassOK}
	}
	fill := func() {
		for i := range 1000 {
			for c := range 3 {
				reg.Record(key(i), monitor.Sample{Total: time.Duration(5+c) * time.Millisecond, Code: "OK"})
			}
		}
		now = now.Add(time.Second)
		reg.Rotate()
	}
	for range 60 {
		fill()
	}
	for i := range 1000 {
		// A full recent ring (30 minutes of samples).
		for j := range 1800 {
			v := 0.005 + float64(j%7)*1e-4
			bs.Observe(key(i).Model, baseline.Sample{v, v * 1.2, v * 1.4}, false)
		}
	}
	cfg := &Config{}
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	e, err := New(Options{Config: cfg, Latency: reg, Baselines: bs, Now: clock,
		Logger: slog.New(slog.DiscardHandler), Send: func(string, *notify.Message) {}})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		e.Step()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e9*100, "%core@1Hz")
}
