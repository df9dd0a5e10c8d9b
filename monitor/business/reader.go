package business

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// P99Source returns each model's p99 latency over the last window, in
// seconds; models without calls in it are absent.
type P99Source func(window time.Duration) map[string]float64

// Querier reads a query's single value at ts.
type Querier interface {
	Query(ctx context.Context, query string, ts time.Time) (float64, error)
}

// Status is one metric's reads, for /api/v1/status.
type Status struct {
	Name string `json:"name"`
	URL  string `json:"url"`
	// Value is the last value read; nil before the first success.
	Value       *float64   `json:"value"`
	LastSuccess *time.Time `json:"last_success"`
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
	// Reads and Errors count the reads since the metric was configured.
	Reads  uint64 `json:"reads"`
	Errors uint64 `json:"errors"`
}

// ModelEstimate is one model's estimate against one metric.
type ModelEstimate struct {
	Metric string
	Model  string
	Estimate
	// LagSeconds is Lag in seconds (Lag × interval).
	LagSeconds float64
}

// reader samples one metric and keeps its bounded history.
type reader struct {
	cfg   Config
	q     Querier
	p99   P99Source
	now   func() time.Time
	hist  int
	lag   int
	mu    sync.Mutex
	vals  []float64            // the metric, oldest first; NaN when a read failed
	lat   map[string][]float64 // each model's p99, aligned with vals
	st    Status
	ests  []ModelEstimate
	value float64 // the last value read, for the gauge; NaN before one
}

func newReader(cfg Config, q Querier, p99 P99Source, now func() time.Time) *reader {
	h, l := cfg.steps()
	return &reader{cfg: cfg, q: q, p99: p99, now: now, hist: h, lag: l, lat: map[string][]float64{},
		st: Status{Name: cfg.Name, URL: cfg.URL}, value: math.NaN()}
}

// step takes one sample: every model's p99 first (in-process, cheap),
// then the metric, so a slow Prometheus delays nothing but this read. A
// failed read leaves a NaN, which keeps the history aligned in time.
func (r *reader) step(ctx context.Context) {
	lat := r.p99(r.cfg.Interval)
	at := r.now()
	qctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	v, err := r.q.Query(qctx, r.cfg.Query, at)
	cancel()
	if ctx.Err() != nil {
		return // stopping: neither a sample nor an error
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.st.Reads++
	if err != nil {
		r.st.Errors++
		r.st.LastError = err.Error()
		t := r.now()
		r.st.LastErrorAt = &t
		v = math.NaN()
	} else {
		t := r.now()
		r.st.LastSuccess = &t
		r.value = v
		r.st.Value = &r.value
	}
	r.vals = appendBounded(r.vals, v, r.hist)
	for m, s := range r.lat {
		p, ok := lat[m]
		if !ok {
			p = math.NaN()
		}
		s = appendBounded(s, p, r.hist)
		if allNaN(s) {
			delete(r.lat, m) // no calls over the whole history
			continue
		}
		r.lat[m] = s
	}
	for m, p := range lat {
		if _, ok := r.lat[m]; ok {
			continue
		}
		s := make([]float64, len(r.vals)-1, r.hist)
		for i := range s {
			s[i] = math.NaN()
		}
		r.lat[m] = append(s, p)
	}
	r.ests = r.ests[:0]
	for m, s := range r.lat {
		if e, ok := EstimateLag(s, r.vals, r.lag); ok {
			r.ests = append(r.ests, ModelEstimate{Metric: r.cfg.Name, Model: m, Estimate: e,
				LagSeconds: float64(e.Lag) * r.cfg.Interval.Seconds()})
		}
	}
	slices.SortFunc(r.ests, func(a, b ModelEstimate) int { return strings.Compare(a.Model, b.Model) })
}

func (r *reader) status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.st
	if st.Value != nil {
		v := *st.Value
		st.Value = &v
	}
	return st
}

func (r *reader) estimates() ([]ModelEstimate, float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ests), r.value
}

// run reads every interval until ctx ends. time.Ticker drops ticks a
// slow read overran, but Timeout ≤ Interval, so none is.
func (r *reader) run(ctx context.Context) {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.step(ctx)
		}
	}
}

func appendBounded(s []float64, v float64, limit int) []float64 {
	if len(s) >= limit {
		s = append(s[:0], s[len(s)-limit+1:]...)
	}
	return append(s, v)
}

func allNaN(s []float64) bool {
	for _, v := range s {
		if !math.IsNaN(v) {
			return false
		}
	}
	return true
}

// promQuerier reads instant queries through client_golang's API client.
type promQuerier struct{ api promv1.API }

// NewPrometheus returns a Querier of the Prometheus server at url.
func NewPrometheus(url string) (Querier, error) {
	c, err := api.NewClient(api.Config{Address: url})
	if err != nil {
		return nil, err
	}
	return promQuerier{promv1.NewAPI(c)}, nil
}

// Query wants one number: a scalar or a vector of one series. Several
// series are refused rather than summed, since which sum is meant (a
// rate's sum, a ratio's average) is the query writer's call.
func (p promQuerier) Query(ctx context.Context, query string, ts time.Time) (float64, error) {
	v, _, _, err := p.api.Query(ctx, query, ts)
	if err != nil {
		return 0, fmt.Errorf("query %q: %w", query, err)
	}
	switch v := v.(type) {
	case *model.Scalar:
		return float64(v.Value), nil
	case model.Vector:
		if len(v) != 1 {
			return 0, fmt.Errorf("query %q: %d series, want 1 (wrap it in sum() or avg())", query, len(v))
		}
		return float64(v[0].Value), nil
	}
	return 0, fmt.Errorf("query %q: a %s, want a scalar or one series", query, v.Type())
}
