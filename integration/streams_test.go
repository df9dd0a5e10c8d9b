package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infergate/infergate/proto/kservepb"
)

// Three decoupled models with one profile, one per phase, so that each
// phase has series of its own: 20 ms to the first of 8 responses, then one
// every 2 ms.
const streamModels = `models:
%s`

const streamModel = `  - name: %s
    kind: token_stream
    protocols: [kserve]
    inputs: [{name: max_tokens, datatype: INT32, dims: [1]}]
    outputs: [{name: token, datatype: INT32, dims: [1]}]
    latency: {base_ms: 20}
    stream: {responses: 8, token_ms: 2}
`

// Faults of the phases: a slow first response (delay_ms) and stalls
// between responses (stall_ms in a tenth of the gaps).
const (
	slowFirst = 300 * time.Millisecond
	stall     = 300 * time.Millisecond
)

// streamPhase is one model's traffic: streams clients each send requests
// on one stream, inFlight at a time, with ids or without (then matched
// first in, first out, by infergate as by this client).
type streamPhase struct {
	model    string
	fault    string // simserver fault JSON, "" for none
	streams  int
	requests int // per stream
	inFlight int
	ids      bool
}

// streamObs is what the client saw of one request: its own send and
// receipt times and simserver's stamps, all Unix nanoseconds of the one
// wall clock the processes share.
type streamObs struct {
	id       string
	sent     int64   // client, before Send
	received []int64 // client, after each Recv
	simIn    int64   // simserver: the request arrived
	simOut   []int64 // simserver: each response was handed to gRPC
}

// run drives one phase through infergate on kc and returns its requests.
func (ph streamPhase) run(kc kservepb.GRPCInferenceServiceClient) ([]*streamObs, error) {
	var (
		mu   sync.Mutex
		all  []*streamObs
		errs []error
		wg   sync.WaitGroup
	)
	for s := range ph.streams {
		wg.Go(func() {
			obs, err := ph.stream(kc, s)
			mu.Lock()
			defer mu.Unlock()
			all = append(all, obs...)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s stream %d: %w", ph.model, s, err))
			}
		})
	}
	wg.Wait()
	return all, errors.Join(errs...)
}

// stream sends the requests of one stream and reads their responses.
func (ph streamPhase) stream(kc kservepb.GRPCInferenceServiceClient, s int) ([]*streamObs, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := kc.ModelStreamInfer(ctx)
	if err != nil {
		return nil, err
	}
	var (
		mu      sync.Mutex
		byID    = map[string]*streamObs{}
		fifo    []*streamObs
		out     []*streamObs
		slots   = make(chan struct{}, ph.inFlight)
		recvErr = make(chan error, 1)
	)
	go func() {
		for range ph.requests {
			var o *streamObs
			for {
				resp, err := st.Recv()
				at := time.Now().UnixNano()
				if err != nil {
					recvErr <- err
					return
				}
				ir := resp.GetInferResponse()
				if resp.ErrorMessage != "" {
					recvErr <- fmt.Errorf("error_message %q", resp.ErrorMessage)
					return
				}
				mu.Lock()
				if ph.ids {
					o = byID[ir.Id]
				} else {
					o = fifo[0]
				}
				mu.Unlock()
				p := ir.Parameters
				o.received = append(o.received, at)
				o.simIn = p["simserver_received_unix_ns"].GetInt64Param()
				o.simOut = append(o.simOut, p["simserver_sent_unix_ns"].GetInt64Param())
				if p["triton_final_response"].GetBoolParam() {
					break
				}
			}
			mu.Lock()
			if ph.ids {
				delete(byID, o.id)
			} else {
				fifo = fifo[1:]
			}
			mu.Unlock()
			<-slots
		}
		recvErr <- nil
	}()
	for i := range ph.requests {
		slots <- struct{}{}
		req := &kservepb.ModelInferRequest{ModelName: ph.model,
			Inputs:           []*kservepb.ModelInferRequest_InferInputTensor{{Name: "max_tokens", Datatype: "INT32", Shape: []int64{1}}},
			RawInputContents: [][]byte{int32Raw([]int32{0})}}
		o := &streamObs{}
		if ph.ids {
			req.Id = strconv.Itoa(s) + "-" + strconv.Itoa(i)
			o.id = req.Id
		}
		mu.Lock()
		if ph.ids {
			byID[req.Id] = o
		} else {
			fifo = append(fifo, o)
		}
		out = append(out, o)
		o.sent = time.Now().UnixNano()
		mu.Unlock()
		if err := st.Send(req); err != nil {
			break // Recv reports why
		}
	}
	if err := <-recvErr; err != nil {
		return nil, err
	}
	if err := st.CloseSend(); err != nil {
		return nil, err
	}
	if _, err := st.Recv(); err != io.EOF {
		return nil, fmt.Errorf("end of stream: %v", err)
	}
	return out, nil
}

