package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// DetectTransition is one change of an alert's state seen by polling
// /api/v1/alerts: from "" (new) to pending or firing, pending to firing,
// or to "" (gone: resolved).
type DetectTransition struct {
	At          float64 `json:"t_s"` // real seconds since the run started
	Name        string  `json:"name"`
	Fingerprint string  `json:"fingerprint"`
	Model       string  `json:"model,omitempty"`
	GPU         string  `json:"gpu,omitempty"`
	From        string  `json:"from"`
	To          string  `json:"to"`
	Value       string  `json:"value,omitempty"`
	Threshold   string  `json:"threshold,omitempty"`
	Muted       string  `json:"muted,omitempty"`
}

// detectAlert is the part of an /api/v1/alerts entry the scenario reads.
type detectAlert struct {
	Name        string            `json:"name"`
	Fingerprint string            `json:"fingerprint"`
	State       string            `json:"state"`
	Labels      map[string]string `json:"labels"`
	Value       string            `json:"value"`
	Threshold   string            `json:"threshold"`
	Muted       string            `json:"muted"`
}

// DetectBand is the p99 baseline of the model at one moment, from
// /api/v1/baselines.
type DetectBand struct {
	At      float64 `json:"t_s"`
	Source  string  `json:"source"`
	Hours   int     `json:"hours_learned"`
	Weeks   int     `json:"history_weeks"`
	Median  float64 `json:"p99_median_ms"`
	UpAbove float64 `json:"p99_up_above_ms"`
	P50     float64 `json:"p50_median_ms"`
	P50Up   float64 `json:"p50_up_above_ms"`
}

// detectScrape is the model's request histogram at one scrape, summed over
// every label but le, cumulative counts by upper bound.
type detectScrape struct {
	At      float64
	Buckets map[float64]float64
}

// detectWatch polls infergate's admin API for the whole run.
type detectWatch struct {
	admin, model string
	start        time.Time
	client       *http.Client

	mu      sync.Mutex
	state   map[string]detectAlert // by fingerprint
	trans   []DetectTransition
	bands   []DetectBand
	scrapes []detectScrape
	errs    int
	lastErr error
	// inputHints are the polls of /api/v1/models that found the model's
	// cause hint blaming its inputs, by hint; the load never changes its
	// inputs, so each is a false hint.
	inputHints map[string]int
}

func newDetectWatch(admin, model string, start time.Time) *detectWatch {
	return &detectWatch{admin: admin, model: model, start: start, client: &http.Client{Timeout: 5 * time.Second},
		state: map[string]detectAlert{}}
}

func (w *detectWatch) since() float64 { return time.Since(w.start).Seconds() }

// run polls alerts every 250 ms, baselines every second and /metrics
// every 5 s (a Prometheus scrape interval, for the offline rule) until
// ctx ends.
func (w *detectWatch) run(ctx context.Context) {
	var wg sync.WaitGroup
	every := func(d time.Duration, f func(context.Context) error) {
		wg.Go(func() {
			t := time.NewTicker(d)
			defer t.Stop()
			for {
				if err := f(ctx); err != nil && ctx.Err() == nil {
					w.mu.Lock()
					w.errs++
					w.lastErr = err
					w.mu.Unlock()
				}
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		})
	}
	every(250*time.Millisecond, w.pollAlerts)
	every(time.Second, w.pollBaselines)
	every(time.Second, w.pollHint)
	every(5*time.Second, w.scrape)
	wg.Wait()
}

func (w *detectWatch) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+w.admin+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return body, nil
}

