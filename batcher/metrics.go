package batcher

import (
	"context"
	"errors"
	"math/bits"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// reason is why a call was rejected, the reason label of
// infergate_batch_rejected_total.
type reason uint8

const (
	reasonQueueFull reason = iota
	reasonDeadline
	reasonInvalid
	reasonCancelled
	reasonPanic
	reasonSLO
	numReasons
)

var reasonNames = [numReasons]string{"queue_full", "deadline", "invalid", "cancelled", "panic", "slo"}

// reasonOf classifies a context error.
func reasonOf(err error) reason {
	if errors.Is(err, context.DeadlineExceeded) {
		return reasonDeadline
	}
	return reasonCancelled
}

// numSizeBuckets covers batch sizes 1, 2, 4, ... MaxBatchSize (4096).
const numSizeBuckets = 13

// sizeBucket returns the index of the smallest power-of-two bucket that
// holds n rows.
func sizeBucket(n int) int {
	if n <= 1 {
		return 0
	}
	return min(bits.Len(uint(n-1)), numSizeBuckets-1)
}

var (
	sizeDesc = prometheus.NewDesc("infergate_batch_size",
		"Rows per batch sent upstream.", []string{"model", "upstream"}, nil)
	batchesDesc = prometheus.NewDesc("infergate_batches_total",
		"Batches sent upstream.", []string{"model", "upstream"}, nil)
	lateDesc = prometheus.NewDesc("infergate_batch_late_total",
		"Requests the adaptive batcher sent after fresher ones because their wait had already used up the SLO.",
		[]string{"model", "upstream"}, nil)
	rejectedDesc = prometheus.NewDesc("infergate_batch_rejected_total",
		"Requests the batcher did not batch or answered itself, by reason: queue_full, deadline, cancelled, invalid (malformed: sent alone, the upstream answers), panic (a recovered panic failed it), slo (shed by the adaptive batcher: it could not be answered within the SLO).",
		[]string{"model", "reason"}, nil)
	targetSizeDesc = prometheus.NewDesc("infergate_batch_target_size",
		"Largest batch, in rows, the batcher forms now: max size for static, the controller's choice for adaptive.",
		[]string{"model"}, nil)
	targetDelayDesc = prometheus.NewDesc("infergate_batch_target_delay_seconds",
		"Longest the batcher holds a request while an upstream slot is free: max delay for static, 0 for adaptive.",
		[]string{"model"}, nil)
	queueLengthDesc = prometheus.NewDesc("infergate_batch_queue_length",
		"Requests waiting in batch queues.", []string{"model"}, nil)
)

// Register registers the batcher's metrics on reg (never the global
// registry): one collector that reads every queue once per scrape.
func (b *Batcher) Register(reg prometheus.Registerer) error {
	if err := reg.Register(collector{b}); err != nil {
		return errors.New("batcher: register collector: " + err.Error())
	}
	return nil
}

// collector turns the Batcher's state into const metrics at scrape time.
type collector struct{ b *Batcher }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{sizeDesc, batchesDesc, lateDesc, rejectedDesc, targetSizeDesc, targetDelayDesc, queueLengthDesc} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	type hist struct {
		count, sum, late uint64
		sizes            [numSizeBuckets]uint64
	}
	type perModel struct {
		queued int
		target int
		delay  time.Duration
		seen   bool
	}
	hists := map[[2]string]*hist{}
	models := map[string]*perModel{}
	for name, m := range *c.b.models.Load() {
		models[name] = &perModel{target: m.pol.MaxSize}
		if m.pol.Mode == Static {
			models[name].delay = m.pol.MaxDelay
		}
	}
	// Under the lock that retiring a queue takes: a queue is counted
	// either live or among the retired, never both or neither.
	c.b.mu.Lock()
	for k, st := range c.b.retired {
		hists[k] = &hist{count: st.batches, sum: st.rows, late: st.late, sizes: st.sizes}
	}
	c.b.each(func(q *queue) {
		k := [2]string{q.key.model, q.key.upstream}
		h := hists[k]
		if h == nil {
			h = &hist{}
			hists[k] = h
		}
		pm := models[q.key.model]
		q.mu.Lock()
		h.count += q.stats.batches
		h.sum += q.stats.rows
		h.late += q.stats.late
		for i, n := range q.stats.sizes {
			h.sizes[i] += n
		}
		// A queue whose model is no longer batched (an auto model the
		// upstream unloaded, a model a reload removed) still sends what
		// it holds: its counters count, its model has no gauges.
		if pm != nil {
			pm.queued += q.n
			// Several queues of one model (versions, upstreams): the
			// largest target speaks for the model.
			if !pm.seen || q.target > pm.target {
				pm.target, pm.delay = q.target, q.delay
			}
			pm.seen = true
		}
		q.mu.Unlock()
	})
	c.b.mu.Unlock()
	for k, h := range hists {
		buckets := make(map[float64]uint64, numSizeBuckets)
		var cum uint64
		for i, n := range h.sizes {
			cum += n
			buckets[float64(uint(1)<<i)] = cum
		}
		ch <- prometheus.MustNewConstHistogram(sizeDesc, h.count, float64(h.sum), buckets, k[0], k[1])
		ch <- prometheus.MustNewConstMetric(batchesDesc, prometheus.CounterValue, float64(h.count), k[0], k[1])
		ch <- prometheus.MustNewConstMetric(lateDesc, prometheus.CounterValue, float64(h.late), k[0], k[1])
	}
	for name, m := range *c.b.models.Load() {
		for r := range numReasons {
			ch <- prometheus.MustNewConstMetric(rejectedDesc, prometheus.CounterValue, float64(m.rejected[r].Load()), name, reasonNames[r])
		}
		pm := models[name]
		ch <- prometheus.MustNewConstMetric(targetSizeDesc, prometheus.GaugeValue, float64(pm.target), name)
		ch <- prometheus.MustNewConstMetric(targetDelayDesc, prometheus.GaugeValue, pm.delay.Seconds(), name)
		ch <- prometheus.MustNewConstMetric(queueLengthDesc, prometheus.GaugeValue, float64(pm.queued), name)
	}
}

