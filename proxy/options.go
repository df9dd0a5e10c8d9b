package proxy

import (
	"log/slog"
	"time"

	"github.com/infergate/infergate/budget"
	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proxy/route"
	"github.com/infergate/infergate/release"
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
	recorder        Recorder
	logger          *slog.Logger
	requestLogger   *slog.Logger
	logRequests     bool
	logInterval     time.Duration
	maxMsgSize      int
	now             func() time.Time
	batcher         Batcher
	router          *route.Router
	releases        *release.Set
	upstreamTimeout time.Duration
	maxInFlight     int
	tracing         *tracing
	frontDoor       FrontDoor
	inputShapes     bool
	flow            *FlowSettings
}

// WithFlowControl sets flow control's settings (flow.go); off unless
// s.Enabled. Proxy.SetFlowControl changes them live.
func WithFlowControl(s FlowSettings) Option {
	return optionFunc(func(o *options) { o.flow = &s })
}

// DefaultUpstreamTimeout is a suggested WithUpstreamTimeout: long enough
// for any inference call, short enough that a hung upstream cannot pile up
// calls without deadlines forever. The proxy applies none unless told.
const DefaultUpstreamTimeout = 60 * time.Second

// WithUpstreamTimeout gives a unary call whose client sent no deadline this
// deadline on its upstream call (batched or not). When it passes, the call
// ends with DEADLINE_EXCEEDED and a message naming the proxy's timeout.
// Zero, the default, means none. Streams are never bounded by it: health
// Watch and ModelStreamInfer are long-lived by design.
func WithUpstreamTimeout(d time.Duration) Option {
	return optionFunc(func(o *options) { o.upstreamTimeout = d })
}

// WithMaxInFlight caps the calls in progress through the proxy, of every
// method; a call beyond the cap is rejected at once with
// RESOURCE_EXHAUSTED (counted in Stats().RejectedInFlight). Zero, the
// default, means no cap.
func WithMaxInFlight(n int) Option {
	return optionFunc(func(o *options) { o.maxInFlight = n })
}

// WithLogInterval sets the least time between two log lines about
// failures of one kind (per upstream and code): the first is logged at
// once, the next line, an interval later, counts what was left out. Zero
// or less means DefaultLogInterval (10s).
func WithLogInterval(d time.Duration) Option {
	return optionFunc(func(o *options) { o.logInterval = d })
}

// WithRequestLogger logs one Info line per finished call to l, whatever
// the level of the logger given to WithLogger: a user who asks for request
// lines gets them. Nil, the default, logs no request lines (unless
// WithLogRequests).
func WithRequestLogger(l *slog.Logger) Option {
	return optionFunc(func(o *options) { o.requestLogger = l })
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

// WithLogRequests makes the proxy log one Info line per finished call to
// the WithLogger logger (so only when that logger passes Info; see
// WithRequestLogger for lines whatever the level). It needs WithLogger;
// New fails otherwise. Off by default: a line per request costs more than
// the rest of the hot path.
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

// WithRouter routes the inference calls of the models r knows (and the
// calls to upstreams with a breaker) through r: breakers, fallback,
// cascade, shedding, retries and hedges. Nil, the default, sends every
// call to the director's upstream. The proxy does not close r.
func WithRouter(r *route.Router) Option {
	return optionFunc(func(o *options) { o.router = r })
}

// WithReleases splits the calls of the models s has releases for between
// their stable target and their candidate, and feeds s every such call
// (release.go). s is the caller's: its Apply at a reload reaches the
// proxy at once.
func WithReleases(s *release.Set) Option {
	return optionFunc(func(o *options) { o.releases = s })
}

// FrontDoor bounds what clients can make the proxy hold: bytes
// held for calls, streams per connection, connections, idle time. Zero
// fields take the defaults documented on each.
type FrontDoor struct {
	// MaxBufferedBytes is the budget for every byte the proxy holds for
	// calls: requests read whole, frames queued for a slow reader. When it
	// is spent, senders get no more HTTP/2 window and wait. Zero means
	// DefaultMaxBufferedBytes.
	MaxBufferedBytes int64
	// MaxConcurrentStreams is the streams one client connection may have
	// open at once (advertised in SETTINGS; over it, REFUSED_STREAM).
	// Zero means DefaultMaxConcurrentStreams.
	MaxConcurrentStreams uint32
	// MaxConnections caps client connections; past it new ones are closed
	// at once. Zero means no cap.
	MaxConnections int
	// IdleTimeout closes, with GOAWAY first, a client connection that had
	// no stream open for this long. Zero means DefaultIdleTimeout;
	// negative means never.
	IdleTimeout time.Duration
}

const (
	// DefaultMaxBufferedBytes is the budget where no container memory
	// limit says otherwise: the byte budget's own default.
	DefaultMaxBufferedBytes = budget.DefaultLimit
	// DefaultMaxConcurrentStreams: a gRPC client opens streams up to the
	// limit and queues the rest itself, so a few hundred keep a busy
	// client's connection full while bounding what one connection holds.
	DefaultMaxConcurrentStreams = 256
	// DefaultIdleTimeout matches what load balancers in front of gRPC
	// servers commonly use for idle connections.
	DefaultIdleTimeout = 5 * time.Minute
)

// WithFrontDoor sets the limits of the client-facing side.
func WithFrontDoor(f FrontDoor) Option {
	return optionFunc(func(o *options) { o.frontDoor = f })
}

// withDefaults fills f's zero fields.
func (f FrontDoor) withDefaults() FrontDoor {
	if f.MaxBufferedBytes <= 0 {
		f.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if f.MaxConcurrentStreams == 0 {
		f.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if f.IdleTimeout == 0 {
		f.IdleTimeout = DefaultIdleTimeout
	}
	return f
}

// idle is the idle timeout as the transports take it: 0 for never.
func (f FrontDoor) idle() time.Duration { return max(f.IdleTimeout, 0) }