func (w *detectWatch) pollAlerts(ctx context.Context) error {
	body, err := w.get(ctx, "/api/v1/alerts")
	if err != nil {
		return err
	}
	var doc struct {
		Alerts []detectAlert `json:"alerts"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("alerts: %w", err)
	}
	at := w.since()
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[string]bool{}
	for _, a := range doc.Alerts {
		seen[a.Fingerprint] = true
		old, ok := w.state[a.Fingerprint]
		if ok && old.State == a.State {
			w.state[a.Fingerprint] = a
			continue
		}
		w.trans = append(w.trans, transitionOf(at, old.State, a))
		w.state[a.Fingerprint] = a
	}
	for fp, a := range w.state {
		if !seen[fp] {
			tr := transitionOf(at, a.State, a)
			tr.To = ""
			w.trans = append(w.trans, tr)
			delete(w.state, fp)
		}
	}
	return nil
}

// pollHint records the model's cause hint when it blames the inputs.
func (w *detectWatch) pollHint(ctx context.Context) error {
	body, err := w.get(ctx, "/api/v1/models")
	if err != nil {
		return err
	}
	var models []struct {
		Model     string `json:"model"`
		CauseHint string `json:"cause_hint"`
	}
	if err := json.Unmarshal(body, &models); err != nil {
		return fmt.Errorf("models: %w", err)
	}
	for _, m := range models {
		if m.Model == w.model && (m.CauseHint == "inputs_grew" || m.CauseHint == "input_shape_changed") {
			w.mu.Lock()
			if w.inputHints == nil {
				w.inputHints = map[string]int{}
			}
			w.inputHints[m.CauseHint]++
			w.mu.Unlock()
		}
	}
	return nil
}

func transitionOf(at float64, from string, a detectAlert) DetectTransition {
	return DetectTransition{At: at, Name: a.Name, Fingerprint: a.Fingerprint, Model: a.Labels["model"], GPU: a.Labels["gpu"],
		From: from, To: a.State, Value: a.Value, Threshold: a.Threshold, Muted: a.Muted}
}

// active reports whether any alert is pending or firing now.
func (w *detectWatch) active() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, a := range w.state {
		out = append(out, a.Name+"/"+a.State)
	}
	sort.Strings(out)
	return out
}

func (w *detectWatch) pollBaselines(ctx context.Context) error {
	body, err := w.get(ctx, "/api/v1/baselines")
	if err != nil {
		return err
	}
	var doc struct {
		Baselines []struct {
			Model  string `json:"model"`
			Source string `json:"source"`
			Weeks  int    `json:"history_weeks"`
			Hours  int    `json:"hours_learned"`
			Levels []struct {
				Quantile string  `json:"quantile"`
				Median   float64 `json:"median_seconds"`
				UpAbove  float64 `json:"up_above_seconds"`
			} `json:"levels"`
		} `json:"baselines"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return fmt.Errorf("baselines: %w", err)
	}
	for _, b := range doc.Baselines {
		if b.Model != w.model {
			continue
		}
		band := DetectBand{At: w.since(), Source: b.Source, Hours: b.Hours, Weeks: b.Weeks}
		for _, l := range b.Levels {
			switch l.Quantile {
			case "p99":
				band.Median, band.UpAbove = l.Median*1000, l.UpAbove*1000
			case "p50":
				band.P50, band.P50Up = l.Median*1000, l.UpAbove*1000
			}
		}
		w.mu.Lock()
		w.bands = append(w.bands, band)
		w.mu.Unlock()
	}
	return nil
}

func (w *detectWatch) lastBand() (DetectBand, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.bands) == 0 {
		return DetectBand{}, false
	}
	return w.bands[len(w.bands)-1], true
}

func (w *detectWatch) scrape(ctx context.Context) error {
	body, _, err := scrapeMetrics(ctx, w.admin)
	if err != nil {
		return err
	}
	at := w.since()
	b, err := parseDurationBuckets(body, w.model)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.scrapes = append(w.scrapes, detectScrape{At: at, Buckets: b})
	w.mu.Unlock()
	return nil
}

// parseDurationBuckets sums infergate_request_duration_seconds_bucket of
// model over its other labels (method, upstream, version), by le, as
// sum by (le) would.
func parseDurationBuckets(body []byte, modelName string) (map[float64]float64, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	out := map[float64]float64{}
	f, ok := fams["infergate_request_duration_seconds"]
	if !ok {
		return out, nil
	}
	for _, m := range f.GetMetric() {
		match := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "model" && lp.GetValue() == modelName {
				match = true
			}
		}
		h := m.GetHistogram()
		if !match || h == nil {
			continue
		}
		for _, b := range h.GetBucket() {
			if !math.IsInf(b.GetUpperBound(), 1) { // +Inf is the count, added below
				out[b.GetUpperBound()] += float64(b.GetCumulativeCount())
			}
		}
		out[math.Inf(1)] += float64(h.GetSampleCount())
	}
	return out, nil
}

// histogramQuantile is PromQL's histogram_quantile over cumulative
// classic buckets: find the bucket holding rank q×total and interpolate
// linearly inside it (from 0 for the first bucket); a rank in the +Inf
// bucket gives the largest finite bound. NaN when there are no counts.
func histogramQuantile(q float64, buckets map[float64]float64) float64 {
	les := make([]float64, 0, len(buckets))
	for le := range buckets {
		les = append(les, le)
	}
	sort.Float64s(les)
	if len(les) < 2 || !math.IsInf(les[len(les)-1], 1) {
		return math.NaN()
	}
	total := buckets[les[len(les)-1]]
	if total <= 0 {
		return math.NaN()
	}
	rank := q * total
	i := sort.Search(len(les), func(i int) bool { return buckets[les[i]] >= rank })
	if i == len(les)-1 {
		return les[len(les)-2]
	}
	lo, below := 0.0, 0.0
	if i > 0 {
		lo, below = les[i-1], buckets[les[i-1]]
	}
	in := buckets[les[i]] - below
	if in <= 0 {
		return les[i]
	}
	return lo + (les[i]-lo)*(rank-below)/in
}

