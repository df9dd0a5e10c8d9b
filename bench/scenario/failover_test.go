package scenario

import (
	"context"
	"encoding/json"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/grpcwire"
	"github.com/infergate/infergate/proto/kservepb"
)

// synthRun makes a run of calls at rate per second over [0, end): at(t)
// gives the call intended at t; its latency is 10 ms unless at sets one.
func synthRun(rate, end float64, at func(t float64) FailoverCall) []FailoverCall {
	var calls []FailoverCall
	for i := 0; float64(i)/rate < end; i++ {
		t := float64(i) / rate
		c := at(t)
		c.At = t
		if c.Latency == 0 {
			c.Latency = 10
		}
		calls = append(calls, c)
	}
	return calls
}

func okOn(route string) FailoverCall { return FailoverCall{Code: codes.OK, Route: route} }

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// A clean fault: injected at 5 s, the first 0.25 s still answered (slowly)
// by the primary, then the fallback until 2.05 s after the heal at 25 s.
func cleanRun() ([]FailoverCall, FailoverWindow) {
	w := FailoverWindow{Kind: FaultHang, What: "hang", Injected: 5, Healed: 25, End: 45}
	calls := synthRun(200, 50, func(t float64) FailoverCall {
		switch {
		case t >= 5 && t < 5.25:
			return FailoverCall{Code: codes.OK, Route: RoutePrimary, Latency: 900}
		case t >= 5.25 && t < 27.05:
			return okOn(RouteFallback)
		}
		return okOn(RoutePrimary)
	})
	return calls, w
}

func TestAnalyzeCleanFault(t *testing.T) {
	calls, w := cleanRun()
	s := analyzeFault(calls, w)
	// Buckets from 5 s: [5.2, 5.3) is half primary, [5.3, 5.4) all fallback.
	if !near(s.ToFallback, 0.4) {
		t.Errorf("to fallback = %g s, want 0.4", s.ToFallback)
	}
	// From 25 s: [27.0, 27.1) mixed, [27.1, 27.2) and after all primary.
	if !near(s.ToPrimary, 2.2) {
		t.Errorf("to primary = %g s, want 2.2", s.ToPrimary)
	}
	if s.Changes != 2 || s.ExtraFlips != 0 {
		t.Errorf("changes %d, extra flips %d; want 2, 0", s.Changes, s.ExtraFlips)
	}
	if s.Calls != 40*200 || s.Failed != 0 || s.Errors != nil {
		t.Errorf("calls %d failed %d errors %v", s.Calls, s.Failed, s.Errors)
	}
	if want := 1 - 50.0/4000; !near(s.FallbackShare, want) {
		t.Errorf("fallback share %g, want %g", s.FallbackShare, want)
	}
	// 50 of the 4000 calls during the fault took 900 ms: more than 1%.
	if s.P99 != 900 {
		t.Errorf("p99 = %g, want 900", s.P99)
	}
	rep := newFailoverReport(FailoverReport{Rate: 200, Timeout: 1, Duration: 50}, int64(len(calls)), calls, []FailoverWindow{w}, nil)
	if rep.Verdict != SoakPass || rep.Faults[0].Verdict != SoakPass || !rep.Summary.Accounted {
		t.Errorf("verdict %s, fault %+v, summary %+v", rep.Verdict, rep.Faults[0], rep.Summary)
	}
	if rep.Faults[0].ProxyChanges != nil || rep.ProxyCounter {
		t.Error("proxy counter reported without deltas")
	}
}

// A call intended just before the recovery ends and still in flight when
// the next fault is injected may be answered by the fallback: it does not
// make this fault's return "never".
func TestAnalyzeIgnoresCallsMeetingTheNextFault(t *testing.T) {
	calls, w := cleanRun()
	for i := range calls {
		if c := &calls[i]; c.At >= w.End-0.02 && c.At < w.End {
			c.Route, c.Latency = RouteFallback, 30 // retried after the next injection
		}
	}
	s := analyzeFault(calls, w)
	if !near(s.ToPrimary, 2.2) || s.ExtraFlips != 0 {
		t.Errorf("to primary %g s, extra flips %d, want 2.2 and 0", s.ToPrimary, s.ExtraFlips)
	}
	if s.Calls != 40*200 {
		t.Errorf("calls %d, want every call of the window counted", s.Calls)
	}
}

