package monitor_test

import (
	"fmt"
	"time"

	"github.com/infergate/infergate/monitor"
)

func ExampleNewRegistry() {
	r := monitor.NewRegistry(monitor.Options{})
	key := monitor.SeriesKey{Model: "resnet", Version: "1", Method: "ModelInfer", Upstream: "triton", CodeClass: monitor.CodeClassOK}
	for i := 1; i <= 100; i++ {
		total := time.Duration(i) * time.Millisecond
		r.Record(key, monitor.Sample{Total: total, Upstream: total - 200*time.Microsecond, Code: "OK"})
	}
	r.Rotate() // Run does this every second

	ss := r.Snapshot()[0]
	fmt.Println("p99 total 1m:", ss.Stats[monitor.Window1m][monitor.ComponentTotal].Quantile(0.99)) // 99ms within 0.1%
	fmt.Println("max overhead 1m:", ss.Stats[monitor.Window1m][monitor.ComponentOverhead].Max)
	// Output:
	// p99 total 1m: 99.007ms
	// max overhead 1m: 200µs
}
