package main

import (
	"reflect"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/business"
)

// startBusiness builds the business metrics' readers (business_metrics:)
// and registers their metrics; its Run starts them. The latency side is
// each model's p99 over the reader's interval from the monitor's recent
// slices, grouped as the GPU correlation groups (successful inference
// calls), so "p99" means the same on /api/v1/models everywhere.
func startBusiness(cfgs []business.Config, mon *monitor.Registry, group func(monitor.SeriesKey) string, slice time.Duration,
	reg prometheus.Registerer) (*business.Hub, error) {
	if slice <= 0 {
		slice = monitor.DefaultSliceLength
	}
	p99 := func(window time.Duration) map[string]float64 {
		// Recent clamps to a minute of slices; a longer interval reads
		// its last minute, which is still one p99 per read.
		recent, _ := mon.Recent(int((window+slice/2)/slice), group)
		out := make(map[string]float64, len(recent))
		for m, rs := range recent {
			if st := rs.Stats[monitor.ComponentTotal]; st.Count > 0 {
				out[m] = st.P99.Seconds()
			}
		}
		return out
	}
	h, err := business.NewHub(cfgs, p99)
	if err != nil {
		return nil, err
	}
	if err := h.Register(reg); err != nil {
		return nil, err
	}
	return h, nil
}

// businessStep swaps the business metrics live: an unchanged metric
// keeps its reader and history, a changed or new one starts over, a
// removed one stops (business.Hub.Set). The config was validated before
// the steps run, so Set's only error (a client for a URL that parsed) is
// not expected.
func businessStep(h *business.Hub) reloadStep {
	return reloadStep{name: "business metrics", prepare: func(old, next *Config) (func() string, func(), error) {
		if h == nil || reflect.DeepEqual(old.BusinessMetrics, next.BusinessMetrics) {
			return nil, nil, nil
		}
		return func() string {
			if err := h.Set(next.BusinessMetrics); err != nil {
				return "business metrics not applied: " + err.Error()
			}
			names := make([]string, 0, len(next.BusinessMetrics))
			for _, c := range next.BusinessMetrics {
				names = append(names, c.Name)
			}
			return "business metrics: " + strings.Join(names, ",")
		}, nil, nil
	}}
}