func TestAnalyzeSlowFallbackFailsHangTarget(t *testing.T) {
	w := FailoverWindow{Kind: FaultHang, Injected: 5, Healed: 25, End: 45}
	calls := synthRun(200, 45, func(t float64) FailoverCall {
		if t >= 6.5 && t < 25 {
			return okOn(RouteFallback)
		}
		return okOn(RoutePrimary)
	})
	rep := newFailoverReport(FailoverReport{}, int64(len(calls)), calls, []FailoverWindow{w}, nil)
	f := rep.Faults[0]
	if !near(f.ToFallback, 1.6) || !near(f.ToPrimary, 0.1) || f.Verdict != SoakFail || rep.Verdict != SoakFail {
		t.Errorf("to fallback %g, to primary %g, verdict %s / %s", f.ToFallback, f.ToPrimary, f.Verdict, rep.Verdict)
	}
	// The same timing passes for a fault without the 1 s target.
	w.Kind = FaultErrors
	if rep := newFailoverReport(FailoverReport{}, int64(len(calls)), calls, []FailoverWindow{w}, nil); rep.Faults[0].Verdict != SoakPass {
		t.Errorf("errors fault: %+v", rep.Faults[0])
	}
}

func TestAnalyzeFlappingFault(t *testing.T) {
	w := FailoverWindow{Kind: FaultErrors, Injected: 5, Healed: 25, End: 45}
	// Over at 5 s, back to the primary for half a second twice (the
	// breaker's probes let everything through), back after the heal, and
	// one relapse 5 s after it.
	calls := synthRun(200, 45, func(t float64) FailoverCall {
		switch {
		case t >= 5 && t < 25 && !(t >= 10 && t < 10.5) && !(t >= 15 && t < 15.5):
			return okOn(RouteFallback)
		case t >= 30 && t < 30.3:
			return okOn(RouteFallback)
		case t >= 10 && t < 10.5, t >= 15 && t < 15.5:
			// Half of these fail: the majority is still the primary.
			if int(math.Round(t*200))%2 == 0 {
				return FailoverCall{Code: codes.Internal}
			}
		}
		return okOn(RoutePrimary)
	})
	s := analyzeFault(calls, w)
	// over, back, over, back, over, back (heal), over, back (relapse)
	if s.Changes != 8 || s.ExtraFlips != 6 {
		t.Errorf("changes %d, extra flips %d; want 8, 6", s.Changes, s.ExtraFlips)
	}
	if !near(s.ToFallback, 0.1) {
		t.Errorf("to fallback %g, want 0.1 (the first bucket)", s.ToFallback)
	}
	// Back from 25 s, but the relapse at 30 s restarts the staying run
	// at 30.3 s: the bucket [30.3, 30.4) ends 5.4 s after the heal.
	if !near(s.ToPrimary, 5.4) {
		t.Errorf("to primary %g, want 5.4", s.ToPrimary)
	}
	if s.Failed != 100 || s.Errors["Internal"] != 100 {
		t.Errorf("failed %d, errors %v; want 100 Internal", s.Failed, s.Errors)
	}
	deltas := map[string]*float64{FaultErrors: new(float64(7))}
	rep := newFailoverReport(FailoverReport{}, int64(len(calls)), calls, []FailoverWindow{w}, deltas)
	f := rep.Faults[0]
	if f.Verdict != SoakFail || f.ProxyChanges == nil || *f.ProxyChanges != 7 || !rep.ProxyCounter {
		t.Errorf("row %+v", f)
	}
	if !strings.Contains(rep.Table().Markdown(), " 8 (6) |") {
		t.Errorf("table lacks the changes cell:\n%s", rep.Table().Markdown())
	}
}

func TestMajorityChangesSkipsEmptyAndTiedBuckets(t *testing.T) {
	bs := []routeBucket{
		{n: 2, primary: 2}, {n: 3, failed: 3}, {n: 2, primary: 1, fallback: 1}, {}, {n: 1, fallback: 1},
		{n: 4, failed: 4}, {n: 1, primary: 1},
	}
	if got := majorityChanges(bs, RoutePrimary); got != 2 {
		t.Errorf("changes = %d, want 2", got)
	}
	// A slow start crossing half: 11:9 and 9:11 splits are no flips; a
	// clear majority back on the fallback is.
	bs = []routeBucket{
		{n: 20, fallback: 20}, {n: 20, primary: 11, fallback: 9}, {n: 20, primary: 9, fallback: 11},
		{n: 20, primary: 12, fallback: 8}, {n: 20, primary: 14, fallback: 6}, {n: 20, primary: 20},
		{n: 20, primary: 6, fallback: 14},
	}
	if got := majorityChanges(bs, RouteFallback); got != 2 {
		t.Errorf("changes over a ramp and a clear fall back = %d, want 2", got)
	}
	if got := extraFlips(1); got != 0 {
		t.Errorf("extraFlips(1) = %d", got)
	}
}

