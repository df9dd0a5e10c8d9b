package scenario

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	_ "google.golang.org/grpc/encoding/gzip" // the served door's clients compress
	"google.golang.org/grpc/metadata"

	"github.com/infergate/infergate/grpcwire"
	"github.com/infergate/infergate/internal/childproc"
	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/release"
)

// bench release: simserver serves resnet50 as versions 1 (stable) and 2
// (the candidate, with a fault per case), infergate splits its calls by a
// release, and an open loop sends 100 calls/s through it, recording who
// answered each call. infergate's decision (read from /api/v1/releases)
// is set beside Flagger's rule computed from the very same calls
// (flagger.go), so the two judge one run.

// Release cases.
const (
	// ReleaseAA: both versions identical; a rollback is a false alarm.
	ReleaseAA = "aa"
	// ReleaseSlow: the candidate's compute 1.3x longer, at 10%.
	ReleaseSlow = "slow"
	// ReleaseErrors: the candidate fails 2% of its calls, at 10%.
	ReleaseErrors = "errors"
	// ReleaseFast: the candidate 0.8x the stable's time, through the steps.
	ReleaseFast = "fast"
	// ReleaseShadow: a shadow copy of 20% of the calls to a candidate
	// whose top class is wrong on 3% of its answers.
	ReleaseShadow = "shadow"
	// ReleaseNone: no release, the same load: the clients' p50 and p99
	// the others are set against.
	ReleaseNone = "none"
)

// ReleaseCases are the cases in the order they run.
var ReleaseCases = []string{ReleaseNone, ReleaseAA, ReleaseSlow, ReleaseErrors, ReleaseFast, ReleaseShadow}

// Doors a release is measured on: the relay (plain calls) and grpc-go's
// server (compressed requests are handed on to it).
const (
	DoorRelay = "relay"
	DoorGRPC  = "grpc"
)

// ReleaseConfig is a bench release run.
type ReleaseConfig struct {
	Infergate, Simserver string
	// Rate is the calls/s of the open loop (100).
	Rate float64
	// Weight is the canary's weight in percent for the slow and errors
	// cases (10); Steps the fast and A/A cases' steps.
	Weight float64
	Steps  []float64
	// Cases to run (ReleaseCases by default); AARuns is the number of
	// A/A runs (20).
	Cases  []string
	AARuns int
	// Doors to run each case on (both by default).
	Doors []string
	// Duration is each run's length; FastDuration the fast case's, which
	// needs the time to pass every step.
	Duration, FastDuration time.Duration
	// MinCalls is the release's minimum candidate calls per step.
	MinCalls int
	Timeout  time.Duration

	WorkDir     string
	KeepWorkDir bool
	Log         io.Writer
}

