package load

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
)

// BenchmarkRecord is the generator's per-request bookkeeping cost.
func BenchmarkRecord(b *testing.B) {
	r := newRecorder(16, false)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			r.record(i, time.Duration(i%5000)*time.Microsecond, codes.OK)
			i++
		}
	})
}

// BenchmarkCodecMarshal shows the raw codec does no copying.
func BenchmarkCodecMarshal(b *testing.B) {
	body := make([]byte, 1<<20)
	b.ReportAllocs()
	for b.Loop() {
		bs, _ := rawCodec{}.Marshal(body)
		bs.Free()
	}
}