func TestTimeToRouteCountsFailedCalls(t *testing.T) {
	// 99 of 100 on the fallback is enough; 98 of 100 (2 failed) is not.
	bs := []routeBucket{{n: 100, fallback: 98, failed: 2}, {n: 100, fallback: 99, failed: 1}}
	if got := timeToRoute(bs, RouteFallback, 0.1, false); !near(got, 0.2) {
		t.Errorf("timeToRoute = %g, want 0.2", got)
	}
	if got := timeToRoute(bs[:1], RouteFallback, 0.1, false); got != -1 {
		t.Errorf("never on route: %g, want -1", got)
	}
	if got := timeToRoute([]routeBucket{{n: 1, primary: 1}, {n: 1, fallback: 1}}, RoutePrimary, 0.1, true); got != -1 {
		t.Errorf("not staying: %g, want -1", got)
	}
}

func TestAnalyzeFailuresAndSummary(t *testing.T) {
	w := FailoverWindow{Kind: FaultKill, Injected: 5, Healed: 25, End: 45}
	calls := synthRun(200, 50, func(t float64) FailoverCall {
		switch {
		case t >= 5 && t < 5.5:
			return FailoverCall{Code: codes.Unavailable, Latency: 2}
		case t >= 5.5 && t < 5.8:
			return FailoverCall{Code: codes.DeadlineExceeded, Latency: 1000}
		case t >= 5.8 && t < 25.5:
			return okOn(RouteFallback)
		case t >= 48:
			return FailoverCall{Code: codes.Unavailable} // outside the window
		}
		return okOn(RoutePrimary)
	})
	s := analyzeFault(calls, w)
	if s.Calls != 8000 || s.Failed != 160 || s.Errors["Unavailable"] != 100 || s.Errors["DeadlineExceeded"] != 60 {
		t.Errorf("calls %d failed %d errors %v", s.Calls, s.Failed, s.Errors)
	}
	rep := newFailoverReport(FailoverReport{Duration: 50}, int64(len(calls)), calls, []FailoverWindow{w}, nil)
	sum := rep.Summary
	if sum.Sent != 10000 || sum.Failed != 560 || !near(sum.FailedShare, 0.056) || sum.Verdict != SoakFail {
		t.Errorf("summary %+v", sum)
	}
	want := map[string]int64{OutcomeOKPrimary: 10000 - 560 - 3940, OutcomeOKFallback: 3940, "Unavailable": 500, "DeadlineExceeded": 60}
	for k, v := range want {
		if sum.Outcomes[k] != v {
			t.Errorf("outcome %s = %d, want %d (all: %v)", k, sum.Outcomes[k], v, sum.Outcomes)
		}
	}
	// The fault's p99 includes the failed calls at their latency (60 of
	// 4000 at 1000 ms: more than 1%).
	if s.P99 != 1000 {
		t.Errorf("p99 = %g, want 1000", s.P99)
	}
}

func TestAccountDetectsUnaccountedCalls(t *testing.T) {
	calls, w := cleanRun()
	rep := newFailoverReport(FailoverReport{}, int64(len(calls))+3, calls, []FailoverWindow{w}, nil)
	if rep.Summary.Accounted || !strings.Contains(rep.Summary.AccountError, "3 unaccounted") || rep.Verdict != SoakFail {
		t.Errorf("summary %+v, verdict %s", rep.Summary, rep.Verdict)
	}
	// Lost calls count as failed.
	if rep.Summary.Failed != 3 {
		t.Errorf("failed = %d, want 3", rep.Summary.Failed)
	}
	if md := rep.Markdown(); !strings.Contains(md, "NOT ACCOUNTED") {
		t.Errorf("markdown:\n%s", md)
	}
	calls[0].Route = ""
	if _, err := failoverAccount(int64(len(calls)), calls); err == nil || !strings.Contains(err.Error(), "1 OK calls without a route") {
		t.Errorf("route check: %v", err)
	}
}

