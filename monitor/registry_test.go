package monitor

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestSeriesCap(t *testing.T) {
	r, _ := newTestRegistry(t, Options{MaxSeries: 3})
	reg := prometheus.NewPedanticRegistry()
	if err := r.Register(reg); err != nil {
		t.Fatal(err)
	}
	keys := make([]SeriesKey, 5)
	for i := range keys {
		keys[i] = testKey
		keys[i].Model = fmt.Sprintf("m%d", i)
	}
	for _, k := range keys[:3] {
		if s := r.Series(k); s.Key() != k {
			t.Fatalf("Series(%v).Key() = %v", k, s.Key())
		}
	}
	for _, k := range keys[3:] {
		if s := r.Series(k); s.Key() != OverflowKey {
			t.Fatalf("over the cap: Series(%v).Key() = %v, want the overflow key", k, s.Key())
		}
	}
	if r.Series(keys[0]) != r.Series(keys[0]) {
		t.Error("Series returned two series for one key")
	}
	if r.Series(OverflowKey) != r.Series(keys[4]) {
		t.Error("OverflowKey does not map to the overflow series")
	}
	if r.Len() != 3 {
		t.Errorf("Len = %d, want 3", r.Len())
	}

	r.Record(keys[0], Sample{Total: time.Millisecond, Code: "OK"})
	r.Record(keys[3], Sample{Total: time.Millisecond, Code: "OK"})
	r.Record(keys[4], Sample{Total: 2 * time.Millisecond, Code: "Unavailable"})
	r.Rotate()

	snaps := r.Snapshot()
	if len(snaps) != 4 || snaps[3].Key != OverflowKey {
		t.Fatalf("snapshot keys: got %d series, last %+v; want 3 + overflow", len(snaps), snaps[len(snaps)-1].Key)
	}
	if got := snaps[3].Stats[Window1m][ComponentTotal].Count; got != 2 {
		t.Errorf("overflow series count = %d, want 2", got)
	}
	text := exposition(t, reg, "infergate_series", "infergate_requests_total")
	for _, want := range []string{
		`infergate_series_overflow_total{reason="max_series"} 2`,
		"infergate_series 3\n",
		`infergate_requests_total{code="Unavailable",method="other",model="other",route="other",size_class="other",upstream="other",version="other"} 1`,
		`infergate_requests_total{code="OK",method="other",model="other",route="other",size_class="other",upstream="other",version="other"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("exposition lacks %q:\n%s", want, text)
		}
	}
}

// TestConcurrentRecord records from many goroutines while rotations,
// snapshots and scrapes run; run it with -race.
func TestConcurrentRecord(t *testing.T) {
	r, _ := newTestRegistry(t, Options{Shards: 4})
	reg := prometheus.NewPedanticRegistry()
	if err := r.Register(reg); err != nil {
		t.Fatal(err)
	}
	const (
		workers = 8
		perW    = 2000
	)
	keys := []SeriesKey{testKey, {Model: "bert", Version: "2", Method: "ModelInfer", Upstream: "triton", CodeClass: CodeClassServerError}}
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			r.Rotate()
			_ = r.Snapshot()
			if _, err := reg.Gather(); err != nil {
				t.Errorf("gather: %v", err)
				return
			}
		}
	})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			g := r.InFlight("triton")
			for i := range perW {
				g.Inc()
				k := keys[(w+i)%len(keys)]
				r.Record(k, Sample{
					Total:    time.Duration(100+i) * time.Microsecond,
					Upstream: time.Duration(50+i) * time.Microsecond,
					Queue:    time.Duration(i%3) * time.Microsecond,
					Code:     "OK",
					BytesIn:  10,
					BytesOut: 20,
				})
				g.Dec()
			}
		})
	}
	wg.Wait()
	close(stop)
	bg.Wait()
	r.Rotate()

	var calls uint64
	for _, ss := range r.Snapshot() {
		calls += ss.Calls
	}
	if calls != workers*perW {
		t.Errorf("calls in windows = %d, want %d", calls, workers*perW)
	}
	var total int64
	for _, k := range keys {
		tt := r.Series(k).totals()
		total += tt.calls()
		if tt.bytesIn != 10*tt.calls() || tt.bytesOut != 20*tt.calls() {
			t.Errorf("%s bytes in/out = %d/%d for %d calls", k.Model, tt.bytesIn, tt.bytesOut, tt.calls())
		}
	}
	if total != workers*perW {
		t.Errorf("requests counted = %d, want %d", total, workers*perW)
	}
	if v := r.InFlight("triton").Value(); v != 0 {
		t.Errorf("in flight = %d, want 0", v)
	}
}

func TestUnknownCode(t *testing.T) {
	r, _ := newTestRegistry(t, Options{})
	reg := prometheus.NewPedanticRegistry()
	if err := r.Register(reg); err != nil {
		t.Fatal(err)
	}
	r.Record(testKey, Sample{Total: time.Millisecond, Code: "Code(42)"})
	r.Record(testKey, Sample{Total: time.Millisecond, Code: ""})
	text := exposition(t, reg, "infergate_requests_total")
	for _, want := range []string{`code="Code(42)"`, `code="Unknown"`} {
		if !strings.Contains(text, want) {
			t.Errorf("exposition lacks %s:\n%s", want, text)
		}
	}
}

func TestRegisterTwice(t *testing.T) {
	r, _ := newTestRegistry(t, Options{})
	reg := prometheus.NewPedanticRegistry()
	if err := r.Register(reg); err != nil {
		t.Fatal(err)
	}
	err := r.Register(reg)
	if err == nil || !strings.HasPrefix(err.Error(), "monitor: register") {
		t.Fatalf("second Register: err = %v, want a monitor: register error", err)
	}
}
