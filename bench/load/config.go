package load

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/infergate/infergate/proto/kservepb"
)

// Defaults applied by Config.Validate to zero fields.
const (
	DefaultMaxInFlight = 10000
	DefaultTimeout     = 10 * time.Second
	// MaxMessageSize is the call limit for both directions; model payloads
	// easily pass grpc's 4 MiB default.
	MaxMessageSize = 256 << 20
)

// Arrival is the gap distribution of the open-loop timeline.
type Arrival int

const (
	// Fixed sends at exactly 1/Rate intervals.
	Fixed Arrival = iota
	// Poisson draws exponential gaps with mean 1/Rate.
	Poisson
)

// String returns "fixed" or "poisson".
func (a Arrival) String() string {
	if a == Poisson {
		return "poisson"
	}
	return "fixed"
}

// ParseArrival reads "fixed" or "poisson".
func ParseArrival(s string) (Arrival, error) {
	switch strings.ToLower(s) {
	case "fixed", "constant", "":
		return Fixed, nil
	case "poisson", "exp":
		return Poisson, nil
	}
	return 0, fmt.Errorf("load: arrival %q: want fixed or poisson", s)
}

// Mode says whether a run is closed or open loop.
type Mode string

// The two modes; a Config with Rate > 0 is open loop.
const (
	Closed Mode = "closed"
	Open   Mode = "open"
)

// Config describes one run. Zero values are documented defaults.
type Config struct {
	// Label names the run in reports; empty is allowed.
	Label string
	// Target is a loopback host:port; other hosts are rejected because the
	// generator is a benchmarking tool, not a traffic source for real hosts.
	Target string
	// Payload is the request sent on every call; required.
	Payload *Payload
	// Stream sends the Payload, a KServe ModelInferRequest, on
	// ModelStreamInfer streams instead of ModelInfer, for decoupled
	// models that answer one request with many responses: a closed-loop
	// caller holds one stream and sends a request (with an id) when the
	// previous one has its final response; an open-loop request gets a
	// stream of its own. Result.Stream then holds each request's TTFR,
	// the gaps between its responses and their number.
	Stream bool

	// Concurrency is the number of closed-loop callers; used when Rate is 0.
	// Zero with Rate 0 means 1.
	Concurrency int
	// Rate > 0 selects the open loop, in requests per second.
	Rate float64
	// Arrival is the open-loop gap distribution; zero is Fixed.
	Arrival Arrival
	// Seed seeds Poisson gaps; zero means 1, so runs are reproducible.
	Seed uint64
	// MaxInFlight caps outstanding open-loop requests; zero means
	// DefaultMaxInFlight. When the cap is reached the schedule waits for a
	// slot, counts the request as Late, and still measures it from its
	// intended time.
	MaxInFlight int

	// Duration is the measured time after Warmup. Zero means no time limit,
	// which is only allowed when Requests is set.
	Duration time.Duration
	// Warmup runs the same load first without recording it; zero means none.
	Warmup time.Duration
	// Requests, when positive, stops the run after that many measured
	// requests have been sent.
	Requests int64
	// Timeout bounds each request; zero means DefaultTimeout. It also bounds
	// how long Run waits for stragglers after the schedule ends.
	Timeout time.Duration
	// Conns is the number of client connections requests are spread over;
	// zero means 1.
	Conns int
	// Metadata are request headers every call carries (a tenant, a
	// priority); nil none.
	Metadata map[string]string

	// Progress, when non-nil, receives a status line every second on runs
	// longer than three seconds.
	Progress io.Writer
	// OnLate, when non-nil, is called from the scheduler each time an
	// open-loop request finds every in-flight slot busy, with the request's
	// intended send time. It must not block.
	OnLate func(intended time.Time)
}

// Mode returns Open when Rate > 0, else Closed.
func (c *Config) Mode() Mode {
	if c.Rate > 0 {
		return Open
	}
	return Closed
}

// Validate fills defaults and returns every problem found, joined.
func (c *Config) Validate() error {
	if c.Concurrency == 0 && c.Rate == 0 {
		c.Concurrency = 1
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Conns == 0 {
		c.Conns = 1
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	var errs []error
	if err := CheckLoopback(c.Target); err != nil {
		errs = append(errs, err)
	}
	if c.Payload == nil || c.Payload.Method == "" {
		errs = append(errs, errors.New("load: payload: required"))
	} else if c.Stream && c.Payload.Method != kservepb.GRPCInferenceService_ModelInfer_FullMethodName {
		errs = append(errs, errors.New("load: stream: needs a KServe payload (ModelInferRequest)"))
	}
	if c.Concurrency < 0 {
		errs = append(errs, fmt.Errorf("load: concurrency %d: must not be negative", c.Concurrency))
	}
	if c.Rate < 0 {
		errs = append(errs, fmt.Errorf("load: rate %g: must not be negative", c.Rate))
	}
	if c.MaxInFlight < 0 {
		errs = append(errs, fmt.Errorf("load: max in flight %d: must not be negative", c.MaxInFlight))
	}
	if c.Duration < 0 || c.Warmup < 0 || c.Timeout < 0 {
		errs = append(errs, errors.New("load: duration, warmup and timeout must not be negative"))
	}
	if c.Duration == 0 && c.Requests <= 0 {
		errs = append(errs, errors.New("load: duration: required unless requests is set"))
	}
	if c.Conns < 0 {
		errs = append(errs, fmt.Errorf("load: conns %d: must not be negative", c.Conns))
	}
	return errors.Join(errs...)
}

// CheckLoopback returns an error unless addr is host:port with a loopback
// host (127.0.0.0/8, ::1 or localhost).
func CheckLoopback(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("load: target %q: %w", addr, err)
	}
	if port == "" {
		return fmt.Errorf("load: target %q: missing port", addr)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("load: target %q: only loopback addresses are allowed", addr)
}