func TestFailoverReportRenders(t *testing.T) {
	calls, w := cleanRun()
	w2 := FailoverWindow{Kind: FaultErrors, What: "100% INTERNAL", Injected: 45, Healed: 47, End: 50}
	rep := newFailoverReport(FailoverReport{Model: FailoverModel, FallbackModel: FailoverFallbackModel, Rate: 200, Timeout: 1,
		FaultTime: 20, Recovery: 20, Lead: 5, Duration: 50, Mode: FailoverModeConfig},
		int64(len(calls)), calls, []FailoverWindow{w, w2}, map[string]*float64{FaultHang: new(float64(2))})
	md := rep.Markdown()
	for _, want := range []string{"## Failover: resnet50", "| hang: hang", "| whole sequence", "extra flips = changes - 2",
		"every call accounted for", "| errors: 100% INTERNAL | 45s         |       never |", "Verdict: PASS"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
	dir := t.TempDir()
	if err := rep.WritePlots(dir); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteCallsCSV(filepath.Join(dir, "calls.csv")); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "calls.csv"))
	if err != nil || !strings.HasPrefix(string(data), "t_s,latency_ms,outcome\n0.0000,10.000,ok_primary\n") {
		t.Errorf("calls.csv: %.80q, %v", data, err)
	}
	if len(rep.Seconds) != 50 || rep.Seconds[10].FallbackShare != 1 || rep.Seconds[10].Calls != 200 {
		t.Errorf("seconds: %d, [10] = %+v", len(rep.Seconds), rep.Seconds[10])
	}
}

func TestRouteOf(t *testing.T) {
	h := func(v string) metadata.MD { return metadata.Pairs(grpcwire.HeaderRoute, v) }
	cases := []struct {
		name            string
		header, trailer metadata.MD
		model           string
		want            string
		fromHeader      bool
	}{
		{"header fallback", h("fallback"), nil, FailoverModel, RouteFallback, true},
		{"header primary wins over model", h("primary"), nil, FailoverFallbackModel, RoutePrimary, true},
		{"trailer tolerated", nil, h("fallback"), "", RouteFallback, true},
		{"model fallback", nil, nil, FailoverFallbackModel, RouteFallback, false},
		{"nothing: primary", nil, nil, FailoverModel, RoutePrimary, false},
		{"empty model: primary", nil, nil, "", RoutePrimary, false},
	}
	for _, tc := range cases {
		got, from := routeOf(tc.header, tc.trailer, tc.model, FailoverFallbackModel)
		if got != tc.want || from != tc.fromHeader {
			t.Errorf("%s: %s, %v; want %s, %v", tc.name, got, from, tc.want, tc.fromHeader)
		}
	}
}

func TestFailoverConfigYAML(t *testing.T) {
	cfg := FailoverConfig{Simserver: "x", Infergate: "y"}
	_ = cfg.Validate() // fills defaults; the binaries do not exist
	got := failoverConfigYAML(cfg, "127.0.0.1:1001", "127.0.0.1:1002")
	want := `upstreams:
  - name: primary
    address: 127.0.0.1:1001
    breaker: {consecutive_failures: 5, failure_ratio: 0.5, min_calls: 20, window: 10s, slow_call: 250ms, open_for: 2s, probes: 5}
  - name: edge
    address: 127.0.0.1:1002
routes:
  - model: resnet50
    upstream: primary
    fallback: {upstream: edge, model: mobilenet_v3}
    hedge_after: 100ms
`
	if got != want {
		t.Errorf("config =\n%s\nwant\n%s", got, want)
	}
	var doc struct {
		Upstreams []struct {
			Name, Address string
			Breaker       map[string]any
		}
		Routes []map[string]any
	}
	if err := yaml.Unmarshal([]byte(got), &doc); err != nil || len(doc.Upstreams) != 2 || doc.Upstreams[0].Breaker["probes"] != 5 {
		t.Errorf("yaml: %+v, %v", doc, err)
	}
	args := failoverInfergateArgs(cfg, "/w/infergate.yaml", "127.0.0.1:1001", "127.0.0.1:1002")
	if s := strings.Join(args, " "); !strings.HasPrefix(s, "--config /w/infergate.yaml ") || strings.Contains(s, "--upstream") {
		t.Errorf("config args: %s", s)
	}
	cfg.FlagsOnly = true
	args = failoverInfergateArgs(cfg, "/w/infergate.yaml", "127.0.0.1:1001", "127.0.0.1:1002")
	if s := strings.Join(args, " "); !strings.HasPrefix(s, "--upstream 127.0.0.1:1001 --fallback resnet50=127.0.0.1:1002/mobilenet_v3 ") || strings.Contains(s, "--config") {
		t.Errorf("flags args: %s", s)
	}
}

