package notify

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

var (
	t0    = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tEnds = t0.Add(10 * time.Minute)
)

// testMessage is a group of one firing and one resolved alert for model
// resnet50.
func testMessage() *Message {
	return &Message{
		Receiver:    "oncall",
		GroupKey:    `{}:{model="resnet50"}`,
		GroupLabels: map[string]string{"model": "resnet50"},
		Status:      StatusFiring,
		ExternalURL: "http://infergate:8080",
		Alerts: []Alert{
			{
				Name:     "HighLatency",
				Status:   StatusFiring,
				Severity: "critical",
				Labels:   map[string]string{"alertname": "HighLatency", "severity": "critical", "model": "resnet50"},
				Annotations: map[string]string{
					"summary":     "p99 above SLO",
					"description": "p99 latency of resnet50 is 812ms",
				},
				StartsAt:     t0,
				Fingerprint:  "a1b2c3",
				Evidence:     "p99 812ms over 120 calls, baseline 95ms, GPU0 97%",
				Actions:      []string{"fallback resnet50 -> resnet18"},
				GeneratorURL: "http://infergate:8080/alerts",
			},
			{
				Name:         "ErrorRate",
				Status:       StatusResolved,
				Severity:     "warning",
				Labels:       map[string]string{"alertname": "ErrorRate", "severity": "warning", "model": "resnet50"},
				Annotations:  map[string]string{"summary": "errors above 5%", "description": "error rate of resnet50"},
				StartsAt:     t0.Add(-time.Hour),
				EndsAt:       tEnds,
				Fingerprint:  "d4e5f6",
				GeneratorURL: "http://infergate:8080/alerts",
			},
		},
	}
}

// counter reads one series of a counter vector.
func counter(t *testing.T, v *prometheus.CounterVec, labels ...string) float64 {
	t.Helper()
	var m dto.Metric
	if err := v.WithLabelValues(labels...).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// gauge reads one series of a gauge vector.
func gauge(t *testing.T, v *prometheus.GaugeVec, labels ...string) float64 {
	t.Helper()
	var m dto.Metric
	if err := v.WithLabelValues(labels...).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}
