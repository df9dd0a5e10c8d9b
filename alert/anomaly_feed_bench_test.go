package alert

import (
	"fmt"
	"testing"
	"time"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/baseline"
)

// BenchmarkAnomalyFeedThousandModels: one second of the feed for 1,000
// models with known baselines (features and detectors, past learning),
// the cost the engine adds each second. 5% of a core is 50ms.
func BenchmarkAnomalyFeedThousandModels(b *testing.B) {
	c := newClock()
	bs := baseline.New(baseline.Options{Now: c.now, MinLearn: -1})
	src := &fakeSource{}
	for i := range 1000 {
		m := fmt.Sprintf("m%04d", i)
		rs := calls(1000, ms(20), ms(50), nil)
		rs.QueueSeen = true
		rs.Stats[monitor.ComponentQueue] = monitor.Stats{Count: 1000, P99: ms(4)}
		src.set(m, rs)
		for range 20 {
			bs.Observe(m, baseline.Sample{0.02, 0.02, 0.05}, false)
		}
	}
	af := newAnomalyFeed()
	step := func() {
		c.add(time.Second)
		f := &frame{now: c.now(), src: src, slice: time.Second, recent: map[string]map[string]monitor.RecentStats{}, baselines: bs}
		af.step(f, nil)
	}
	for range 300 {
		step()
	}
	b.ResetTimer()
	for b.Loop() {
		step()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1e6*100, "%core")
}