// promP99At is histogram_quantile(0.99, rate(bucket[window])) at scrape i:
// the difference between scrape i and the oldest scrape inside the
// window (Prometheus's extrapolation to the window's edges scales every
// bucket alike and does not move a quantile).
func promP99At(scrapes []detectScrape, i int, window time.Duration) float64 {
	j := i
	for j > 0 && scrapes[i].At-scrapes[j-1].At <= window.Seconds() {
		j--
	}
	if j == i {
		return math.NaN()
	}
	d := map[float64]float64{}
	for le, v := range scrapes[i].Buckets {
		d[le] = v - scrapes[j].Buckets[le]
	}
	return histogramQuantile(0.99, d)
}

// DetectProm is what the Prometheus rule
//
//	histogram_quantile(0.99, sum by (le) (rate(infergate_request_duration_seconds_bucket{model=M}[5m]))) > T
//	for: 5m
//
// would have done during one incident, from 5 s scrapes of the same run.
type DetectProm struct {
	// P99AtInjection is the expression's value at the last scrape before
	// the injection (ms), and Threshold T = 1.25 × it.
	P99AtInjection float64 `json:"p99_at_injection_ms"`
	Threshold      float64 `json:"threshold_ms"`
	// MaxDuring is the expression's largest value during the incident.
	MaxDuring float64 `json:"max_during_ms"`
	// ConditionAfter is the delay from the injection to the first scrape
	// where the expression exceeded T (s); negative when it never did.
	ConditionAfter float64 `json:"condition_after_s"`
	// HeldFor is how long the condition then stayed true before the
	// incident was healed or it went false (s).
	HeldFor float64 `json:"held_for_s"`
	Text    string  `json:"text"`
}

// estimateProm evaluates the rule over the scrapes between inj and end
// (seconds since the run started).
func estimateProm(scrapes []detectScrape, inj, end float64, window, forDur time.Duration) DetectProm {
	p := DetectProm{ConditionAfter: -1, P99AtInjection: math.NaN(), Threshold: math.NaN(), MaxDuring: math.NaN()}
	base := -1
	for i, s := range scrapes {
		if s.At <= inj {
			base = i
		}
	}
	if base < 0 {
		p.Text = "no scrape before the injection"
		p.noNaN()
		return p
	}
	v := promP99At(scrapes, base, window)
	if math.IsNaN(v) {
		p.Text = "no rate before the injection"
		p.noNaN()
		return p
	}
	p.P99AtInjection, p.Threshold = v*1000, v*1250
	for i := base + 1; i < len(scrapes) && scrapes[i].At <= end; i++ {
		q := promP99At(scrapes, i, window) * 1000
		if math.IsNaN(q) {
			continue
		}
		if math.IsNaN(p.MaxDuring) || q > p.MaxDuring {
			p.MaxDuring = q
		}
		if q > p.Threshold {
			if p.ConditionAfter < 0 {
				p.ConditionAfter = scrapes[i].At - inj
			}
			p.HeldFor = scrapes[i].At - inj - p.ConditionAfter
		} else if p.ConditionAfter >= 0 && p.HeldFor < forDur.Seconds() {
			break // went false again before for: elapsed
		}
	}
	switch {
	case math.IsNaN(p.MaxDuring):
		p.Text = fmt.Sprintf("not within the incident (p99 %s ms at injection; no scrape in its %s)",
			detectMs(p.P99AtInjection), fmtAt(secs(end-inj)))
	case p.ConditionAfter < 0:
		p.Text = fmt.Sprintf("not within the incident (p99 %s ms at injection, at most %s ms, T %s ms)",
			detectMs(p.P99AtInjection), detectMs(p.MaxDuring), detectMs(p.Threshold))
	case p.HeldFor >= forDur.Seconds():
		p.Text = fmt.Sprintf("fires at %s (condition at %s + for: %s)",
			fmtSecs(p.ConditionAfter+forDur.Seconds()), fmtSecs(p.ConditionAfter), forDur)
	default:
		p.Text = fmt.Sprintf("not within the incident (condition from %s; would fire at %s if held %s)",
			fmtSecs(p.ConditionAfter), fmtSecs(p.ConditionAfter+forDur.Seconds()), forDur)
	}
	p.noNaN()
	return p
}

// noNaN zeroes unknown values, which JSON cannot carry; Text says why.
func (p *DetectProm) noNaN() {
	for _, v := range []*float64{&p.P99AtInjection, &p.Threshold, &p.MaxDuring} {
		if math.IsNaN(*v) {
			*v = 0
		}
	}
}

func detectMs(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// fmtSecs prints seconds as "+4.2s" below a minute, "+5m12s" above.
func fmtSecs(s float64) string {
	if s < 60 {
		return "+" + strconv.FormatFloat(s, 'f', 1, 64) + "s"
	}
	return "+" + time.Duration(s*float64(time.Second)).Round(time.Second).String()
}
