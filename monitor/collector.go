package monitor

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	seriesLabels  = []string{"model", "version", "method", "upstream", "route", "size_class"}
	summaryLabels = []string{"model", "version", "method", "upstream", "route", "size_class", "code_class", "window"}

	componentDescs = [NumComponents]*prometheus.Desc{
		ComponentTotal: prometheus.NewDesc("infergate_request_latency_seconds",
			"Exact quantiles (HDR) of the time from arrival at the proxy to the last byte sent, over a rolling window.",
			summaryLabels, nil),
		ComponentUpstream: prometheus.NewDesc("infergate_upstream_latency_seconds",
			"Exact quantiles (HDR) of the time spent in the upstream call, over a rolling window.",
			summaryLabels, nil),
		ComponentOverhead: prometheus.NewDesc("infergate_proxy_overhead_seconds",
			"Exact quantiles (HDR) of total minus upstream minus queue time, over a rolling window.",
			summaryLabels, nil),
		ComponentQueue: prometheus.NewDesc("infergate_queue_latency_seconds",
			"Exact quantiles (HDR) of the time spent in a batch queue, over a rolling window; only for series that ever queued.",
			summaryLabels, nil),
	}
	maxDesc = prometheus.NewDesc("infergate_request_latency_max_seconds",
		"Exact maximum of the request latency over a rolling window.",
		summaryLabels, nil)
	requestsDesc = prometheus.NewDesc("infergate_requests_total",
		"Calls finished, by gRPC status code.",
		append(append([]string{}, seriesLabels...), "code"), nil)
	requestBytesDesc = prometheus.NewDesc("infergate_request_bytes_total",
		"Request payload bytes received from clients.", seriesLabels, nil)
	responseBytesDesc = prometheus.NewDesc("infergate_response_bytes_total",
		"Response payload bytes sent to clients.", seriesLabels, nil)
	inFlightDesc = prometheus.NewDesc("infergate_requests_in_flight",
		"Calls in flight to an upstream.", []string{"upstream"}, nil)
	overflowDesc = prometheus.NewDesc("infergate_series_overflow_total",
		"Calls recorded in the overflow series (labels \"other\"), by reason: max_series (the cap was reached), label_too_long, label_invalid_utf8.",
		[]string{"reason"}, nil)
	seriesDesc = prometheus.NewDesc("infergate_series",
		"Live series, not counting the overflow series.", nil, nil)

	// streamDescs are the stream quantities' summaries, by StreamQuantity.
	streamDescs = [NumStreamQuantities]*prometheus.Desc{
		StreamFirstResponse: prometheus.NewDesc("infergate_stream_first_response_seconds",
			"Exact quantiles (HDR) of the time from a request on a stream (ModelStreamInfer) to its first response, over a rolling window.",
			summaryLabels, nil),
		StreamResponseGap: prometheus.NewDesc("infergate_stream_response_gap_seconds",
			"Exact quantiles (HDR) of the time between consecutive responses to one request on a stream, over a rolling window.",
			summaryLabels, nil),
		StreamResponses: prometheus.NewDesc("infergate_stream_responses_per_request",
			"Exact quantiles (HDR) of the number of responses per completed request on a stream, over a rolling window.",
			summaryLabels, nil),
	}
	streamDroppedDesc = prometheus.NewDesc("infergate_stream_dropped_total",
		"Stream requests and responses left out of the stream metrics, by reason: max_outstanding (a stream held too many requests awaiting their final response: the oldest was forgotten), unmatched (a response for no remembered request, or one that does not parse).",
		[]string{"reason"}, nil)
)

