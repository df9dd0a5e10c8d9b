package load

import (
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"google.golang.org/grpc/codes"
)

// Histogram geometry: microseconds from 1 µs to one hour, three significant
// digits. Values above the top are clamped to it rather than dropped, so a
// very long stall still shows as the maximum.
const (
	histLowest  = 1
	histHighest = int64(time.Hour / time.Microsecond)
	histSigFigs = 3
)

func newHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(histLowest, histHighest, histSigFigs)
}

// shard is one lock-protected slice of the recorder; callers are spread over
// shards so recording does not serialise every request on one mutex.
type shard struct {
	mu   sync.Mutex
	hist *hdrhistogram.Histogram
	errs map[codes.Code]int64
	// stream holds a Stream run's TTFR, gaps and responses per request
	// (stream.go); msgFailed counts requests answered with an
	// error_message.
	stream    [numStreamHists]*hdrhistogram.Histogram
	msgFailed int64
	_         [40]byte // keep neighbouring shards' locks off one cache line
}

// recorder collects measured latencies and error codes.
type recorder struct {
	shards []shard
}

func newRecorder(n int, stream bool) *recorder {
	if n < 1 {
		n = 1
	}
	r := &recorder{shards: make([]shard, n)}
	for i := range r.shards {
		r.shards[i].hist = newHistogram()
		r.shards[i].errs = make(map[codes.Code]int64)
		if stream {
			for k := range r.shards[i].stream {
				r.shards[i].stream[k] = newHistogram()
			}
		}
	}
	return r
}

// recordStream stores one value (microseconds, or a count) of stream
// histogram k in shard i, clamped into the histogram's range.
func (r *recorder) recordStream(i, k int, v int64) {
	s := &r.shards[i%len(r.shards)]
	s.mu.Lock()
	_ = s.stream[k].RecordValue(min(max(v, 0), histHighest))
	s.mu.Unlock()
}

// recordFailed counts a request answered with an error_message.
func (r *recorder) recordFailed(i int) {
	s := &r.shards[i%len(r.shards)]
	s.mu.Lock()
	s.msgFailed++
	s.mu.Unlock()
}

// mergeStream returns the merged stream histograms.
func (r *recorder) mergeStream() [numStreamHists]*hdrhistogram.Histogram {
	var out [numStreamHists]*hdrhistogram.Histogram
	for k := range out {
		out[k] = newHistogram()
	}
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		for k, h := range s.stream {
			if h != nil {
				out[k].Merge(h)
			}
		}
		s.mu.Unlock()
	}
	return out
}

// record stores one outcome in shard i (taken modulo the shard count).
// Failed calls are counted by code; only successes enter the histogram, so
// fast failures cannot flatter the latency figures.
func (r *recorder) record(i int, latency time.Duration, code codes.Code) {
	s := &r.shards[i%len(r.shards)]
	s.mu.Lock()
	if code == codes.OK {
		v := latency.Microseconds()
		if v < histLowest {
			v = histLowest
		}
		if v > histHighest {
			v = histHighest
		}
		_ = s.hist.RecordValue(v) // in range by the clamps above
	} else {
		s.errs[code]++
	}
	s.mu.Unlock()
}

// merge returns one histogram and the error counts by code name.
func (r *recorder) merge() (*hdrhistogram.Histogram, map[string]int64) {
	h := newHistogram()
	errs := make(map[string]int64)
	for i := range r.shards {
		s := &r.shards[i]
		s.mu.Lock()
		h.Merge(s.hist)
		for c, n := range s.errs {
			errs[c.String()] += n
		}
		if s.msgFailed > 0 {
			errs[ErrorMessage] += s.msgFailed
		}
		s.mu.Unlock()
	}
	return h, errs
}
