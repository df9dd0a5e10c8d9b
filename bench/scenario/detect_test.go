package scenario

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDetectPattern(t *testing.T) {
	// 2026-11-30 is a Monday.
	mon := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for h := 0.0; h < 7*24; h += 0.25 {
		at := mon.Add(time.Duration(h * float64(time.Hour)))
		r, d := detectPattern(at, 100)
		if r < 100 || r > 160.0001 {
			t.Fatalf("%s: rate %g outside 100..160", at, r)
		}
		if d < detectBaseDelay || d > detectBaseDelay+detectPeakDelay {
			t.Fatalf("%s: delay %g outside the base + 0..40", at, d)
		}
	}
	check := func(at time.Time, wantDelay float64) {
		t.Helper()
		if _, d := detectPattern(at, 100); math.Abs(d-wantDelay) > 0.01 {
			t.Errorf("%s: delay %g, want %g", at.Format("Mon 15:04"), d, wantDelay)
		}
	}
	check(mon.Add(10*time.Hour), detectBaseDelay+detectPeakDelay)   // weekday peak
	check(mon.Add(8*time.Hour+30*time.Minute), detectBaseDelay+20)  // the ramp up
	check(mon.Add(4*time.Hour), detectBaseDelay)                    // night
	check(mon.Add(6*24*time.Hour+16*time.Hour), detectBaseDelay+10) // Sunday afternoon swell
	if r, _ := detectPattern(mon.Add(16*time.Hour), 100); math.Abs(r-160) > 0.01 {
		t.Errorf("weekday 16:00 rate %g, want 160", r)
	}
	if r, _ := detectPattern(mon.Add(5*24*time.Hour+16*time.Hour), 100); math.Abs(r-130) > 0.01 {
		t.Errorf("Saturday 16:00 rate %g, want 130", r)
	}
}

func TestHistogramQuantile(t *testing.T) {
	inf := math.Inf(1)
	// 100 calls: 90 under 0.1, 10 in (0.1, 0.25].
	b := map[float64]float64{0.05: 0, 0.1: 90, 0.25: 100, inf: 100}
	if got := histogramQuantile(0.99, b); math.Abs(got-0.235) > 1e-9 {
		t.Errorf("p99 = %g, want 0.235", got)
	}
	if got := histogramQuantile(0.5, b); math.Abs(got-(0.05+0.05*50/90)) > 1e-9 {
		t.Errorf("p50 = %g", got)
	}
	// The rank in +Inf gives the largest finite bound, as PromQL does.
	if got := histogramQuantile(0.99, map[float64]float64{0.1: 50, inf: 100}); got != 0.1 {
		t.Errorf("p99 in +Inf = %g, want 0.1", got)
	}
	if got := histogramQuantile(0.99, map[float64]float64{0.1: 0, inf: 0}); !math.IsNaN(got) {
		t.Errorf("empty = %g, want NaN", got)
	}
}

func TestParseDurationBuckets(t *testing.T) {
	body := `# TYPE infergate_request_duration_seconds histogram
infergate_request_duration_seconds_bucket{method="a",model="recsys",le="0.1"} 1
infergate_request_duration_seconds_bucket{method="a",model="recsys",le="0.25"} 3
infergate_request_duration_seconds_bucket{method="a",model="recsys",le="+Inf"} 4
infergate_request_duration_seconds_sum{method="a",model="recsys"} 1
infergate_request_duration_seconds_count{method="a",model="recsys"} 4
infergate_request_duration_seconds_bucket{method="b",model="recsys",le="0.1"} 2
infergate_request_duration_seconds_bucket{method="b",model="recsys",le="0.25"} 2
infergate_request_duration_seconds_bucket{method="b",model="recsys",le="+Inf"} 2
infergate_request_duration_seconds_sum{method="b",model="recsys"} 1
infergate_request_duration_seconds_count{method="b",model="recsys"} 2
infergate_request_duration_seconds_bucket{method="a",model="other",le="0.1"} 7
infergate_request_duration_seconds_bucket{method="a",model="other",le="0.25"} 7
infergate_request_duration_seconds_bucket{method="a",model="other",le="+Inf"} 7
infergate_request_duration_seconds_sum{method="a",model="other"} 1
infergate_request_duration_seconds_count{method="a",model="other"} 7
`
	got, err := parseDurationBuckets([]byte(body), "recsys")
	if err != nil {
		t.Fatal(err)
	}
	want := map[float64]float64{0.1: 3, 0.25: 5, math.Inf(1): 6}
	if len(got) != len(want) {
		t.Fatalf("buckets %v, want %v", got, want)
	}
	for le, v := range want {
		if got[le] != v {
			t.Errorf("le %g: %g, want %g", le, got[le], v)
		}
	}
}

// promScrapes makes 5 s scrapes from 0 to end with per-second counts:
// 100 calls a second, all under 0.1 s until slowAt, then slowFrac of them
// in (0.25, 0.5].
func promScrapes(end, slowAt, slowFrac float64) []detectScrape {
	var out []detectScrape
	var fast, slow float64
	for at := 0.0; at <= end; at += 5 {
		out = append(out, detectScrape{At: at, Buckets: map[float64]float64{
			0.1: fast, 0.25: fast, 0.5: fast + slow, math.Inf(1): fast + slow}})
		for s := at; s < at+5; s++ {
			if s >= slowAt {
				slow += 100 * slowFrac
				fast += 100 * (1 - slowFrac)
			} else {
				fast += 100
			}
		}
	}
	return out
}

