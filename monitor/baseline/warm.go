package baseline

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// warmStep is the resolution of the history a warm start reads.
const warmStep = 5 * time.Minute

// warmQuery reads a quantile (the %g) from the native histograms, and from
// the classic buckets for models that have no native series: a Prometheus
// before 2.45 stores one form only (the native one when native histograms
// are enabled, as examples/prometheus configures), and either may hold
// the history.
const warmQuery = `histogram_quantile(%[1]g, sum by (model) (rate(infergate_request_duration_seconds[5m])))` +
	` or histogram_quantile(%[1]g, sum by (le, model) (rate(infergate_request_duration_seconds_bucket[5m])))`

// WarmFromPrometheus learns the seasonal history of every model from a
// Prometheus that scrapes infergate: for each tracked quantile it asks
// /api/v1/query_range for histogram_quantile over
// infergate_request_duration_seconds (rate over 5m, summed by model) over
// the last Weeks weeks at a 5m step, and learns each hour of each week as
// if it had been observed. Models that already have seasonal history (a
// loaded baseline file) are left alone. It returns how many models it
// warmed.
func (s *Store) WarmFromPrometheus(ctx context.Context, base string, client *http.Client) (int, error) {
	if client == nil {
		client = http.DefaultClient
	}
	end := s.opts.Now().Truncate(warmStep)
	start := end.Add(-time.Duration(s.opts.Weeks) * 7 * 24 * time.Hour)
	// series[model][q] = points
	series := map[string]*[NumQuantiles][]point{}
	for q := range NumQuantiles {
		query := fmt.Sprintf(warmQuery, Quantiles[q])
		res, err := queryRange(ctx, client, base, query, start, end)
		if err != nil {
			return 0, fmt.Errorf("baseline: warm from %s: %w", base, err)
		}
		for model, pts := range res {
			if series[model] == nil {
				series[model] = &[NumQuantiles][]point{}
			}
			series[model][q] = pts
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	warmed := 0
	for model, qs := range series {
		t := s.tracks[model]
		if t == nil {
			if len(s.tracks) >= s.opts.MaxKeys {
				continue
			}
			t = &track{}
		}
		if t.hasHours() {
			continue
		}
		// Bucket by (week, hour of week) in time order.
		type slot struct {
			week, how int
		}
		acc := map[slot]*[NumQuantiles][]float32{}
		var order []slot
		for q := range NumQuantiles {
			for _, p := range qs[q] {
				st := s.seasonal(p.t)
				k := slot{int(p.t.Sub(start) / (7 * 24 * time.Hour)), s.hourOfWeek(st)}
				if acc[k] == nil {
					acc[k] = &[NumQuantiles][]float32{}
					order = append(order, k)
				}
				acc[k][q] = append(acc[k][q], micros(p.v))
			}
		}
		learned := false
		slices.SortFunc(order, func(a, b slot) int { return cmp.Or(cmp.Compare(a.week, b.week), cmp.Compare(a.how, b.how)) })
		for _, k := range order {
			v := acc[k]
			if len(v[P50]) < minHourSamples {
				continue
			}
			var med, spread [NumQuantiles]float32
			for q := range NumQuantiles {
				m, sp := robust(v[q])
				med[q], spread[q] = micros(m), micros(sp)
			}
			t.hours.make(k.how).push(med, spread, s.opts.Weeks)
			learned = true
		}
		if learned {
			t.lastSeen = s.opts.Now()
			s.tracks[model] = t
			warmed++
		}
	}
	return warmed, nil
}

func (t *track) hasHours() bool {
	for _, h := range t.hours.all() {
		if h != nil {
			return true
		}
	}
	return false
}

type point struct {
	t time.Time
	v float64
}

// queryRange runs a Prometheus range query and returns each series'
// points by its model label (NaN and non-positive values dropped).
func queryRange(ctx context.Context, client *http.Client, base, query string, start, end time.Time) (map[string][]point, error) {
	u := base + "/api/v1/query_range?" + url.Values{
		"query": {query},
		"start": {strconv.FormatInt(start.Unix(), 10)},
		"end":   {strconv.FormatInt(end.Unix(), 10)},
		"step":  {strconv.Itoa(int(warmStep / time.Second))},
	}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return nil, err
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Values [][2]any          `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("query_range: HTTP %d: %v", resp.StatusCode, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query_range: %s", r.Error)
	}
	out := map[string][]point{}
	for _, s := range r.Data.Result {
		m := s.Metric["model"]
		if m == "" {
			continue
		}
		for _, v := range s.Values {
			ts, ok1 := v[0].(float64)
			str, ok2 := v[1].(string)
			if !ok1 || !ok2 {
				continue
			}
			f, err := strconv.ParseFloat(str, 64)
			if err != nil || !(f > 0) {
				continue
			}
			out[m] = append(out[m], point{time.Unix(int64(ts), 0), f})
		}
	}
	return out, nil
}
