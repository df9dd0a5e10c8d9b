package main

import (
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/infergate/infergate/internal/memlimit"
	"github.com/infergate/infergate/proxy"
)

// FrontDoorConfig is the front_door section: what clients can make the
// proxy hold, passed to proxy.WithFrontDoor.
type FrontDoorConfig struct {
	// MaxBufferedBytes is the budget for every byte held for calls. 0
	// (the default) is auto: a quarter of the container's memory limit,
	// at least MinAutoBufferedBytes, or proxy.DefaultMaxBufferedBytes
	// where there is no limit (bufferBudget).
	MaxBufferedBytes int64 `yaml:"max_buffered_bytes"`
	// MaxConcurrentStreams is the streams one client connection may have
	// open at once. Default proxy.DefaultMaxConcurrentStreams.
	MaxConcurrentStreams int `yaml:"max_concurrent_streams"`
	// MaxConnections caps client connections. Default 0: no cap.
	MaxConnections int `yaml:"max_connections"`
	// IdleTimeout closes, GOAWAY first, a client connection without a
	// stream for this long. Default proxy.DefaultIdleTimeout; 0 is that
	// default too, negative is never.
	IdleTimeout time.Duration `yaml:"idle_timeout"`

	// fromFlag records that --max-buffered-bytes set MaxBufferedBytes,
	// for the start line's account of where the budget came from.
	fromFlag bool
}

// MinAutoBufferedBytes is the least budget taken from a container limit:
// below it a few big requests could not be held at all.
const MinAutoBufferedBytes = 32 << 20

func defaultFrontDoor() FrontDoorConfig {
	return FrontDoorConfig{
		MaxConcurrentStreams: proxy.DefaultMaxConcurrentStreams,
		IdleTimeout:          proxy.DefaultIdleTimeout,
	}
}

// Problems returns one error per bad field of the front_door section.
func (c FrontDoorConfig) Problems() []error {
	var errs []error
	if c.MaxBufferedBytes < 0 {
		errs = append(errs, fmt.Errorf("max_buffered_bytes: must be 0 (auto) or positive, got %d", c.MaxBufferedBytes))
	}
	if c.MaxConcurrentStreams < 1 || c.MaxConcurrentStreams > math.MaxUint32 {
		errs = append(errs, fmt.Errorf("max_concurrent_streams: must be between 1 and %d, got %d", uint32(math.MaxUint32), c.MaxConcurrentStreams))
	}
	if c.MaxConnections < 0 {
		errs = append(errs, fmt.Errorf("max_connections: must be 0 (no cap) or positive, got %d", c.MaxConnections))
	}
	return errs
}

// Budget sources, as the start line names them.
const (
	budgetFlag      = "flag"
	budgetFile      = "config"
	budgetContainer = "container_limit/4"
	budgetDefault   = "default"
)

// bufferBudget is the one rule for the memory budget: the configured
// bytes when set; else, with a container memory limit, a quarter of it
// (the rest is for Go's heap beyond held bytes, goroutines, the GC's
// headroom under a 90% soft limit) but at least MinAutoBufferedBytes;
// else proxy.DefaultMaxBufferedBytes. It returns the bytes and where
// they came from.
func bufferBudget(c FrontDoorConfig, containerLimit int64) (int64, string) {
	switch {
	case c.MaxBufferedBytes > 0 && c.fromFlag:
		return c.MaxBufferedBytes, budgetFlag
	case c.MaxBufferedBytes > 0:
		return c.MaxBufferedBytes, budgetFile
	case containerLimit > 0:
		return max(containerLimit/4, MinAutoBufferedBytes), budgetContainer
	}
	return proxy.DefaultMaxBufferedBytes, budgetDefault
}

// frontDoor is the proxy's front door for c under the memory limit mem.
func (c FrontDoorConfig) frontDoor(mem memlimit.Result) (proxy.FrontDoor, string) {
	budget, source := bufferBudget(c, mem.Limit)
	return proxy.FrontDoor{
		MaxBufferedBytes:     budget,
		MaxConcurrentStreams: uint32(c.MaxConcurrentStreams),
		MaxConnections:       c.MaxConnections,
		IdleTimeout:          c.IdleTimeout,
	}, source
}

// budgetWarnings warns, at start, of a budget set above half the
// container's memory limit: the heap beyond the held bytes and the GC's
// headroom need the rest, so the kernel could kill the process before
// the budget makes any sender wait.
func budgetWarnings(budget int64, source string, mem memlimit.Result, log *slog.Logger) {
	if mem.Limit > 0 && budget > mem.Limit/2 {
		log.Warn("front_door: the memory budget is more than half the container's memory limit; the process may be OOM-killed before senders are made to wait (auto is a quarter)",
			"buffer_budget", budget, "buffer_budget_source", source, "memory_limit", mem.Limit)
	}
}