// durationBuckets resolve 500 µs to 60 s, finer between 50 ms and 1 s
// where inference p99s live: histogram_quantile interpolates linearly in
// a bucket, and where a Prometheus stores only the classic buckets the
// exported fleet rules (infergate rules export) fall back to them and
// would read a 150 ms p99 as about 245 ms with only 100 ms and 250 ms
// bounds. Each bound is a line of every busy series in every scrape
// (about 200 bytes): 17 bounds, not the 24 they were, keep 1,000 busy
// models' scrape under 8 MB. Of the seven left out, 100 and 250 µs
// split the fastest calls finer than a model server answers, 250, 400
// and 750 ms left buckets at most 2x wide below 1 s, and 5 and 30 s
// buckets 4x and 6x wide past 2.5 s, ten times an inference p99. The
// native histogram resolves 2.2% everywhere.
var durationBuckets = [...]float64{
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,
	0.15, 0.2, 0.3, 0.5, 1, 2.5, 10, 60,
}

// The native half of infergate_request_duration_seconds is what fleet
// quantiles read (histogram_quantile over sum(rate(...)) of all replicas).
// Its buckets at schema 5 are (2^((i-1)/32), 2^(i/32)] seconds: each is
// nativeBucketGrowth wide, so a quantile Prometheus reads from it lies in
// the same bucket as the exact value and is within a factor
// nativeBucketGrowth of it (relative error at most 2.2%), however
// Prometheus interpolates inside the bucket. A label set keeps that
// resolution whatever range its calls fill (durations.go): its counts are
// dense from its fastest call's bucket to its slowest's, 8 bytes each
// (616 buckets from 100 µs to 60 s, 904 from 10 µs to an hour).
const nativeSchema = 5

// nativeBucketGrowth is the ratio of a native bucket's upper to its lower
// bound at nativeSchema, 2^(2^-5): the bound on a native quantile's
// relative error that docs/metrics.md states.
var nativeBucketGrowth = math.Exp2(math.Exp2(-nativeSchema))

// Register registers the registry's metrics on reg (never the global
// registry): the request histogram and one collector that builds every other
// metric from one snapshot per scrape.
func (r *Registry) Register(reg prometheus.Registerer) error {
	var errs []error
	if r.durs != nil {
		if err := reg.Register(durationCollector{r}); err != nil {
			errs = append(errs, fmt.Errorf("monitor: register request histogram: %w", err))
		}
	}
	if err := reg.Register(collector{r}); err != nil {
		errs = append(errs, fmt.Errorf("monitor: register collector: %w", err))
	}
	return errors.Join(errs...)
}

// collector turns a Registry into const metrics at scrape time. Collect may
// run concurrently with itself and with recording.
type collector struct{ r *Registry }

// Describe sends every descriptor the collector may emit.
func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range componentDescs {
		ch <- d
	}
	for _, d := range streamDescs {
		ch <- d
	}
	for _, d := range []*prometheus.Desc{maxDesc, requestsDesc, requestBytesDesc,
		responseBytesDesc, inFlightDesc, overflowDesc, seriesDesc, streamDroppedDesc} {
		ch <- d
	}
}

// labelSet is the label values shared by the counters: series that differ
// only in code class add up.
type labelSet [6]string

func labelsOf(k SeriesKey) labelSet {
	return labelSet{k.Model, k.Version, k.Method, k.Upstream, k.Route, k.SizeClass}
}

