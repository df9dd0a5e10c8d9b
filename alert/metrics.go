package alert

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// engineMetrics are the engine's own metrics; a nil registerer gives
// unregistered (working, unexported) ones.
type engineMetrics struct {
	active        *prometheus.GaugeVec
	evalSeconds   prometheus.Summary
	evaluations   prometheus.Counter
	notifications *prometheus.CounterVec
	shown         map[[3]string]float64 // label values of active, as last set
}

func newEngineMetrics(reg prometheus.Registerer) *engineMetrics {
	m := &engineMetrics{
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "infergate_alerts",
			Help: "Active alerts by rule, state (pending, firing) and severity.",
		}, []string{"alertname", "state", "severity"}),
		evalSeconds: prometheus.NewSummary(prometheus.SummaryOpts{
			Name:       "infergate_alert_evaluation_seconds",
			Help:       "Time one evaluation of every rule took.",
			Objectives: map[float64]float64{0.5: 0.05, 0.99: 0.001},
			MaxAge:     time.Minute,
		}),
		evaluations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "infergate_alert_evaluations_total",
			Help: "Evaluations of the rules.",
		}),
		notifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "infergate_alert_group_notifications_total",
			Help: "Notifications the dispatcher handed to each receiver (one per group flush).",
		}, []string{"receiver"}),
	}
	if reg != nil {
		reg.MustRegister(m.active, m.evalSeconds, m.evaluations, m.notifications)
	}
	return m
}

func (m *engineMetrics) observe(rules []*Rule, alerts map[string]*instance, took time.Duration) {
	m.evaluations.Inc()
	m.evalSeconds.Observe(took.Seconds())
	// Counted aside, then set: a scrape in the middle sees each gauge at
	// its old or its new value, never reset to nothing (an absent() rule
	// would fire, a graph would gap).
	counts := make(map[[3]string]float64, 2*len(rules))
	// Zeros for every rule, so a dashboard sees 0 rather than no data.
	for _, r := range rules {
		for _, st := range []State{StatePending, StateFiring} {
			counts[[3]string{r.Name, string(st), r.Severity}] = 0
		}
	}
	for _, a := range alerts {
		if a.state == StateResolved {
			continue
		}
		counts[[3]string{a.rule.Name, string(a.state), a.labels["severity"]}]++
	}
	for k, v := range counts {
		m.active.WithLabelValues(k[0], k[1], k[2]).Set(v)
	}
	for k := range m.shown {
		if _, ok := counts[k]; !ok {
			m.active.DeleteLabelValues(k[0], k[1], k[2])
		}
	}
	m.shown = counts
}

func (m *engineMetrics) sent(receiver string) { m.notifications.WithLabelValues(receiver).Inc() }