// Validate fills the defaults and checks the binaries.
func (c *ReleaseConfig) Validate() error {
	if c.Rate == 0 {
		c.Rate = 100
	}
	if c.Weight == 0 {
		c.Weight = 10
	}
	if len(c.Steps) == 0 {
		c.Steps = []float64{10, 25, 50, 100}
	}
	if len(c.Cases) == 0 {
		c.Cases = ReleaseCases
	}
	if c.AARuns == 0 {
		c.AARuns = 20
	}
	if len(c.Doors) == 0 {
		c.Doors = []string{DoorRelay, DoorGRPC}
	}
	if c.Duration == 0 {
		c.Duration = 90 * time.Second
	}
	if c.FastDuration == 0 {
		c.FastDuration = 20 * time.Minute
	}
	if c.MinCalls == 0 {
		c.MinCalls = 200
	}
	if c.Timeout == 0 {
		c.Timeout = 2 * time.Second
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	var errs []error
	for _, cs := range c.Cases {
		if !slices.Contains(ReleaseCases, cs) {
			errs = append(errs, fmt.Errorf("release: case %q: want one of %s", cs, strings.Join(ReleaseCases, ", ")))
		}
	}
	for _, d := range c.Doors {
		if d != DoorRelay && d != DoorGRPC {
			errs = append(errs, fmt.Errorf("release: door %q: want %s or %s", d, DoorRelay, DoorGRPC))
		}
	}
	for _, b := range []string{c.Infergate, c.Simserver} {
		if _, err := os.Stat(b); err != nil {
			errs = append(errs, fmt.Errorf("release: %q: %w", b, errMissingBinary))
		}
	}
	return errors.Join(errs...)
}

// ReleaseRun is one run of a case on a door.
type ReleaseRun struct {
	Case  string `json:"case"`
	Door  string `json:"door"`
	Round int    `json:"round"`
	// Calls are the calls sent; Failed those that did not end OK.
	Calls  int `json:"calls"`
	Failed int `json:"failed"`
	// Share is the candidate's share of the calls answered before
	// infergate's first decision that moved the weight, in percent.
	Share float64 `json:"candidate_share_pct"`
	// StableP50 and StableP99 are the p50 and p99 of the calls the
	// stable version answered (ms).
	StableP50 float64 `json:"stable_p50_ms"`
	StableP99 float64 `json:"stable_p99_ms"`
	// State is the release's state at the end; Decisions the decisions
	// that changed it, with their words.
	State     string             `json:"state"`
	Decisions []release.Decision `json:"decisions"`
	// RolledBackAt and PromotedAt are seconds since the load started (-1:
	// never); CandidateCalls the candidate's calls until the rollback.
	RolledBackAt   float64 `json:"rolled_back_at_s"`
	PromotedAt     float64 `json:"promoted_at_s"`
	CandidateCalls int     `json:"candidate_calls_to_rollback"`
	// Agreement is the shadow's reported agreement (percent; -1: none).
	Agreement float64        `json:"agreement_pct"`
	Flagger   FlaggerVerdict `json:"flagger"`
}

// ReleaseResult is the whole run.
type ReleaseResult struct {
	Config ReleaseConfig `json:"-"`
	Runs   []ReleaseRun  `json:"runs"`
}

// RunRelease runs every case on every door.
func RunRelease(ctx context.Context, cfg ReleaseConfig) (*ReleaseResult, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dir, cleanup, err := workDir("release", cfg.WorkDir, cfg.KeepWorkDir)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	res := &ReleaseResult{Config: cfg}
	for _, cs := range cfg.Cases {
		rounds := 1
		if cs == ReleaseAA {
			rounds = cfg.AARuns
		}
		for round := range rounds {
			for _, door := range cfg.Doors {
				run, err := releaseRun(ctx, cfg, filepath.Join(dir, fmt.Sprintf("%s-%s-%d", cs, door, round+1)), cs, door)
				if err != nil {
					return res, fmt.Errorf("release: %s on %s, round %d: %w", cs, door, round+1, err)
				}
				run.Round = round + 1
				fmt.Fprintf(cfg.Log, "bench: release: %-6s %-5s #%-2d %s\n", cs, door, run.Round, run.line())
				res.Runs = append(res.Runs, run)
			}
		}
	}
	return res, nil
}

// releaseSpec is the release of a case: stable version 1, candidate 2.
func releaseSpec(cfg ReleaseConfig, cs string) release.Spec {
	if cs == ReleaseNone {
		return release.Spec{}
	}
	s := release.Spec{Model: FailoverModel, Stable: release.Target{Version: "1"}, Candidate: release.Target{Version: "2"}}
	s.Judgement.MinCalls = cfg.MinCalls
	switch cs {
	case ReleaseSlow, ReleaseErrors:
		s.Weight = cfg.Weight
	case ReleaseShadow:
		s.Shadow = &release.Shadow{Target: release.Target{Version: "2"}, Fraction: 0.2}
	default:
		s.Steps = cfg.Steps
		s.Judgement.StepTimeLimit = cfg.FastDuration
	}
	return s
}

// releaseFault is the candidate's simserver fault of a case; nil: none.
func releaseFault(cs string) map[string]any {
	f := map[string]any{"model": FailoverModel, "version": "2"}
	switch cs {
	case ReleaseSlow:
		f["slowdown"] = 1.3
	case ReleaseErrors:
		f["error_rate"], f["error_code"] = 0.02, "INTERNAL"
	case ReleaseFast:
		f["slowdown"] = 0.8
	case ReleaseShadow:
		f["flip_rate"] = 0.03
	default:
		return nil
	}
	return f
}

// releaseConfigYAML is infergate's --config: one upstream and the release.
func releaseConfigYAML(sim string, s release.Spec) string {
	if s.Model == "" {
		return fmt.Sprintf("upstream: %s\n", sim)
	}
	y := fmt.Sprintf("upstream: %s\nreleases:\n  - model: %s\n    stable: {version: %q}\n    candidate: {version: %q}\n",
		sim, s.Model, s.Stable.Version, s.Candidate.Version)
	if s.Weight > 0 {
		y += fmt.Sprintf("    weight: %g\n", s.Weight)
	}
	if len(s.Steps) > 0 {
		steps := make([]string, len(s.Steps))
		for i, v := range s.Steps {
			steps[i] = fmt.Sprint(v)
		}
		y += "    steps: [" + strings.Join(steps, ", ") + "]\n"
	}
	if s.Shadow != nil {
		y += fmt.Sprintf("    shadow: {target: {version: %q}, fraction: %g}\n", s.Shadow.Target.Version, s.Shadow.Fraction)
	}
	y += fmt.Sprintf("    judgement: {min_calls: %d", s.Judgement.MinCalls)
	if s.Judgement.StepTimeLimit > 0 {
		y += fmt.Sprintf(", step_time_limit: %s", s.Judgement.StepTimeLimit)
	}
	return y + "}\n"
}

// releaseRun starts simserver and infergate for one run, sends the load,
// and reads both verdicts.
func releaseRun(ctx context.Context, cfg ReleaseConfig, dir, cs, door string) (ReleaseRun, error) {
	run := ReleaseRun{Case: cs, Door: door, RolledBackAt: -1, PromotedAt: -1, Agreement: -1}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return run, err
	}
	models := filepath.Join(dir, "models.yaml")
	if err := os.WriteFile(models, []byte(releaseModelsYAML()), 0o644); err != nil {
		return run, err
	}
	sim, m, err := StartProcess(ctx, childproc.Spec{
		Name: "simserver", Path: cfg.Simserver, LogPath: filepath.Join(dir, "simserver.log"), Ready: simserverLine,
		Args: []string{"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--config", models},
	})
	if err != nil {
		return run, err
	}
	defer sim.Stop()
	simAddr, simAdmin := m[1], m[2]
	if f := releaseFault(cs); f != nil {
		if err := (simFaults{client: http.DefaultClient}).do(ctx, http.MethodPost, simAdmin, f); err != nil {
			return run, err
		}
	}
	spec := releaseSpec(cfg, cs)
	conf := filepath.Join(dir, "infergate.yaml")
	if err := os.WriteFile(conf, []byte(releaseConfigYAML(simAddr, spec)), 0o644); err != nil {
		return run, err
	}
	ig, listen, admin, err := startInfergateArgs(ctx, cfg.Infergate, filepath.Join(dir, "infergate.log"),
		[]string{"--config", conf, "--drain-delay", "0s"})
	if err != nil {
		return run, err
	}
	defer ig.Stop()

	ld, err := newFailoverLoad(listen, FailoverModel, "", cfg.Rate, cfg.Timeout, 1)
	if err != nil {
		return run, err
	}
	defer ld.close()
	ld.req.ModelVersion = "" // the release chooses
	ld.answeredBy = answeredVersion
	if door == DoorGRPC {
		ld.opts = []grpc.CallOption{grpc.UseCompressor("gzip")}
	}
	d := cfg.Duration
	if cs == ReleaseFast {
		d = cfg.FastDuration
	}
	loadCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	ld.run(loadCtx, start)
	sent, calls := ld.snapshot()
	if cs == ReleaseNone {
		run.summarise(release.Status{}, start, int(sent), calls, "")
		run.State, run.Flagger.Decision = "no release", "none"
		return run, nil
	}
	var body struct {
		Releases []release.Status `json:"releases"`
	}
	if err := getJSON(ctx, "http://"+admin+"/api/v1/releases", &body); err != nil {
		return run, fmt.Errorf("releases: %w", err)
	}
	st := body.Releases
	if len(st) != 1 {
		return run, fmt.Errorf("releases: %d releases, want 1", len(st))
	}
	run.summarise(st[0], start, int(sent), calls, spec.Candidate.Version)
	maxP99, minOK, err := FlaggerThresholds(run.releaseCalls(calls, spec.Candidate.Version), d.Seconds(), 1.2)
	if err == nil {
		checks := 0
		if len(spec.Steps) > 0 {
			checks = len(spec.Steps)
		}
		r := FlaggerRule{Interval: 60, Threshold: 5, MinSuccess: minOK, MaxP99: maxP99, Checks: checks}
		run.Flagger = r.Flagger(run.releaseCalls(calls, spec.Candidate.Version), 0, d.Seconds())
	}
	return run, nil
}

