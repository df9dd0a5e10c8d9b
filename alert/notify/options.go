package notify

import (
	"log/slog"
	"net/http"
	"time"
)

// Defaults of the options.
const (
	DefaultQueueSize      = 1000
	DefaultBackoffInitial = time.Second
	DefaultBackoffMax     = time.Minute
	DefaultMaxAge         = time.Hour
	// DefaultMaxAttempts bounds the attempts at one message, whatever
	// its age.
	DefaultMaxAttempts = 100
)

// Option configures [Build]. Options are sealed: build them with the
// With functions of this package. The options only tests set (HTTP
// client, backoff, queue size, maximum age, clock) are in
// export_test.go: infergate itself sets the logger and the metrics.
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	logger         *slog.Logger
	metrics        *Metrics
	client         *http.Client
	backoffInitial time.Duration
	backoffMax     time.Duration
	queueSize      int
	maxAge         time.Duration
	maxAttempts    int
	now            func() time.Time
	// jitter shortens a backoff wait; tests make it exact.
	jitter func(time.Duration) time.Duration
}

func newOptions(opts []Option) options {
	o := options{
		backoffInitial: DefaultBackoffInitial,
		backoffMax:     DefaultBackoffMax,
		queueSize:      DefaultQueueSize,
		maxAge:         DefaultMaxAge,
		maxAttempts:    DefaultMaxAttempts,
	}
	for _, opt := range opts {
		opt.apply(&o)
	}
	if o.client == nil {
		// Not http.DefaultClient: its settings are global and mutable.
		o.client = &http.Client{}
	}
	if o.now == nil {
		o.now = time.Now
	}
	if o.jitter == nil {
		o.jitter = jitter
	}
	return o
}

// senderLogger is where a Sender reports drops: the given logger, or
// nowhere, like the rest of infergate.
func (o *options) senderLogger() *slog.Logger {
	if o.logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.logger
}

// WithLogger sets the logger for dropped messages and for the log
// integration. Without it drops are not logged and the log integration
// writes to slog.Default(), since enabling it asks for output.
func WithLogger(l *slog.Logger) Option { return optionFunc(func(o *options) { o.logger = l }) }

// WithMetrics records the notification metrics in m.
func WithMetrics(m *Metrics) Option { return optionFunc(func(o *options) { o.metrics = m }) }
