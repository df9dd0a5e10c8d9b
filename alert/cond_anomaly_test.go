package alert

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/baseline"
)

// synthModel makes a model's per-second numbers: 1,000 calls a second,
// p50 20ms, p99 50ms, queue p99 4ms, no errors, each with a few percent
// of noise; a shift multiplies or adds to them.
type synthModel struct {
	rng                       *rand.Rand
	callsX, p50X, p99X, queue float64
	errRatio                  float64
}

func newSynth(seed uint64) *synthModel {
	return &synthModel{rng: rand.New(rand.NewPCG(seed, 3)), callsX: 1, p50X: 1, p99X: 1, queue: 1}
}

func (s *synthModel) jitter(sd float64) float64 { return math.Exp(sd * s.rng.NormFloat64()) }

// second sets the model's next second in r (and teaches the seasonal
// baseline the healthy latency when learn).
func (s *synthModel) second(r *rig, learn bool) {
	n := uint64(1000 * s.callsX * s.jitter(0.04))
	p50 := ms(20 * s.p50X * s.jitter(0.03))
	p99 := ms(50 * s.p99X * s.jitter(0.06))
	var failed map[string]uint64
	if k := uint64(math.Round(float64(n) * s.errRatio * s.jitter(0.2))); k > 0 {
		failed = map[string]uint64{"Internal": k}
	}
	rs := calls(n, p50, p99, failed)
	rs.QueueSeen = true
	rs.Stats[monitor.ComponentQueue] = monitor.Stats{Count: n, P50: ms(1), P99: ms(4 * s.queue * s.jitter(0.1))}
	r.src.set("m", rs)
	if learn {
		r.bs.Observe("m", baseline.Sample{p50.Seconds(), p50.Seconds(), p99.Seconds()}, false)
	}
}

// anomalyRig is a rig with one anomaly rule (for: 5s) and a synthetic
// model warmed up for 400s: its detector has learnt.
func anomalyRig(t *testing.T, seed uint64) (*rig, *synthModel) {
	t.Helper()
	cfg := Config{Rules: []RuleConfig{{Name: "Anomaly", Condition: Condition{Kind: KindAnomaly}, For: 5 * time.Second,
		KeepFiringFor: 30 * time.Second, Annotations: map[string]string{"summary": summaryTemplate}}}}
	r := newRig(t, &cfg)
	s := newSynth(seed)
	for range 400 {
		s.second(r, true)
		r.c.add(time.Second)
		r.e.Step()
	}
	if v, ok := r.e.Anomaly("m"); !ok || v.Learning {
		t.Fatalf("after 400s of warm-up: %+v (known %v), want scored", v, ok)
	}
	if a := r.e.Alerts(); len(a) > 0 {
		t.Fatalf("warm-up: %+v", a)
	}
	return r, s
}

// TestAnomalyRuleFiresOnSpreadChanges: after a warm-up, each change
// spread over features that no single rule sees fires the anomaly rule
// within 10s plus its for, and the summary names the right feature
// first.
func TestAnomalyRuleFiresOnSpreadChanges(t *testing.T) {
	cases := []struct {
		name    string
		shift   func(s *synthModel)
		first   string // the explanation's first words
		feature string // the top feature of the evidence
	}{
		{"throughput -50%, flat latency", func(s *synthModel) { s.callsX = 0.5 }, "calls/s −", "calls"},
		{"queue x3, flat p99", func(s *synthModel) { s.queue = 3 }, "queue ×", "queue_p99"},
		{"errors 0.3%, p50 +15%", func(s *synthModel) { s.errRatio, s.p50X = 0.003, 1.15 }, "errors +", "errors"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 3; seed++ {
				r, s := anomalyRig(t, seed)
				tc.shift(s)
				start := r.c.now()
				for r.state("Anomaly", "m") != StateFiring {
					if r.c.now().Sub(start) > 15*time.Second {
						v, _ := r.e.Anomaly("m")
						t.Fatalf("seed %d: not firing 15s after the shift: %+v", seed, v)
					}
					s.second(r, false)
					r.c.add(time.Second)
					r.e.Step()
				}
				took := r.c.now().Sub(start)
				var a AlertView
				for _, x := range r.e.Alerts() {
					a = x
				}
				sum := a.Annotations["summary"]
				parts := strings.Split(sum, "; ")
				if len(parts) < 3 || !strings.HasPrefix(parts[2], tc.first) {
					t.Errorf("seed %d: summary %q: want the cause to start %q", seed, sum, tc.first)
				}
				if ev := a.Evidence.Anomaly; ev == nil || ev.Pattern == "" || len(ev.Top) == 0 || ev.Top[0].Feature != tc.feature {
					t.Errorf("seed %d: evidence %v, want a pattern and %s first", seed, ev, tc.feature)
				}
				t.Logf("seed %d: firing %v after the shift: %s", seed, took, sum)
			}
		})
	}
}

