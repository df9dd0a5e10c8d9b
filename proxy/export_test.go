package proxy

import "time"

// WithClock sets the clock the proxy reads to time calls (time.Now
// otherwise): tests get exact durations.
func WithClock(now func() time.Time) Option {
	return optionFunc(func(o *options) { o.now = now })
}
