// Package failurelog is the proxy's rate-limited log of failed calls:
// per (upstream, code) the first failure is logged at once, later ones
// within the interval are only counted, and the count goes out in one
// line when the interval ends.
package failurelog

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
)

// DefaultInterval is the least time between two log lines about
// failures of one kind when none is given.
const DefaultInterval = 10 * time.Second

// Log summarises repeated failures: per (upstream, code) the first
// failure is logged at once, later ones within the interval are only
// counted, and the count goes out in one line when the interval ends. An
// upstream that is down for a few seconds makes a few lines, not one per
// call. Only failing calls take its lock.
type Log struct {
	log      *slog.Logger
	interval time.Duration
	now      func() time.Time
	// after schedules the summary line; time.AfterFunc, replaced in tests.
	after func(d time.Duration, f func()) stopper

	mu     sync.Mutex
	kinds  map[Kind]*failureCount
	closed bool
}

type stopper interface{ Stop() bool }

// Kind is one kind of failure: what failed, where, with which code.
type Kind struct {
	Msg      string // what failed: "upstream call failed", "no route"
	Upstream string
	Code     codes.Code
}

type failureCount struct {
	logged     time.Time // when the last line went out
	suppressed int64     // failures since then, not logged
	last       []slog.Attr
	timer      stopper // pending summary, nil when none
}

// New returns a Log writing to l at most one line per kind and interval
// (DefaultInterval when 0 or less), reading the time from now.
func New(l *slog.Logger, interval time.Duration, now func() time.Time) *Log {
	if interval <= 0 {
		interval = DefaultInterval
	}
	return &Log{
		log: l, interval: interval, now: now,
		after: func(d time.Duration, f func()) stopper { return time.AfterFunc(d, f) },
		kinds: map[Kind]*failureCount{},
	}
}

// maxFailureKinds bounds the map: upstream names and codes are the
// proxy's own, but a director could invent upstreams.
const maxFailureKinds = 1024

// Note records one failure with its attributes.
func (f *Log) Note(ctx context.Context, k Kind, attrs ...slog.Attr) {
	if !f.log.Enabled(ctx, slog.LevelWarn) {
		return
	}
	now := f.now()
	f.mu.Lock()
	c := f.kinds[k]
	if c == nil {
		if len(f.kinds) >= maxFailureKinds {
			f.mu.Unlock()
			return
		}
		c = &failureCount{}
		f.kinds[k] = c
	}
	if c.logged.IsZero() || now.Sub(c.logged) >= f.interval {
		suppressed := c.suppressed
		c.logged, c.suppressed, c.last = now, 0, nil
		if c.timer != nil {
			c.timer.Stop()
			c.timer = nil
		}
		f.mu.Unlock()
		f.write(ctx, k, suppressed, attrs)
		return
	}
	c.suppressed++
	c.last = attrs
	if c.timer == nil && !f.closed {
		c.timer = f.after(c.logged.Add(f.interval).Sub(now), func() { f.flush(k) })
	}
	f.mu.Unlock()
}

// flush writes the summary of k's failures counted since its last line.
func (f *Log) flush(k Kind) {
	f.mu.Lock()
	c := f.kinds[k]
	if c == nil || c.suppressed == 0 {
		if c != nil {
			c.timer = nil
		}
		f.mu.Unlock()
		return
	}
	suppressed, attrs := c.suppressed, c.last
	c.logged, c.suppressed, c.last, c.timer = f.now(), 0, nil, nil
	f.mu.Unlock()
	f.write(context.Background(), k, suppressed, attrs)
}

func (f *Log) write(ctx context.Context, k Kind, suppressed int64, attrs []slog.Attr) {
	all := make([]slog.Attr, 0, len(attrs)+3)
	all = append(all, slog.String("upstream", k.Upstream), slog.String("code", k.Code.String()))
	all = append(all, attrs...)
	if suppressed > 0 {
		all = append(all, slog.Int64("more_since_last_line", suppressed), slog.Duration("interval", f.interval))
	}
	f.log.LogAttrs(ctx, slog.LevelWarn, k.Msg, all...)
}

// Close writes what is still counted and stops the timers.
func (f *Log) Close() {
	f.mu.Lock()
	f.closed = true
	var pending []Kind
	for k, c := range f.kinds {
		if c.timer != nil {
			c.timer.Stop()
			c.timer = nil
		}
		if c.suppressed > 0 {
			pending = append(pending, k)
		}
	}
	f.mu.Unlock()
	for _, k := range pending {
		f.flush(k)
	}
}