// Collect emits the metrics of one snapshot.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	r := c.r
	for _, ss := range r.snapshot(&r.cfg.exported) {
		collectSummaries(ch, ss, &r.cfg)
	}

	type codeKey struct {
		l    labelSet
		code string
	}
	requests := map[codeKey]int64{}
	bytesIn := map[labelSet]int64{}
	bytesOut := map[labelSet]int64{}
	st := r.state.Load()
	list := st.list
	for l, b := range st.carried {
		bytesIn[l] += b[0]
		bytesOut[l] += b[1]
	}
	for _, s := range append(list[:len(list):len(list)], r.overflow) {
		t := s.totals()
		if s.overflow && t.calls() == 0 {
			continue
		}
		l := labelsOf(s.key)
		for i, n := range t.codes {
			if n > 0 {
				requests[codeKey{l, codeNames[i]}] += n
			}
		}
		for code, n := range t.unknown {
			requests[codeKey{l, code}] += n
		}
		bytesIn[l] += t.bytesIn
		bytesOut[l] += t.bytesOut
	}
	for k, n := range requests {
		ch <- prometheus.MustNewConstMetric(requestsDesc, prometheus.CounterValue, float64(n),
			k.l[0], k.l[1], k.l[2], k.l[3], k.l[4], k.l[5], k.code)
	}
	for l, n := range bytesIn {
		ch <- prometheus.MustNewConstMetric(requestBytesDesc, prometheus.CounterValue, float64(n), l[:]...)
		ch <- prometheus.MustNewConstMetric(responseBytesDesc, prometheus.CounterValue, float64(bytesOut[l]), l[:]...)
	}

	for i, reason := range overflowReasons {
		ch <- prometheus.MustNewConstMetric(overflowDesc, prometheus.CounterValue, float64(r.overflowBy[i].Load()), reason)
	}
	for i, reason := range streamDropNames {
		ch <- prometheus.MustNewConstMetric(streamDroppedDesc, prometheus.CounterValue, float64(r.streamDrops[i].Load()), reason)
	}

	r.inflightMu.Lock()
	for up, g := range r.inflight {
		ch <- prometheus.MustNewConstMetric(inFlightDesc, prometheus.GaugeValue, float64(g.Value()), up)
	}
	r.inflightMu.Unlock()
	ch <- prometheus.MustNewConstMetric(seriesDesc, prometheus.GaugeValue, float64(len(list)))
}

// allQuantiles exports every quantile of a summary.
var allQuantiles = [len(Quantiles)]bool{true, true, true, true}

// collectSummaries emits the HDR summaries and maxima of one series, for
// the windows cfg exports. The upstream and proxy overhead summaries
// carry the quantiles cfg says (by default p99: what the dashboard
// reads), the request latency, queue and stream summaries all four. The queue summary is left out
// for series that never queued, so passthrough routes do not export a
// column of zeros.
func collectSummaries(ch chan<- prometheus.Metric, ss SeriesSnapshot, cfg *config) {
	k := ss.Key
	for w := range Window(NumWindows) {
		if !cfg.exported[w] {
			continue
		}
		lv := []string{k.Model, k.Version, k.Method, k.Upstream, k.Route, k.SizeClass, k.CodeClass, w.String()}
		for comp := range Component(NumComponents) {
			if comp == ComponentQueue && !ss.QueueSeen {
				continue
			}
			// The queue summary keeps all four: the shipped scaling
			// rules read its p90, and only batched series have one.
			qs := &cfg.componentQ
			if comp == ComponentTotal || comp == ComponentQueue {
				qs = &allQuantiles
			}
			ch <- summaryOf(componentDescs[comp], ss.Stats[w][comp], seconds, qs, lv)
		}
		st := ss.Stats[w][ComponentTotal]
		ch <- prometheus.MustNewConstMetric(maxDesc, prometheus.GaugeValue, nanOr(st.Count, seconds(st.Max)), lv...)
		if ss.Stream == nil {
			continue
		}
		for q := range StreamQuantity(NumStreamQuantities) {
			ch <- summaryOf(streamDescs[q], ss.Stream[w][q], q.Value, &allQuantiles, lv)
		}
	}
}

// summaryOf is one const summary of st with the quantiles qs marks, its
// values converted by unit.
func summaryOf(d *prometheus.Desc, st Stats, unit func(time.Duration) float64, qs *[len(Quantiles)]bool, lv []string) prometheus.Metric {
	vals := [len(Quantiles)]time.Duration{st.P50, st.P90, st.P99, st.P999}
	q := make(map[float64]float64, len(Quantiles))
	for i, on := range qs {
		if on {
			q[Quantiles[i]] = nanOr(st.Count, unit(vals[i]))
		}
	}
	return prometheus.MustNewConstSummary(d, st.Count, unit(st.Sum), q, lv...)
}