// bounds turns the client's observations into per-item bounds on what
// infergate may have measured, quantity by quantity (see
// TestStreamQuantilesMatchTheClient).
func bounds(obs []*streamObs) (ttfr, gap [2][]float64, responses []float64) {
	for _, o := range obs {
		// TTFR: infergate stamps the request after it arrived from the
		// client and before simserver got it, and the first response
		// after simserver sent it and before the client got it.
		ttfr[0] = append(ttfr[0], float64(o.simOut[0]-o.simIn))
		ttfr[1] = append(ttfr[1], float64(o.received[0]-o.sent))
		for k := 1; k < len(o.received); k++ {
			gap[0] = append(gap[0], float64(o.simOut[k]-o.received[k-1]))
			gap[1] = append(gap[1], float64(o.received[k]-o.simOut[k-1]))
		}
		responses = append(responses, float64(len(o.received)))
	}
	return ttfr, gap, responses
}

// orderStat is the value at rank round(pct/100·n) (at least 1) of vs,
// sorted: the rank monitor's quantiles and hdrhistogram-go use, computed
// the same way.
func orderStat(vs []float64, pct float64) float64 {
	s := slices.Clone(vs)
	sort.Float64s(s)
	r := int64(pct/100*float64(len(s)) + 0.5)
	r = min(max(r, 1), int64(len(s)))
	return s[r-1]
}

// seriesStream is one series' stream section of /api/v1/series.
type seriesStream struct {
	Model  string `json:"model"`
	Method string `json:"method"`
	Stream map[string]struct {
		FirstResponse map[string]float64 `json:"first_response"`
		ResponseGap   map[string]float64 `json:"response_gap"`
		Responses     map[string]float64 `json:"responses_per_request"`
	} `json:"stream"`
}

