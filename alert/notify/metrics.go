package notify

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Drop reasons, the reason label of
// infergate_alert_notifications_dropped_total.
const (
	reasonQueueFull    = "queue_full"
	reasonExpired      = "expired"
	reasonNotRetryable = "not_retryable"
	reasonClosed       = "closed"
	reasonMaxAttempts  = "max_attempts"
)

var dropReasons = []string{reasonQueueFull, reasonExpired, reasonNotRetryable, reasonClosed, reasonMaxAttempts}

// Metrics holds the notification metrics of any number of receivers. A nil
// *Metrics records nothing.
type Metrics struct {
	notifications *prometheus.CounterVec
	attempts      *prometheus.CounterVec
	dropped       *prometheus.CounterVec
	queueLength   *prometheus.GaugeVec
}

// NewMetrics creates the metrics and registers them on reg; a nil reg
// leaves them unregistered. When reg already holds them (another
// NewMetrics on the same registry), the registered ones are shared. It
// panics on any other registration error, like MustRegister.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		notifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "infergate_alert_notifications_total",
			Help: "Alert notification messages by final outcome: success, or failure (dropped for any reason). Every message is counted once.",
		}, []string{"receiver", "integration", "outcome"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "infergate_alert_notification_attempts_total",
			Help: "Alert notification delivery attempts by outcome: success or error.",
		}, []string{"receiver", "integration", "outcome"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "infergate_alert_notifications_dropped_total",
			Help: "Alert notification messages given up, by reason: queue_full (oldest dropped for a new one), expired (older than the maximum age), not_retryable, max_attempts, closed (sender stopped; with a state file the message stays owed and is sent after the restart).",
		}, []string{"receiver", "integration", "reason"}),
		queueLength: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "infergate_alert_notification_queue_length",
			Help: "Alert notification messages waiting in a sender's queue.",
		}, []string{"receiver", "integration"}),
	}
	if reg == nil {
		return m
	}
	m.notifications = register(reg, m.notifications)
	m.attempts = register(reg, m.attempts)
	m.dropped = register(reg, m.dropped)
	m.queueLength = register(reg, m.queueLength)
	return m
}

// register registers c, or returns the equal collector already registered.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	panic(err)
}

// senderMetrics are one Sender's series, resolved once. A nil
// *senderMetrics records nothing.
type senderMetrics struct {
	success, failure     prometheus.Counter
	attemptOK, attemptKO prometheus.Counter
	dropped              map[string]prometheus.Counter
	queueLength          prometheus.Gauge
}

// forSender resolves the series of one (receiver, integration) and
// creates them at zero, so that rates and alerts on them work from the
// start.
func (m *Metrics) forSender(receiver, integration string) *senderMetrics {
	if m == nil {
		return nil
	}
	sm := &senderMetrics{
		success:     m.notifications.WithLabelValues(receiver, integration, "success"),
		failure:     m.notifications.WithLabelValues(receiver, integration, "failure"),
		attemptOK:   m.attempts.WithLabelValues(receiver, integration, "success"),
		attemptKO:   m.attempts.WithLabelValues(receiver, integration, "error"),
		dropped:     make(map[string]prometheus.Counter, len(dropReasons)),
		queueLength: m.queueLength.WithLabelValues(receiver, integration),
	}
	for _, r := range dropReasons {
		sm.dropped[r] = m.dropped.WithLabelValues(receiver, integration, r)
	}
	return sm
}

func (sm *senderMetrics) attempt(ok bool) {
	if sm == nil {
		return
	}
	if ok {
		sm.attemptOK.Inc()
	} else {
		sm.attemptKO.Inc()
	}
}

func (sm *senderMetrics) delivered() {
	if sm != nil {
		sm.success.Inc()
	}
}

func (sm *senderMetrics) drop(reason string) {
	if sm != nil {
		sm.failure.Inc()
		sm.dropped[reason].Inc()
	}
}

func (sm *senderMetrics) queued(n int) {
	if sm != nil {
		sm.queueLength.Set(float64(n))
	}
}
