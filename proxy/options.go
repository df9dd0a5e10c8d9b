package proxy

import (
	"log/slog"
	"time"

	"github.com/infergate/infergate/batcher"
	"github.com/infergate/infergate/monitor"
)

// DefaultMaxMsgSize is the largest message, in bytes, the proxy receives or
// sends when WithMaxMsgSize is not given: 64 MiB, well above gRPC's 4 MiB
// default because inference tensors are large (Triton itself allows up to
// INT32_MAX).
const DefaultMaxMsgSize = 64 << 20

// Recorder receives the proxy's measurements. *monitor.Registry implements
// it. Both methods are called concurrently from every in-flight call, so an
// implementation must be safe for concurrent use and should not block.
type Recorder interface {
	// Record takes one finished call.
	Record(key monitor.SeriesKey, sm monitor.Sample)
	// InFlight returns the gauge of calls in flight to upstream. The proxy
	// caches the result per Upstream, so it is called about once each.
	InFlight(upstream string) *monitor.Gauge
}

var _ Recorder = (*monitor.Registry)(nil)

// Option configures a Proxy. Options are sealed: build them with the With
// functions of this package.
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	recorder    Recorder
	logger      *slog.Logger
	logRequests bool
	maxMsgSize  int
	now         func() time.Time
	batcher     *batcher.Batcher
}

// WithRecorder makes the proxy measure every call into r. Nil, the default,
// measures nothing.
func WithRecorder(r Recorder) Option {
	return optionFunc(func(o *options) { o.recorder = r })
}

// WithLogger sets where the proxy logs. Nil, the default, discards logs. The
// proxy logs its own failures (an unreachable upstream, a director error) at
// Warn and nothing for a successful call unless WithLogRequests is set.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(o *options) { o.logger = l })
}

// WithLogRequests makes the proxy log one Info line per finished call. It
// needs WithLogger; New fails otherwise. Off by default: a line per request
// costs more than the rest of the hot path.
func WithLogRequests(on bool) Option {
	return optionFunc(func(o *options) { o.logRequests = on })
}

// WithMaxMsgSize sets the largest message, in bytes, the proxy accepts from
// clients and upstreams and sends to them. Zero or negative means
// DefaultMaxMsgSize. A larger message fails its call with
// RESOURCE_EXHAUSTED; other calls are not affected.
func WithMaxMsgSize(n int) Option {
	return optionFunc(func(o *options) { o.maxMsgSize = n })
}

// WithClock sets the clock the proxy reads to time calls. Nil, the default,
// means time.Now. Tests use it to get exact durations.
func WithClock(now func() time.Time) Option {
	return optionFunc(func(o *options) { o.now = now })
}
