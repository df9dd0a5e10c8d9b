package monitor

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

var testKey = SeriesKey{Model: "resnet", Version: "1", Method: "ModelInfer", Upstream: "triton", CodeClass: CodeClassOK, Route: RoutePrimary, SizeClass: SizeClass4KiB}

// fixedClock is an injectable clock that tests move by hand.
type fixedClock struct{ t time.Time }

func (c *fixedClock) now() time.Time { return c.t }

func newTestRegistry(t testing.TB, opts Options) (*Registry, *fixedClock) {
	t.Helper()
	clk := &fixedClock{t: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	if opts.Now == nil {
		opts.Now = clk.now
	}
	return NewRegistry(opts), clk
}

// tick moves clk on by n seconds, rotating r once per second.
func tick(r *Registry, clk *fixedClock, n int) {
	for range n {
		clk.t = clk.t.Add(time.Second)
		r.Rotate()
	}
}

// withModel returns key with its model set to m.
func withModel(key SeriesKey, m string) SeriesKey { key.Model = m; return key }

// snapshotOf returns the snapshot of key, failing the test if it is absent.
func snapshotOf(t *testing.T, r *Registry, key SeriesKey) SeriesSnapshot {
	t.Helper()
	for _, ss := range r.Snapshot() {
		if ss.Key == key {
			return ss
		}
	}
	t.Fatalf("no snapshot for %+v", key)
	return SeriesSnapshot{}
}

// exposition gathers reg and renders the families whose names start with
// one of prefixes (all when none) in the text format.
func exposition(t *testing.T, reg prometheus.Gatherer, prefixes ...string) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var buf bytes.Buffer
	for _, mf := range mfs {
		keep := len(prefixes) == 0
		for _, p := range prefixes {
			keep = keep || strings.HasPrefix(mf.GetName(), p)
		}
		if !keep {
			continue
		}
		if _, err := expfmt.MetricFamilyToText(&buf, mf); err != nil {
			t.Fatalf("render %s: %v", mf.GetName(), err)
		}
	}
	return buf.String()
}
