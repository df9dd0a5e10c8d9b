package proxy

import (
	"fmt"
	"time"

	"github.com/infergate/infergate/proxy/failurelog"
	"github.com/infergate/infergate/proxy/pool"
	"github.com/infergate/infergate/proxy/route"
)

// Defaults and bounds of Config not given elsewhere in this package
// (DefaultMaxMsgSize, DefaultUpstreamTimeout, DefaultKeepaliveTime are).
const (
	// DefaultUpstreamConns is the number of pooled HTTP/2 connections to
	// an upstream.
	DefaultUpstreamConns = 2
	// DefaultMaxInFlight is Config's cap on calls in progress.
	DefaultMaxInFlight = 10000
	// MinKeepaliveTime is the least Config.UpstreamKeepaliveTime: gRPC
	// raises anything lower to 10s anyway, and saying so beats a silent
	// change.
	MinKeepaliveTime = 10 * time.Second
	// DefaultLogInterval is the least time between two log lines about
	// failures of one kind when WithLogInterval is not given.
	DefaultLogInterval = failurelog.DefaultInterval
)

// Config is the proxy's own settings as the top level of a YAML file
// spells them (a front end embeds it inline). Start from DefaultConfig and
// decode over it, so that an explicit 0 is seen: it means "none" for
// UpstreamTimeout and MaxInFlight and is refused elsewhere.
type Config struct {
	// MaxMessageBytes caps one gRPC message in either direction. Default
	// DefaultMaxMsgSize (64 MiB); tensors are big.
	MaxMessageBytes int `yaml:"max_message_bytes"`
	// UpstreamConns is the number of pooled HTTP/2 connections to an
	// upstream. Default DefaultUpstreamConns, at most pool.MaxConns.
	UpstreamConns int `yaml:"upstream_conns"`
	// UpstreamTimeout bounds unary calls that carry no client deadline;
	// they end with DEADLINE_EXCEEDED. Default DefaultUpstreamTimeout; 0
	// means none.
	UpstreamTimeout time.Duration `yaml:"upstream_timeout"`
	// UpstreamKeepaliveTime is the interval of HTTP/2 pings to the upstream
	// while calls are in flight and no data flows. Default
	// DefaultKeepaliveTime, just over the 5 minutes gRPC servers (grpc-go,
	// and gRPC core under Triton and TF-Serving) allow by default: they
	// close connections that ping more often. Lower it only for servers
	// that allow it; at least MinKeepaliveTime.
	UpstreamKeepaliveTime time.Duration `yaml:"upstream_keepalive_time"`
	// UpstreamDNSServer is the DNS server (host:port) that resolves the
	// name of a dns:///name:port upstream, whose addresses are its
	// endpoints (re-resolved every 5 s); empty means the system's
	// resolver. Consul's DNS interface (:8600) is one.
	UpstreamDNSServer string `yaml:"upstream_dns_server"`
	// MaxInFlight caps the calls in progress through the proxy; beyond it
	// calls are rejected at once with RESOURCE_EXHAUSTED. Default
	// DefaultMaxInFlight; 0 means no cap.
	MaxInFlight int `yaml:"max_in_flight"`
	// FastPath puts the relay (Proxy.Relay) in front of the proxy's
	// grpc.Server: it ends every client connection, TLS included,
	// forwards plain unary calls frame by frame and serves the others
	// itself, handing streams on to the grpc.Server. Off, every call takes
	// the gRPC path. Default true.
	FastPath bool `yaml:"fast_path"`
}

// DefaultConfig returns the Config of the documented defaults.
func DefaultConfig() Config {
	return Config{
		MaxMessageBytes:       DefaultMaxMsgSize,
		UpstreamConns:         DefaultUpstreamConns,
		UpstreamTimeout:       DefaultUpstreamTimeout,
		UpstreamKeepaliveTime: DefaultKeepaliveTime,
		MaxInFlight:           DefaultMaxInFlight,
		FastPath:              true,
	}
}

// Problems returns one error per bad field, each starting with the field's
// YAML name ("upstream_conns: must be between 1 and 64, got 0").
func (c Config) Problems() []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.MaxMessageBytes < 1 {
		bad("max_message_bytes", "must be positive, got %d", c.MaxMessageBytes)
	}
	if c.UpstreamConns < 1 || c.UpstreamConns > pool.MaxConns {
		bad("upstream_conns", "must be between 1 and %d, got %d", pool.MaxConns, c.UpstreamConns)
	}
	if c.UpstreamTimeout < 0 {
		bad("upstream_timeout", "must be 0 (none) or positive, got %s", c.UpstreamTimeout)
	}
	if c.UpstreamKeepaliveTime < MinKeepaliveTime {
		bad("upstream_keepalive_time", "must be at least %s, got %s", MinKeepaliveTime, c.UpstreamKeepaliveTime)
	}
	if err := route.InFlightCapProblem(c.MaxInFlight); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// Options returns the Proxy options of c: message size, upstream timeout,
// in-flight cap. The upstream settings go to DialUpstream.
func (c Config) Options() []Option {
	return []Option{WithMaxMsgSize(c.MaxMessageBytes), WithUpstreamTimeout(c.UpstreamTimeout), WithMaxInFlight(c.MaxInFlight)}
}