// TestAnomalyRuleQuietOnNoise: an hour of noise alone never fires (a
// second or two over the bound may make it pending: its for is there for
// that).
func TestAnomalyRuleQuietOnNoise(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		r, s := anomalyRig(t, seed)
		maxScore, pending := 0.0, 0
		for range 3600 {
			s.second(r, true)
			r.c.add(time.Second)
			r.e.Step()
			if v, _ := r.e.Anomaly("m"); v.Score > maxScore {
				maxScore = v.Score
			}
			for _, a := range r.e.Alerts() {
				if a.State == StateFiring {
					t.Fatalf("seed %d: noise fired: %+v", seed, a.Annotations)
				}
				pending++
			}
		}
		t.Logf("seed %d: an hour of noise: highest score %.3f, %d seconds pending", seed, maxScore, pending)
	}
}

// TestAnomalyRuleLearningNeverFires: a model whose detector still learns
// is "learning" in the API and its evidence, and does not fire however
// wild its seconds.
func TestAnomalyRuleLearningNeverFires(t *testing.T) {
	cfg := Config{Rules: []RuleConfig{{Name: "Anomaly", Condition: Condition{Kind: KindAnomaly}}}}
	r := newRig(t, &cfg)
	s := newSynth(1)
	for i := range 150 {
		s.callsX = 1
		if i%2 == 0 {
			s.callsX = 0.1 // wild, every other second
		}
		s.second(r, true)
		r.c.add(time.Second)
		r.e.Step()
		if v, ok := r.e.Anomaly("m"); !ok || !v.Learning || v.Score != 0 {
			t.Fatalf("second %d: %+v, want learning", i, v)
		}
		if a := r.e.Alerts(); len(a) > 0 {
			t.Fatalf("second %d: learning fired: %+v", i, a)
		}
	}
}

// TestAnomalyConfigErrors: config errors name the field.
func TestAnomalyConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cond Condition
		want string
	}{
		{Condition{Kind: KindAnomaly, Score: 1.5}, "score: 1.5"},
		{Condition{Kind: KindAnomaly, Score: -0.1}, "score: -0.1"},
		{Condition{Kind: KindAnomaly, Score: 0.95, CriticalScore: 0.92}, "critical_score: 0.92 is below score 0.95"},
		{Condition{Kind: KindAnomaly, Quantile: "p99"}, "quantile"},
		{Condition{Kind: KindAnomaly, Op: "<"}, "op:"},
	} {
		cfg := Config{Rules: []RuleConfig{{Name: "A", Condition: tc.cond}}}
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cond, err, tc.want)
		}
	}
}

// TestAnomalySeverity: warning at first, critical once the worst score
// reaches critical_score.
func TestAnomalySeverity(t *testing.T) {
	r, s := anomalyRig(t, 1)
	s.callsX = 0.3
	for range 15 {
		s.second(r, false)
		r.c.add(time.Second)
		r.e.Step()
	}
	for _, a := range r.e.Alerts() {
		t.Logf("%s %s %v", a.Labels["severity"], a.Value, a.Evidence.Anomaly)
		if a.State == StateFiring && a.Labels["severity"] != SeverityCritical {
			t.Errorf("score %s: severity %s, want critical (over 0.99)", a.Value, a.Labels["severity"])
		}
	}
}
