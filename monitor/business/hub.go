package business

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Hub runs one reader per configured metric. Set swaps the list live (a
// reload): a metric whose settings did not change keeps its reader and
// history; a changed one starts over, since its old samples answer
// another question.
type Hub struct {
	p99 P99Source
	now func() time.Time
	// newQuerier builds a metric's querier; tests give a fake.
	newQuerier func(Config) (Querier, error)

	mu      sync.Mutex
	ctx     context.Context // nil until Run
	readers map[string]*running
	order   []string
	wg      sync.WaitGroup
}

type running struct {
	r      *reader
	cancel context.CancelFunc
}

// NewHub returns a hub reading cfgs (already validated) with p99 as the
// latency side.
func NewHub(cfgs []Config, p99 P99Source) (*Hub, error) {
	h := &Hub{p99: p99, now: time.Now, readers: map[string]*running{},
		newQuerier: func(c Config) (Querier, error) { return NewPrometheus(c.URL) }}
	if err := h.Set(cfgs); err != nil {
		return nil, err
	}
	return h, nil
}

// Set replaces the metrics read; with Run started, the new readers start
// at once and the dropped ones stop.
func (h *Hub) Set(cfgs []Config) error {
	next := map[string]*running{}
	var order []string
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range cfgs {
		c = c.WithDefaults()
		order = append(order, c.Name)
		if old := h.readers[c.Name]; old != nil && reflect.DeepEqual(old.r.cfg, c) {
			next[c.Name] = old
			continue
		}
		q, err := h.newQuerier(c)
		if err != nil {
			return fmt.Errorf("business_metrics: %s: %w", c.Name, err)
		}
		next[c.Name] = &running{r: newReader(c, q, h.p99, h.now)}
	}
	for name, old := range h.readers {
		if next[name] != old && old.cancel != nil {
			old.cancel()
		}
	}
	h.readers, h.order = next, order
	if h.ctx != nil {
		h.startLocked()
	}
	return nil
}

func (h *Hub) startLocked() {
	for _, rn := range h.readers {
		if rn.cancel != nil {
			continue
		}
		ctx, cancel := context.WithCancel(h.ctx)
		rn.cancel = cancel
		h.wg.Go(func() { rn.r.run(ctx) })
	}
}

// Run starts the readers and waits for ctx to end and them to stop.
func (h *Hub) Run(ctx context.Context) {
	h.mu.Lock()
	h.ctx = ctx
	h.startLocked()
	h.mu.Unlock()
	<-ctx.Done()
	h.wg.Wait()
}

func (h *Hub) list() []*reader {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*reader, 0, len(h.order))
	for _, n := range h.order {
		out = append(out, h.readers[n].r)
	}
	return out
}

// Status returns every metric's reads, in configuration order.
func (h *Hub) Status() []Status {
	var out []Status
	for _, r := range h.list() {
		out = append(out, r.status())
	}
	return out
}

// Estimates returns every model's estimates, by model, each model's in
// configuration order.
func (h *Hub) Estimates() map[string][]ModelEstimate {
	out := map[string][]ModelEstimate{}
	for _, r := range h.list() {
		es, _ := r.estimates()
		for _, e := range es {
			out[e.Model] = append(out[e.Model], e)
		}
	}
	return out
}

var (
	valueDesc = prometheus.NewDesc("infergate_business_metric",
		"The last value read of a business metric (business_metrics: its PromQL query), to chart beside latency; absent before the first successful read.",
		[]string{"name"}, nil)
	corrDesc = prometheus.NewDesc("infergate_business_metric_latency_correlation",
		"Pearson correlation between the model's p99 latency and the business metric at the lag where it is strongest (sign kept: negative when the metric falls as latency rises); absent until enough samples.",
		[]string{"name", "model"}, nil)
	lagDesc = prometheus.NewDesc("infergate_business_metric_latency_lag_seconds",
		"The lag at which the business metric correlates best with the model's p99: positive when the metric follows latency.",
		[]string{"name", "model"}, nil)
	successDesc = prometheus.NewDesc("infergate_business_metric_last_success_timestamp_seconds",
		"When the business metric was last read successfully (Unix seconds); absent before the first success.",
		[]string{"name"}, nil)
	errorsDesc = prometheus.NewDesc("infergate_business_metric_read_errors_total",
		"Reads of the business metric from Prometheus that failed (down, slow past the timeout, or not one series).",
		[]string{"name"}, nil)
)

// Register registers the hub's metrics on reg.
func (h *Hub) Register(reg prometheus.Registerer) error {
	if err := reg.Register(collector{h}); err != nil {
		return fmt.Errorf("business: register collector: %w", err)
	}
	return nil
}

// collector exports what the readers last computed; a scrape computes
// nothing.
type collector struct{ h *Hub }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{valueDesc, corrDesc, lagDesc, successDesc, errorsDesc} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for _, r := range c.h.list() {
		st := r.status()
		es, v := r.estimates()
		name := r.cfg.Name
		if !math.IsNaN(v) {
			ch <- prometheus.MustNewConstMetric(valueDesc, prometheus.GaugeValue, v, name)
		}
		if st.LastSuccess != nil {
			ch <- prometheus.MustNewConstMetric(successDesc, prometheus.GaugeValue, float64(st.LastSuccess.UnixNano())/1e9, name)
		}
		ch <- prometheus.MustNewConstMetric(errorsDesc, prometheus.CounterValue, float64(st.Errors), name)
		for _, e := range es {
			ch <- prometheus.MustNewConstMetric(corrDesc, prometheus.GaugeValue, e.Correlation, name, e.Model)
			ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, e.LagSeconds, name, e.Model)
		}
	}
}