// QueueStats is one queue's state as the admin API shows it.
type QueueStats struct {
	Model    string `json:"model"`
	Version  string `json:"version,omitempty"`
	Upstream string `json:"upstream"`
	Method   string `json:"method"`
	Mode     string `json:"mode"`
	// TargetSize is the largest batch formed now, in rows.
	TargetSize int `json:"target_size"`
	// TargetDelaySeconds is the longest a request is held while a slot is
	// free (static max delay; 0 for adaptive).
	TargetDelaySeconds float64 `json:"target_delay_seconds"`
	// SLOSeconds is the adaptive p99 target.
	SLOSeconds float64 `json:"slo_seconds,omitempty"`
	// LatencyASeconds and LatencyBSeconds are the fitted upstream latency
	// of a batch of n rows, a + b·n.
	LatencyASeconds float64 `json:"latency_a_seconds"`
	LatencyBSeconds float64 `json:"latency_b_seconds"`
	// PredictedLatencySeconds is the fit at the target size.
	PredictedLatencySeconds float64 `json:"predicted_latency_seconds"`
	// ArrivalRate is the measured arrival rate, requests per second.
	ArrivalRate float64 `json:"arrival_rate"`
	QueueLength int     `json:"queue_length"`
	InFlight    int     `json:"in_flight"`
	// Slots is how many batches may be in flight: the policy's slots
	// times the replicas of the upstream holding the model (WithReplicas).
	Slots   int    `json:"slots"`
	Batches uint64 `json:"batches"`
	// Late counts requests sent after fresher ones because their wait had
	// used up the SLO (adaptive only).
	Late uint64 `json:"late"`
	// MeanBatchSize is rows per batch since start.
	MeanBatchSize float64 `json:"mean_batch_size"`
}

// Stats returns the state of every queue, ordered by model, version,
// upstream and method.
func (b *Batcher) Stats() []QueueStats {
	var out []QueueStats
	now := time.Now()
	b.each(func(q *queue) {
		q.mu.Lock()
		s := QueueStats{
			Model: q.key.model, Version: q.key.version, Upstream: q.key.upstream, Method: q.key.method,
			Mode:                    q.pol.Mode.String(),
			TargetSize:              q.target,
			TargetDelaySeconds:      q.delay.Seconds(),
			LatencyASeconds:         q.fit.a,
			LatencyBSeconds:         q.fit.b,
			PredictedLatencySeconds: q.fit.predict(q.target).Seconds(),
			ArrivalRate:             q.rate.at(now),
			QueueLength:             q.n,
			InFlight:                q.inFlight,
			Slots:                   q.slots,
			Batches:                 q.stats.batches,
			Late:                    q.stats.late,
		}
		if q.pol.Mode == Adaptive {
			s.SLOSeconds = q.pol.SLO.Seconds()
		}
		if q.stats.batches > 0 {
			s.MeanBatchSize = float64(q.stats.rows) / float64(q.stats.batches)
		}
		q.mu.Unlock()
		out = append(out, s)
	})
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Model != b.Model {
			return a.Model < b.Model
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		if a.Upstream != b.Upstream {
			return a.Upstream < b.Upstream
		}
		return a.Method < b.Method
	})
	return out
}
