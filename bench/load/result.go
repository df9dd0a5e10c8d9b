package load

import (
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Latency holds quantiles of successful requests in milliseconds.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p999"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// Result is the outcome of one run. Latencies of open-loop runs are measured
// from each request's intended send time.
type Result struct {
	Label       string  `json:"label,omitempty"`
	Mode        Mode    `json:"mode"`
	Target      string  `json:"target"`
	Method      string  `json:"method"`
	Model       string  `json:"model"`
	Concurrency int     `json:"concurrency,omitempty"`
	Rate        float64 `json:"rate,omitempty"`
	Arrival     string  `json:"arrival,omitempty"`
	Conns       int     `json:"conns"`
	// RequestBytes is the size of one marshalled request.
	RequestBytes int `json:"request_bytes"`
	// Seconds is the measured wall time: from the end of warmup to the end
	// of the window, or to the last measured response if that came later.
	Seconds float64 `json:"duration_s"`
	// Completed counts successful measured requests.
	Completed int64 `json:"completed"`
	// Failed counts measured requests that ended with a non-OK status.
	Failed int64 `json:"failed"`
	// Errors counts failures by gRPC code name ("Unavailable").
	Errors map[string]int64 `json:"errors,omitempty"`
	// Late counts open-loop requests that had to wait for an in-flight slot.
	Late int64 `json:"late"`
	// Dropped counts open-loop requests scheduled inside the measured window
	// that were never sent because the run ended while they waited.
	Dropped int64 `json:"dropped"`
	// Throughput is Completed per second of measured time (Seconds).
	Throughput float64 `json:"throughput_rps"`
	// ResponseBytes is the total size of measured responses.
	ResponseBytes int64 `json:"response_bytes"`
	// Latency is, for a Stream run, the time to each request's final
	// response.
	Latency Latency `json:"latency_ms"`
	// Stream holds a Stream run's TTFR, gaps and responses per request;
	// nil for other runs.
	Stream *StreamResult `json:"stream,omitempty"`

	hist *hdrhistogram.Histogram
}

// Histogram returns the merged latency histogram in microseconds; callers
// must not modify it.
func (r *Result) Histogram() *hdrhistogram.Histogram { return r.hist }

// CountAtLeast returns how many successful requests took at least d, within
// the histogram's precision (a value counts if its bucket reaches d).
func (r *Result) CountAtLeast(d time.Duration) int64 {
	if r.hist == nil {
		return 0
	}
	v := d.Microseconds()
	var n int64
	for _, b := range r.hist.Distribution() {
		if b.To >= v {
			n += b.Count
		}
	}
	return n
}

// fill computes the derived fields from the merged histogram.
func (r *Result) fill(h *hdrhistogram.Histogram, errs map[string]int64, measured time.Duration) {
	r.hist = h
	r.Completed = h.TotalCount()
	r.Errors = errs
	r.Failed = 0
	for _, n := range errs {
		r.Failed += n
	}
	if len(errs) == 0 {
		r.Errors = nil
	}
	r.Seconds = measured.Seconds()
	if r.Seconds > 0 {
		r.Throughput = float64(r.Completed) / r.Seconds
	}
	r.Latency = latencyOf(h)
}

// latencyOf reads the quantiles of a histogram of microseconds in
// milliseconds; zero when it is empty.
func latencyOf(h *hdrhistogram.Histogram) Latency {
	if h.TotalCount() == 0 {
		return Latency{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return Latency{
		P50:  ms(h.ValueAtQuantile(50)),
		P90:  ms(h.ValueAtQuantile(90)),
		P99:  ms(h.ValueAtQuantile(99)),
		P999: ms(h.ValueAtQuantile(99.9)),
		Max:  ms(h.Max()),
		Mean: h.Mean() / 1000,
	}
}
