package notify

import (
	"net/http"
	"time"
)

// Test-only entry points: infergate builds receivers with [Build] and sets
// only the logger and the metrics, so the knobs below
// exist for the package's own tests.

// NewSender starts a Sender that delivers to n, labelled receiver and
// integration in logs and metrics. Options other than WithHTTPClient
// apply. Stop it with Close.
func NewSender(receiver, integration string, n Notifier, opts ...Option) *Sender {
	return newSender(receiver, integration, n, newOptions(opts))
}

// Senders returns the receiver's senders, one per integration, in config
// order: webhook, alertmanager, slack, wecom, email, log.
func (r *Receiver) Senders() []*Sender { return r.senders }

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

// WithMaxAttempts sets how many attempts a message gets at most.
func WithMaxAttempts(n int) Option { return optionFunc(func(o *options) { o.maxAttempts = n }) }
