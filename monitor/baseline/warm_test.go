package baseline

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestWarmFromPrometheus: two weeks of a model's history served as
// Prometheus serves query_range give a seasonal baseline at once: the
// weekday peak is normal at its hour and a rise elsewhere.
func TestWarmFromPrometheus(t *testing.T) {
	c := &fakeClock{monday.AddDate(0, 0, 14).Add(9*time.Hour + 30*time.Minute)} // third Monday 09:30
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The native histograms, else the classic buckets (a Prometheus
		// stores one or the other).
		query := r.FormValue("query")
		if r.URL.Path != "/api/v1/query_range" || !strings.Contains(query, "(rate(infergate_request_duration_seconds[5m]))") ||
			!strings.Contains(query, " or ") || !strings.Contains(query, "infergate_request_duration_seconds_bucket") {
			http.Error(w, "bad query", 400)
			return
		}
		start, _ := strconv.ParseInt(r.FormValue("start"), 10, 64)
		end, _ := strconv.ParseInt(r.FormValue("end"), 10, 64)
		var vals []string
		for ts := start; ts <= end; ts += 300 {
			vals = append(vals, fmt.Sprintf(`[%d,"%g"]`, ts, weekly(time.Unix(ts, 0).UTC()).Seconds()))
		}
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"model":"m"},"values":[%s]}]}}`, strings.Join(vals, ","))
	}))
	defer srv.Close()
	s := New(Options{Now: c.now, Weeks: 2})
	n, err := s.WarmFromPrometheus(t.Context(), srv.URL, nil)
	if err != nil || n != 1 {
		t.Fatalf("warmed %d, %v", n, err)
	}
	b := s.Get("m")
	if b.Source != SourceSeasonal || b.Weeks != 2 {
		t.Fatalf("baseline after warm: %+v", b)
	}
	if v := Up(b, window(40*time.Millisecond), DefaultRise); v.Up {
		t.Errorf("peak at 09:30 is up after warm: %+v", v)
	}
	c.t = c.t.Add(5 * time.Hour) // 14:30, normal 20ms
	if v := Up(s.Get("m"), window(40*time.Millisecond), DefaultRise); !v.Up {
		t.Errorf("40ms at 14:30 not up after warm")
	}
	// A second warm leaves learned models alone.
	if n, _ := s.WarmFromPrometheus(t.Context(), srv.URL, nil); n != 0 {
		t.Errorf("second warm touched %d models", n)
	}
}