func TestEstimateProm(t *testing.T) {
	// A 5% slow tail from 600 s on, held 10 minutes: the 5m rate's p99
	// crosses 1.25 × its value before within a few scrapes and stays.
	sc := promScrapes(1200, 600, 0.05)
	p := estimateProm(sc, 600, 1200, 5*time.Minute, 5*time.Minute)
	if p.ConditionAfter < 0 || p.ConditionAfter > 90 || !strings.Contains(p.Text, "fires at") {
		t.Errorf("held: %+v", p)
	}
	// The same healed after 90 s: never fires.
	p = estimateProm(sc, 600, 690, 5*time.Minute, 5*time.Minute)
	if !strings.Contains(p.Text, "not within the incident (condition from") {
		t.Errorf("healed: %+v", p)
	}
	// Nothing changes: no condition.
	p = estimateProm(promScrapes(1200, 5000, 0), 600, 690, 5*time.Minute, 5*time.Minute)
	if p.ConditionAfter >= 0 || !strings.Contains(p.Text, "not within the incident (p99") {
		t.Errorf("calm: %+v", p)
	}
	// Unknown values (no scrape before, none during) must still encode.
	for _, p := range []DetectProm{estimateProm(nil, 1, 2, time.Minute, time.Minute), estimateProm(sc, 600, 600, time.Minute, time.Minute)} {
		if _, err := json.Marshal(p); err != nil {
			t.Errorf("json: %v (%+v)", err, p)
		}
	}
}

func TestDetectReportJudge(t *testing.T) {
	r := &DetectReport{Model: DetectModel, Scale: 1440, Days: 14, RateMin: 100, LightRate: 20,
		ColdEnd: 60, LearnEnd: 420, DaysEnd: 840, LightFrom: 2000, LightTo: 2600,
		Incidents: []DetectIncidentRow{
			{Kind: DetectReference, Rule: RuleLatency, Rate: 120, InjectedAt: 900, HealedAt: 903},
			{Kind: DetectErrors, Rule: RuleErrors, Rate: 100, InjectedAt: 1000, HealedAt: 1003},
		},
	}
	w := newDetectWatch("", DetectModel, time.Now())
	w.trans = []DetectTransition{
		{At: 12, Name: RuleLatency, Fingerprint: "c", To: "firing"},    // cold start: false alert
		{At: 100, Name: RuleLatency, Fingerprint: "a", To: "firing"},   // learning: not judged
		{At: 500, Name: RuleLatency, Fingerprint: "a", To: "firing"},   // judged: false alert
		{At: 902.5, Name: RuleLatency, Fingerprint: "a", To: "firing"}, // reference +2.5 s
		{At: 1001, Name: RuleErrors, Fingerprint: "b", To: "pending"},
		{At: 1003, Name: RuleErrors, Fingerprint: "b", To: "firing"}, // errors +3 s
	}
	r.finish(w, nil, 0)
	ref, errs := r.Incidents[0], r.Incidents[1]
	if ref.ToFiring != 2.5 || ref.Verdict != SoakPass {
		t.Errorf("reference %+v", ref)
	}
	if errs.ToPending != 1 || errs.ToFiring != 3 || errs.Verdict != SoakFail {
		t.Errorf("errors %+v", errs)
	}
	if len(r.Phases) != 4 || r.Phases[0].Verdict != SoakFail || r.Phases[1].Firings != 1 || r.Phases[1].Verdict != "-" ||
		r.Phases[2].Verdict != SoakFail || r.Phases[3].Verdict != SoakPass {
		t.Errorf("phases %+v", r.Phases)
	}
	md := r.Markdown()
	for _, want := range []string{"| reference", "| errors", "| cold start", "| judged normal days", "| steady light load 20 calls/s",
		"firing <= 5s at >= 100 calls/s", "firing <= 2s", "Verdict: FAIL", "trend rule: not in the default set"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

// TestDetectSmoke runs the real scenario, tiny (under a minute), against
// bin/simserver and bin/infergate when they are built; otherwise it
// skips. It checks that every row is there and the files can be written,
// not the verdicts: a smoke run is too short for a baseline.
func TestDetectSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	sim, ig := filepath.Join("..", "..", "bin", "simserver"), filepath.Join("..", "..", "bin", "infergate")
	for _, b := range []string{sim, ig} {
		if _, err := os.Stat(b); err != nil {
			t.Skipf("%s not built", b)
		}
	}
	cfg := DetectConfig{
		Simserver: sim, Infergate: ig, Days: 0.05, Calm: 2 * time.Second, Hold: 5 * time.Second,
		CreepHold: 4 * time.Second, Recovery: time.Second, Light: 3 * time.Second,
	}
	if testing.Verbose() {
		cfg.Log = os.Stderr
	}
	rep, err := RunDetect(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Incidents) != 4 || len(rep.Phases) != 4 {
		t.Fatalf("%d incidents, %d phases; want 4 and 4", len(rep.Incidents), len(rep.Phases))
	}
	if len(rep.Seconds) == 0 || len(rep.Bands) == 0 {
		t.Errorf("%d client seconds, %d baselines", len(rep.Seconds), len(rep.Bands))
	}
	md := rep.Markdown()
	for _, want := range []string{"| reference", "| creep", "| errors", "| gpu", "| cold start", "| learning days", "| judged normal days",
		"| steady light load", "Verdict: "} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Errorf("json: %v", err)
	}
	dir := t.TempDir()
	if err := writeDetectPlots(dir, rep); err != nil {
		t.Error(err)
	}
}