// answeredVersion is the version that answered a call: infergate's
// header, else the answer's own model_version.
func answeredVersion(header, trailer metadata.MD, resp *kservepb.ModelInferResponse) string {
	if v := header.Get(grpcwire.HeaderVersion); len(v) > 0 {
		return v[len(v)-1]
	}
	return resp.GetModelVersion()
}

// releaseCalls are the run's calls as Flagger's rule reads them.
func (r *ReleaseRun) releaseCalls(calls []FailoverCall, candidate string) []ReleaseCall {
	out := make([]ReleaseCall, len(calls))
	for i, c := range calls {
		out[i] = ReleaseCall{At: c.At, Latency: c.Latency, OK: c.Code == codes.OK, Candidate: c.Route == candidate}
	}
	return out
}

// summarise fills the run from the release's status and the calls.
func (r *ReleaseRun) summarise(st release.Status, start time.Time, sent int, calls []FailoverCall, candidate string) {
	r.Calls, r.State, r.Decisions = sent, st.State.String(), st.History
	firstMove := -1.0
	for _, d := range st.History {
		at := d.At.Sub(start).Seconds()
		if firstMove < 0 && d.From != d.To {
			firstMove = at
		}
		switch {
		case d.Kind == release.Rollback && r.RolledBackAt < 0:
			r.RolledBackAt = at
		case d.Kind == release.Promote && d.To >= 100 && r.PromotedAt < 0:
			r.PromotedAt = at
		}
	}
	if st.Evidence.Agreement != nil {
		r.Agreement = 100 * st.Evidence.Agreement.Agree
	}
	var stable []float64
	answered, cand := 0, 0
	for _, c := range calls {
		if c.Code != codes.OK {
			r.Failed++
		}
		if r.RolledBackAt >= 0 && c.At < r.RolledBackAt && c.Route == candidate {
			r.CandidateCalls++
		}
		if c.Code == codes.OK && c.Route != candidate {
			stable = append(stable, c.Latency)
		}
		if c.Code == codes.OK && (firstMove < 0 || c.At < firstMove) {
			answered++
			if c.Route == candidate {
				cand++
			}
		}
	}
	if answered > 0 {
		r.Share = 100 * float64(cand) / float64(answered)
	}
	if len(stable) > 0 {
		r.StableP50, r.StableP99 = quantile(stable, 0.5), quantile(stable, 0.99)
	}
}

