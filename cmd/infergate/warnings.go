package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
)

// startWarnings logs, at start, settings that work but expose more than
// the operator may think, as ssh warns of a key file others can read:
// Go's profiler on an admin listener off loopback (anyone who reaches it
// can read the process's memory profile and stall it with a CPU
// profile), and an admin token file readable by group or others.
func startWarnings(c Config, log *slog.Logger) {
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