// TestStreamQuantilesMatchTheClient drives three decoupled models through
// infergate, one per phase (plain, a slow first response, stalls between
// responses), and checks infergate's stream quantiles against what the
// client and simserver saw of every request.
//
// The tolerance is derived, not guessed. For each request the client
// knows four instants on the one wall clock the processes share: its
// send (c_s) and receipt of each response (c_k), and simserver's stamps
// of the request's arrival (s_in) and of each response's send (s_k).
// infergate stamps the request between c_s and s_in and each response
// between s_k and c_k, so for every request
//
//	s_0 - s_in           <= TTFR <= c_0 - c_s             (the client's TTFR)
//	s_{k+1} - c_k        <= gap  <= c_{k+1} - s_k         (the client's gap ± out-hops)
//
// The width of each interval is the measured proxy hop of that request
// (both directions through infergate for TTFR, the two out-hops for a
// gap), however loaded the machine. Bounds that hold item by item hold
// for the order statistics, so infergate's quantile at rank r lies between
// the r-th lower and the r-th upper bound, up to what infergate's
// recording adds: rounding to the microsecond (±0.5 µs), an HDR bucket's
// top (at most 2^-10 relative above the value), and monotonic against
// wall-clock time (an NTP slew of at most 500 ppm: 1e-3 allowed). Responses
// per request are counts below 2,048, exact in HDR: equal. No assertion
// names an absolute duration; the faults are judged against their own size.
func TestStreamQuantilesMatchTheClient(t *testing.T) {
	var models strings.Builder
	phases := []streamPhase{
		{model: "llm_plain", streams: 3, requests: 40, inFlight: 2, ids: true},
		{model: "llm_slow_first", fault: fmt.Sprintf(`{"model":"llm_slow_first","delay_ms":%d}`, slowFirst.Milliseconds()),
			streams: 3, requests: 30, inFlight: 1, ids: true},
		{model: "llm_stall", fault: fmt.Sprintf(`{"model":"llm_stall","stall_ms":%d,"stall_rate":0.1}`, stall.Milliseconds()),
			streams: 3, requests: 30, inFlight: 1},
	}
	for _, ph := range phases {
		fmt.Fprintf(&models, streamModel, ph.model)
	}
	cfg := writeFile(t, "models.yaml", fmt.Sprintf(streamModels, models.String()))
	sim := startSim(t, "--config", cfg, "--seed", "7")
	gate := startProxy(t, sim.grpc, "--summary-windows", "1m,15m") // 15m on /metrics: the API's figures, still then
	for _, ph := range phases {
		if ph.fault != "" {
			if code, body := httpDo(t, http.MethodPost, "http://"+sim.admin+"/api/v1/faults", ph.fault); code != http.StatusOK {
				t.Fatalf("fault %s: %d %s", ph.fault, code, body)
			}
		}
	}

	// The phases run at once: bounds hold per request, whatever the load.
	kc := kservepb.NewGRPCInferenceServiceClient(dial(t, gate.grpc))
	obs := make([][]*streamObs, len(phases))
	errs := make([]error, len(phases))
	var wg sync.WaitGroup
	for i, ph := range phases {
		wg.Go(func() { obs[i], errs[i] = ph.run(kc) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}

	// Wait until infergate's completed slices hold every request.
	series := map[string]seriesStream{}
	eventually(t, "infergate's stream series to hold every request", func() bool {
		_, body := httpGet(t, "http://"+gate.admin+"/api/v1/series")
		var list []seriesStream
		if err := json.Unmarshal([]byte(body), &list); err != nil {
			t.Fatalf("/api/v1/series: %v", err)
		}
		for _, s := range list {
			if s.Stream != nil {
				series[s.Model] = s
			}
		}
		for i, ph := range phases {
			if series[ph.model].Stream["15m"].Responses["count"] != float64(len(obs[i])) {
				return false
			}
		}
		return true
	})

	const (
		hdrRel   = 1.0 / 1024 // an HDR bucket's top above its value, relative
		clockRel = 1e-3       // monotonic against wall clock (NTP slew)
		roundNS  = 1000       // rounding to the microsecond, and the cap at the exact max
	)
	check := func(model, what string, got map[string]float64, lo, hi []float64) {
		t.Helper()
		if n := got["count"]; n != float64(len(lo)) {
			t.Errorf("%s %s: infergate counted %v, the client %d", model, what, n, len(lo))
		}
		for _, q := range []struct {
			key string
			pct float64
		}{{"p50", 50}, {"p90", 90}, {"p99", 99}, {"p999", 99.9}} {
			v := got[q.key+"_seconds"] * 1e9
			l, h := orderStat(lo, q.pct), orderStat(hi, q.pct)
			t.Logf("%s %s %s: infergate %.3fms in [%.3f, %.3f]ms (client-side bounds; hop %.3fms)",
				model, what, q.key, v/1e6, l/1e6, h/1e6, (h-l)/1e6)
			if v < l*(1-clockRel)-roundNS || v > h*(1+clockRel)*(1+hdrRel)+2*roundNS {
				t.Errorf("%s %s %s: infergate %.6fms outside the client's bounds [%.6f, %.6f]ms", model, what, q.key, v/1e6, l/1e6, h/1e6)
			}
		}
	}
	for i, ph := range phases {
		s := series[ph.model].Stream["15m"]
		ttfr, gap, resp := bounds(obs[i])
		check(ph.model, "TTFR", s.FirstResponse, ttfr[0], ttfr[1])
		check(ph.model, "gap", s.ResponseGap, gap[0], gap[1])
		for _, q := range []struct {
			key string
			pct float64
		}{{"p50", 50}, {"p99", 99}, {"max", 100}} {
			if got, want := s.Responses[q.key], orderStat(resp, q.pct); got != want {
				t.Errorf("%s responses per request %s: infergate %v, client %v", ph.model, q.key, got, want)
			}
		}
	}

	// The faults, judged against their own size. A slow first response
	// moves every TTFR (simserver's timers never fire early, and
	// infergate's TTFR is at least simserver's) and not the gaps; stalls
	// move the gaps' tail and not the TTFR.
	slow, stalled := series["llm_slow_first"].Stream["15m"], series["llm_stall"].Stream["15m"]
	if p := slow.FirstResponse["p50_seconds"]; p < slowFirst.Seconds() {
		t.Errorf("slow first response: TTFR p50 %.3fs, below the injected %v", p, slowFirst)
	}
	if p := slow.FirstResponse["p99_seconds"]; p < slowFirst.Seconds() {
		t.Errorf("slow first response: TTFR p99 %.3fs, below the injected %v", p, slowFirst)
	}
	if p := slow.ResponseGap["p50_seconds"]; p > slowFirst.Seconds()/2 {
		t.Errorf("slow first response moved the gap: p50 %.3fs", p)
	}
	// How many gaps simserver stalled is fixed by --seed; check that
	// enough did for the p99 to be a stalled one.
	var gaps, stalls int
	for _, o := range obs[2] {
		for k := 1; k < len(o.simOut); k++ {
			gaps++
			if time.Duration(o.simOut[k]-o.simOut[k-1]) >= stall {
				stalls++
			}
		}
	}
	if float64(stalls) < 0.03*float64(gaps) {
		t.Fatalf("simserver stalled %d of %d gaps, too few for a p99", stalls, gaps)
	}
	if p := stalled.ResponseGap["p99_seconds"]; p < stall.Seconds()/2 {
		t.Errorf("stalls (%d of %d gaps): gap p99 %.3fs, not moved by the injected %v", stalls, gaps, p, stall)
	}
	if p := stalled.FirstResponse["p50_seconds"]; p > stall.Seconds()/2 {
		t.Errorf("stalls moved the TTFR: p50 %.3fs", p)
	}

	// Nothing was dropped, and /metrics carries the same as summaries.
	fams := scrape(t, gate.admin)
	if n := counterSum(fams, "infergate_stream_dropped_total", nil); n != 0 {
		t.Errorf("infergate_stream_dropped_total = %v, want 0", n)
	}
	if n := len(find(fams, "infergate_request_latency_seconds", map[string]string{"window": "5m"})); n != 0 {
		t.Errorf("%d summaries of the 5m window on /metrics, not asked for by --summary-windows", n)
	}
	lbl := map[string]string{"model": "llm_plain", "window": "15m"}
	if v, ok := summaryQuantile(t, fams, "infergate_stream_first_response_seconds", lbl, 0.5); !ok || v != series["llm_plain"].Stream["15m"].FirstResponse["p50_seconds"] {
		t.Errorf("/metrics TTFR p50 %v (%v), /api/v1/series %v", v, ok, series["llm_plain"].Stream["15m"].FirstResponse["p50_seconds"])
	}
	promtoolClean(t, gate.admin, "infergate_stream_first_response_seconds", "infergate_stream_response_gap_seconds",
		"infergate_stream_responses_per_request", "infergate_stream_dropped_total")
}