// releaseModelsYAML serves resnet50 (examples/simserver's) as versions
// 1 and 2.
func releaseModelsYAML() string {
	return strings.Replace(failoverModelsYAML(FailoverModel, 1, 5, 0.25, 0.01), "    slots: 1\n",
		"    slots: 1\n    versions: [\"1\", \"2\"]\n", 1)
}

func (r ReleaseRun) line() string {
	s := fmt.Sprintf("%s: share %.1f%%, stable p50 %.2fms p99 %.1fms, %d/%d failed", r.State, r.Share, r.StableP50, r.StableP99, r.Failed, r.Calls)
	if r.RolledBackAt >= 0 {
		s += fmt.Sprintf(", rolled back at %.0fs after %d candidate calls", r.RolledBackAt, r.CandidateCalls)
	}
	if r.PromotedAt >= 0 {
		s += fmt.Sprintf(", at 100%% at %.0fs", r.PromotedAt)
	}
	if r.Agreement >= 0 {
		s += fmt.Sprintf(", agreement %.1f%%", r.Agreement)
	}
	return s + fmt.Sprintf("; Flagger: %s at %.0fs", r.Flagger.Decision, r.Flagger.At)
}

// Markdown is the report: a row per case and door (A/A's runs in one:
// states and Flagger's decisions counted, medians of the rest),
// infergate's decision beside Flagger's.
func (r *ReleaseResult) Markdown() string {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "## bench release\n\nresnet50 versions 1 (stable) and 2 (candidate) on one simserver, %g calls/s open loop, %s runs (the fast case %s); canary at %g%% for the slow and errors cases, steps %v otherwise; min %d candidate calls a step. Flagger: 1-minute checks, rollback after 5 failed, p99 bound 1.2x the stable p99 and success bound 1 point under the stable's (at most 99%%), computed from the same calls.\n\n",
		c.Rate, c.Duration, c.FastDuration, c.Weight, c.Steps, c.MinCalls)
	b.WriteString("| case | door | runs | infergate | at (s) | candidate calls | share % | stable p50 ms | stable p99 ms | agreement % | Flagger | at (s) |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	type key struct{ cs, door string }
	groups := map[key][]ReleaseRun{}
	var order []key
	for _, run := range r.Runs {
		k := key{run.Case, run.Door}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], run)
	}
	for _, k := range order {
		runs := groups[k]
		if len(runs) > 1 {
			states, flagger := map[string]int{}, map[string]int{}
			var shares, p50s, p99s []float64
			for _, run := range runs {
				states[run.State]++
				flagger[run.Flagger.Decision]++
				shares, p50s, p99s = append(shares, run.Share), append(p50s, run.StableP50), append(p99s, run.StableP99)
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %s | | | %.1f | %.2f | %.1f | | %s | |\n", k.cs, k.door, len(runs), counts(states),
				quantile(shares, 0.5), quantile(p50s, 0.5), quantile(p99s, 0.5), counts(flagger))
			continue
		}
		run := runs[0]
		at, calls, agree := "", "", ""
		switch {
		case run.RolledBackAt >= 0:
			at, calls = fmt.Sprintf("%.0f", run.RolledBackAt), fmt.Sprint(run.CandidateCalls)
		case run.PromotedAt >= 0:
			at = fmt.Sprintf("%.0f", run.PromotedAt)
		}
		if run.Agreement >= 0 {
			agree = fmt.Sprintf("%.1f", run.Agreement)
		}
		fat := ""
		if run.Flagger.Decision != "none" {
			fat = fmt.Sprintf("%.0f", run.Flagger.At)
		}
		fmt.Fprintf(&b, "| %s | %s | 1 | %s | %s | %s | %.1f | %.2f | %.1f | %s | %s | %s |\n", k.cs, k.door, run.State, at, calls, run.Share, run.StableP50, run.StableP99, agree, run.Flagger.Decision, fat)
	}
	b.WriteString("\nThe decisions in infergate's words:\n\n")
	for _, run := range r.Runs {
		for _, d := range run.Decisions {
			if d.Kind != release.Hold {
				fmt.Fprintf(&b, "- %s, %s #%d: %s %g%% → %g%%: %s\n", run.Case, run.Door, run.Round, d.Kind, d.From, d.To, d.Reason)
			}
		}
	}
	return b.String()
}

// counts writes a tally as "rolled_back 1, running 19".
func counts(m map[string]int) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
