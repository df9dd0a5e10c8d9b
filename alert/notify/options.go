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
)

// Option configures [Build] and [NewSender]. Options are sealed: build
// them with the With functions of this package.
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

// WithHTTPClient sets the client of the HTTP integrations, e.g. for a
// proxy or custom TLS roots. Per-attempt timeouts come from the
// integration's config, not from the client. Default: a plain
// &http.Client{}.
func WithHTTPClient(c *http.Client) Option { return optionFunc(func(o *options) { o.client = c }) }

// WithBackoff sets the wait before the first retry, doubled after every
// failure up to maximum. Non-positive values keep the defaults (1s, 1m);
// a maximum below initial is raised to it.
func WithBackoff(initial, maximum time.Duration) Option {
	return optionFunc(func(o *options) {
		if initial > 0 {
			o.backoffInitial = initial
		}
		if maximum > 0 {
			o.backoffMax = maximum
		}
		o.backoffMax = max(o.backoffMax, o.backoffInitial)
	})
}

// WithQueueSize sets how many messages a Sender holds waiting (default
// 1000); beyond it the oldest is dropped. Values below 1 keep the default.
func WithQueueSize(n int) Option {
	return optionFunc(func(o *options) {
		if n > 0 {
			o.queueSize = n
		}
	})
}

// WithMaxAge sets how long after Send a message may still be delivered
// (default 1h); an older one is dropped as expired instead of being
// (re)tried. Non-positive values keep the default.
func WithMaxAge(d time.Duration) Option {
	return optionFunc(func(o *options) {
		if d > 0 {
			o.maxAge = d
		}
	})
}

// WithNow sets the clock used for message age, e-mail dates and
// Alertmanager's endsAt. Default time.Now.
func WithNow(now func() time.Time) Option { return optionFunc(func(o *options) { o.now = now }) }