func TestFailoverValidate(t *testing.T) {
	cfg := FailoverConfig{Simserver: "/nonexistent/simserver", Infergate: "/nonexistent/infergate", Faults: []string{"hang", "meteor", "hang"}}
	err := cfg.Validate()
	for _, want := range []string{"binary not found", `fault "meteor"`, `fault "hang" given twice`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, lacks %q", err, want)
		}
	}
	if cfg.Rate != 200 || cfg.Timeout != time.Second || cfg.FaultTime != 20*time.Second || cfg.Breaker.Probes != 5 {
		t.Errorf("defaults not filled: %+v", cfg)
	}
	cfg = FailoverConfig{}
	_ = cfg.Validate()
	if FailoverDuration(cfg) != 5*time.Second+5*40*time.Second {
		t.Errorf("duration %s", FailoverDuration(cfg))
	}
}

func TestParseRouteChanges(t *testing.T) {
	body := "# TYPE infergate_route_changes_total counter\n" +
		"infergate_route_changes_total{model=\"resnet50\",to=\"fallback\"} 3\n" +
		"infergate_route_changes_total{model=\"resnet50\",to=\"primary\"} 2\n" +
		"# TYPE go_goroutines gauge\ngo_goroutines 12\n"
	v, ok, err := parseRouteChanges([]byte(body))
	if err != nil || !ok || v != 5 {
		t.Errorf("parse = %g, %v, %v", v, ok, err)
	}
	if _, ok, err := parseRouteChanges([]byte("# TYPE go_goroutines gauge\ngo_goroutines 12\n")); ok || err != nil {
		t.Errorf("absent: ok %v, err %v", ok, err)
	}
}

// routeServer answers ModelInfer as infergate would: call n (from 1) is
// answered by the fallback with the header when n%4 == 1, by the fallback
// without the header (model_name only) when n%4 == 2, fails when n%4 == 3,
// and is answered by the primary otherwise.
type routeServer struct {
	kservepb.UnimplementedGRPCInferenceServiceServer
	n chan struct{}
	k int
}

func (s *routeServer) ModelInfer(ctx context.Context, req *kservepb.ModelInferRequest) (*kservepb.ModelInferResponse, error) {
	<-s.n
	s.k++
	k := s.k
	s.n <- struct{}{}
	switch k % 4 {
	case 1:
		_ = grpc.SetHeader(ctx, metadata.Pairs(grpcwire.HeaderRoute, "fallback"))
		return &kservepb.ModelInferResponse{ModelName: FailoverFallbackModel}, nil
	case 2:
		return &kservepb.ModelInferResponse{ModelName: FailoverFallbackModel}, nil
	case 3:
		return nil, status.Error(codes.Unavailable, "primary down")
	}
	return &kservepb.ModelInferResponse{ModelName: req.GetModelName()}, nil
}

func TestFailoverLoadRecordsRoutes(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	srv := grpc.NewServer()
	rs := &routeServer{n: make(chan struct{}, 1)}
	rs.n <- struct{}{}
	kservepb.RegisterGRPCInferenceServiceServer(srv, rs)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	ld, err := newFailoverLoad(addr, FailoverModel, FailoverFallbackModel, 400, time.Second, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer ld.close()
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	dl, _ := ctx.Deadline()
	// Calls are intended before the deadline, measured from start: no
	// assumption on how long the machine took to get there.
	limit := dl.Sub(start).Seconds()
	ld.run(ctx, start)
	sent, calls := ld.snapshot()
	out, err := failoverAccount(sent, calls)
	if err != nil || sent < 50 {
		t.Fatalf("sent %d, outcomes %v, %v", sent, out, err)
	}
	// A quarter each: fallback by header, fallback by model_name, failed, primary.
	if d := out[OutcomeOKFallback] - 2*out["Unavailable"]; d < -2 || d > 2 {
		t.Errorf("outcomes %v", out)
	}
	if h := ld.headerSeen.Load(); h < out[OutcomeOKFallback]/2-1 || h > out[OutcomeOKFallback]/2+1 {
		t.Errorf("header seen %d times, outcomes %v", h, out)
	}
	for _, c := range calls {
		if c.At < 0 || c.At > limit || c.Latency <= 0 {
			t.Fatalf("call %+v", c)
		}
	}
}

func TestFailoverReportWithoutCallsIsJSON(t *testing.T) {
	w := FailoverWindow{Kind: FaultHang, Injected: 1, Healed: 2, End: 3}
	rep := newFailoverReport(FailoverReport{}, 0, nil, []FailoverWindow{w}, nil)
	if _, err := json.Marshal(rep); err != nil {
		t.Fatal(err)
	}
	if rep.Verdict != SoakFail || rep.Faults[0].ToFallback != -1 {
		t.Errorf("verdict %s, row %+v", rep.Verdict, rep.Faults[0])
	}
}
