package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"

	"github.com/infergate/infergate/batcher"
)

// startWarnings logs, at start, settings that work but expose more than
// the operator may think, as ssh warns of a key file others can read:
// Go's profiler on an admin listener off loopback (anyone who reaches it
// can read the process's memory profile and stall it with a CPU
// profile), and an admin token file readable by group or others.
func startWarnings(c Config, log *slog.Logger) {
	for _, w := range effectWarnings(c) {
		log.Warn("configuration: " + w)
	}
	if c.Pprof && !loopbackAddr(c.Admin) {
		log.Warn("admin: --pprof serves /debug/pprof/ without a token on a listener that is not loopback; bind admin to 127.0.0.1 or turn pprof off", "admin", c.Admin)
	}
	if c.AdminTokenFile != "" {
		if fi, err := os.Stat(c.AdminTokenFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
			log.Warn("admin: the admin token file is readable by group or others; chmod 600 it", "file", c.AdminTokenFile, "mode", fmt.Sprintf("%#o", fi.Mode().Perm()))
		}
	}
}

// loopbackAddr reports whether the host of addr is a loopback address or
// localhost; an empty host (all interfaces) or any other name is not.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// effectWarnings names the settings that are valid but have no effect as
// configured, so that an operator who set one is not left thinking it
// works: batching knobs with batching off, a fallback (or another route
// setting) of a model no route can serve. They are logged at start and
// at each reload, and printed by --check-config.
func effectWarnings(c Config) []string {
	var out []string
	bc := c.Batching.Config()
	if len(bc.Models) == 0 && bc.Auto == nil {
		def := batcher.DefaultSettings()
		var knobs []string
		add := func(field string, set bool) {
			if set {
				knobs = append(knobs, "batching."+field)
			}
		}
		s := c.Batching
		// A zero value is no setting either (a Config built in code).
		add("max_size", s.MaxSize != 0 && s.MaxSize != def.MaxSize)
		add("preferred_sizes", len(s.PreferredSizes) > 0)
		add("max_delay", s.MaxDelay != 0 && s.MaxDelay != def.MaxDelay)
		add("queue_size", s.QueueSize != 0 && s.QueueSize != def.QueueSize)
		add("slo", s.SLO != 0 && s.SLO != def.SLO)
		add("slots", s.Slots != 0 && s.Slots != def.Slots)
		add("retry_unbatched", s.RetryUnbatched)
		add("shed", s.Shed)
		add("key_headers", len(s.KeyHeaders) > 0)
		// Batching is off for every model here, so each listed one is
		// a knob without effect.
		for _, name := range sortedKeys(s.Models) {
			knobs = append(knobs, "batching.models."+name)
		}
		if len(knobs) > 0 {
			why := "batching.mode is off"
			if s.AllOff && s.Mode == batcher.Off.String() {
				why = "--batching off turns every model off"
			}
			out = append(out, fmt.Sprintf("%s set, but %s: no call is batched, so they have no effect (--batching static|adaptive turns batching on)", strings.Join(knobs, ", "), why))
		}
	}
	// Hedging sends a slow call to the route's fallback: without one,
	// hedge_after does nothing.
	for _, r := range c.Routes {
		if r.Fallback == nil && r.HedgeAfter != "" && r.HedgeAfter != "off" {
			out = append(out, fmt.Sprintf("routes[%s].hedge_after set, but the route has no fallback to hedge to: it has no effect", r.Model))
		}
	}
	slices.Sort(out)
	return out
}
