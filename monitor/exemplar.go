package monitor

import (
	"encoding/hex"
	"slices"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Exemplars. A traced call leaves its trace id on the bucket of
// infergate_request_duration_seconds its Total fell in: a dashboard's p99
// panel then links to a trace of a call that made it. client_golang's own
// ObserveWithExemplar would allocate a label map, a hex string and a
// protobuf message on every traced call; instead each shard keeps, under
// the lock record already holds, the most recent exemplar of each classic
// bucket in a fixed array, and the collector turns them into exemplars
// at scrape time (classic buckets and the native histogram alike).

// ExemplarLabel is the exemplar label that carries the trace id, the name
// Grafana's Prometheus data source and Tempo look for.
const ExemplarLabel = "trace_id"

// exemplar is one traced call: 32 bytes.
type exemplar struct {
	trace [16]byte
	ns    int64 // Total, nanoseconds
	at    int64 // when it was recorded, Unix nanoseconds; 0: empty slot
}

// exemplarSet holds the latest exemplar of each classic bucket of
// durationBuckets, +Inf last: 18 × 32 = 576 bytes, allocated by a shard
// on its first traced call, so a series that is never traced pays one
// nil pointer per shard.
type exemplarSet [len(durationBuckets) + 1]exemplar

// exemplarSetBytes is the size of one exemplarSet, for the docs.
const exemplarSetBytes = (len(durationBuckets) + 1) * 32

// durationBucket returns the index of the classic bucket (le) that holds
// a latency: the first upper bound not below it, as client_golang's
// histogram picks it; len(durationBuckets) for +Inf.
func durationBucket(d time.Duration) int {
	return sort.SearchFloat64s(durationBuckets[:], d.Seconds())
}

// noteExemplar keeps a traced call as its bucket's latest exemplar.
// Called with sh.mu held.
func (sh *shard) noteExemplar(trace [16]byte, total time.Duration, at time.Time) {
	if sh.ex == nil {
		sh.ex = new(exemplarSet)
	}
	sh.ex[durationBucket(total)] = exemplar{trace: trace, ns: int64(total), at: at.UnixNano()}
}

// exemplarsInto merges the series' latest exemplar per bucket into set
// (newest wins), and reports whether it found any.
func (s *Series) exemplarsInto(set *exemplarSet) bool {
	found := false
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		if sh.ex != nil {
			for b, e := range sh.ex {
				if e.at > set[b].at {
					set[b] = e
					found = true
				}
			}
		}
		sh.mu.Unlock()
	}
	return found
}

// exemplars returns the exemplars of each request histogram child (the
// Observer the series of one label set share), oldest first: Prometheus
// takes a series' exemplars in time order.
func (r *Registry) exemplars() map[prometheus.Metric][]prometheus.Exemplar {
	var out map[prometheus.Metric][]prometheus.Exemplar
	sets := map[prometheus.Metric]*exemplarSet{}
	list := r.state.Load().list
	for _, s := range append(list[:len(list):len(list)], r.overflow) {
		m, ok := s.obs.(prometheus.Metric)
		if !ok {
			continue
		}
		set := sets[m]
		if set == nil {
			set = new(exemplarSet)
		}
		if s.exemplarsInto(set) {
			sets[m] = set
		}
	}
	for m, set := range sets {
		var exs []prometheus.Exemplar
		for _, e := range set {
			if e.at == 0 {
				continue
			}
			exs = append(exs, prometheus.Exemplar{
				Value:     time.Duration(e.ns).Seconds(),
				Labels:    prometheus.Labels{ExemplarLabel: hex.EncodeToString(e.trace[:])},
				Timestamp: time.Unix(0, e.at),
			})
		}
		slices.SortFunc(exs, func(a, b prometheus.Exemplar) int { return a.Timestamp.Compare(b.Timestamp) })
		if out == nil {
			out = make(map[prometheus.Metric][]prometheus.Exemplar, len(sets))
		}
		out[m] = exs
	}
	return out
}

// durationCollector exports infergate_request_duration_seconds: the
// histogram vector's children, each with the exemplars its series kept.
type durationCollector struct{ r *Registry }

func (c durationCollector) Describe(ch chan<- *prometheus.Desc) { c.r.durations.Describe(ch) }

func (c durationCollector) Collect(ch chan<- prometheus.Metric) {
	exs := c.r.exemplars()
	if len(exs) == 0 {
		c.r.durations.Collect(ch)
		return
	}
	inner := make(chan prometheus.Metric)
	go func() {
		c.r.durations.Collect(inner)
		close(inner)
	}()
	for m := range inner {
		if e := exs[m]; len(e) > 0 {
			// The labels are one short, valid name and 32 hex digits:
			// this cannot fail.
			if wm, err := prometheus.NewMetricWithExemplars(m, e...); err == nil {
				m = wm
			}
		}
		ch <- m
	}
}
