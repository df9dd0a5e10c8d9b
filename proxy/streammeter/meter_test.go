package streammeter

import (
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/methods"
	"github.com/infergate/infergate/proto/wire"
)

// streamRecord is one RecordStream the fake saw.
type streamRecord struct {
	key monitor.SeriesKey
	sm  monitor.StreamSample
}

// fakeStreamRecorder is a Recorder that keeps everything it is given.
type fakeStreamRecorder struct {
	mu      sync.Mutex
	samples []streamRecord
	drops   map[monitor.StreamDrop]int
}

func newFakeStreamRecorder() *fakeStreamRecorder {
	return &fakeStreamRecorder{drops: map[monitor.StreamDrop]int{}}
}

func (r *fakeStreamRecorder) RecordStream(key monitor.SeriesKey, sm monitor.StreamSample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples = append(r.samples, streamRecord{key, sm})
}

func (r *fakeStreamRecorder) StreamDropped(reason monitor.StreamDrop) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drops[reason]++
}

// take returns and forgets what was recorded.
func (r *fakeStreamRecorder) take() []streamRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.samples
	r.samples = nil
	return out
}

// meterClock hands out times a millisecond apart and names them by index.
type meterClock struct{ t0 time.Time }

func (c meterClock) at(ms int) time.Time { return c.t0.Add(time.Duration(ms) * time.Millisecond) }

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func reqFrame(t *testing.T, model, id string) []byte {
	t.Helper()
	return mustMarshal(t, &kservepb.ModelInferRequest{ModelName: model, ModelVersion: "1", Id: id,
		RawInputContents: [][]byte{make([]byte, 64)}})
}

// respFrame is a response to id; final is "" for no flag, else "true" or
// "false"; outputs false makes Triton's empty response.
func respFrame(t *testing.T, id, final string, outputs bool) []byte {
	t.Helper()
	r := &kservepb.ModelInferResponse{ModelName: "llm", Id: id}
	if final != "" {
		r.Parameters = map[string]*kservepb.InferParameter{"triton_final_response": {
			ParameterChoice: &kservepb.InferParameter_BoolParam{BoolParam: final == "true"}}}
	}
	if outputs {
		r.Outputs = []*kservepb.ModelInferResponse_InferOutputTensor{{Name: "token", Datatype: "INT32", Shape: []int64{1}}}
		r.RawOutputContents = [][]byte{{1, 0, 0, 0}}
	}
	return mustMarshal(t, &kservepb.ModelStreamInferResponse{InferResponse: r})
}

// request is the client-to-upstream pump's call: the request's scan,
// then the meter.
func request(m *Meter, b []byte, at time.Time) {
	info, err := wire.ScanInferRequest(b)
	m.Request(info, err, at)
}

// respond is the other pump's.
func respond(t *testing.T, m *Meter, b []byte, at time.Time) {
	t.Helper()
	info, err := wire.ScanStreamResponse(b)
	m.Response(info, err, at)
}

func TestStreamMeterMatches(t *testing.T) {
	clk := meterClock{time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	type step struct {
		req            bool
		model, id, fin string
		outputs        bool
		ms             int
	}
	r := func(id string, ms int) step { return step{req: true, model: "llm", id: id, ms: ms} }
	resp := func(id, fin string, ms int) step { return step{id: id, fin: fin, outputs: true, ms: ms} }
	first := func(ms int) monitor.StreamSample {
		return monitor.StreamSample{Response: true, First: true, Wait: time.Duration(ms) * time.Millisecond}
	}
	gap := func(ms int) monitor.StreamSample {
		return monitor.StreamSample{Response: true, Wait: time.Duration(ms) * time.Millisecond}
	}
	done := func(s monitor.StreamSample, n int) monitor.StreamSample { s.Done, s.Responses = true, n; return s }
	cases := []struct {
		name      string
		steps     []step
		endOK     bool
		want      []monitor.StreamSample
		unmatched int
	}{
		{
			name: "two ids interleaved, flagged by Triton",
			steps: []step{r("a", 0), r("b", 5), resp("b", "false", 20), resp("a", "false", 30),
				resp("a", "false", 34), resp("b", "true", 40), resp("a", "true", 41)},
			want: []monitor.StreamSample{first(15), first(30), gap(4), done(gap(20), 2), done(gap(7), 3)},
		},
		{
			name:  "no ids: first in, first out",
			steps: []step{r("", 0), r("", 1), resp("", "false", 10), resp("", "true", 12), resp("", "true", 20)},
			want:  []monitor.StreamSample{first(10), done(gap(2), 2), done(first(19), 1)},
		},
		{
			name:  "no flag: one response per request (a model that is not decoupled)",
			steps: []step{r("x", 0), r("x", 2), resp("x", "", 10), resp("x", "", 11)},
			want:  []monitor.StreamSample{done(first(10), 1), done(first(9), 1)},
		},
		{
			name: "empty final response ends without counting",
			steps: []step{r("a", 0), resp("a", "false", 10), resp("a", "false", 15),
				{id: "a", fin: "true", ms: 16}},
			want: []monitor.StreamSample{first(10), gap(5), {Done: true, Responses: 2}},
		},
		{
			name:      "unknown id and unflagged leftovers at a clean end",
			steps:     []step{r("a", 0), resp("zz", "true", 3), resp("a", "false", 4), resp("a", "false", 9)},
			endOK:     true,
			want:      []monitor.StreamSample{first(4), gap(5), {Done: true, Responses: 2}},
			unmatched: 1,
		},
		{
			name:  "a broken stream records no leftovers",
			steps: []step{r("a", 0), resp("a", "false", 4)},
			want:  []monitor.StreamSample{first(4)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := newFakeStreamRecorder()
			m := New(rec, methods.ModelStreamInfer, "up", "")
			for _, s := range tc.steps {
				if s.req {
					request(m, reqFrame(t, s.model, s.id), clk.at(s.ms))
				} else {
					respond(t, m, respFrame(t, s.id, s.fin, s.outputs), clk.at(s.ms))
				}
			}
			m.End(tc.endOK)
			got := rec.take()
			if len(got) != len(tc.want) {
				t.Fatalf("recorded %+v, want %+v", got, tc.want)
			}
			for i, g := range got {
				if g.sm != tc.want[i] {
					t.Errorf("sample %d: %+v, want %+v", i, g.sm, tc.want[i])
				}
				want := monitor.SeriesKey{Model: "llm", Version: "1", Method: methods.ModelStreamInfer, Upstream: "up",
					CodeClass: monitor.CodeClassOK, Route: monitor.RoutePrimary}
				if g.key != want {
					t.Errorf("sample %d key %+v", i, g.key)
				}
			}
			if rec.drops[monitor.StreamDropUnmatched] != tc.unmatched {
				t.Errorf("unmatched %d, want %d", rec.drops[monitor.StreamDropUnmatched], tc.unmatched)
			}
		})
	}
}

func TestStreamMeterEdges(t *testing.T) {
	clk := meterClock{time.Now()}
	rec := newFakeStreamRecorder()
	m := New(rec, methods.ModelStreamInfer, "up", monitor.RouteFallback)
	// Each request is labelled with its own model.
	request(m, reqFrame(t, "a", "1"), clk.at(0))
	request(m, reqFrame(t, "b", "2"), clk.at(0))
	respond(t, m, respFrame(t, "2", "true", true), clk.at(3))
	respond(t, m, respFrame(t, "1", "true", true), clk.at(4))
	// An error ends its request unmeasured; garbage is unmatched.
	request(m, reqFrame(t, "a", "3"), clk.at(5))
	m.Response(scanErr(t, &kservepb.ModelStreamInferResponse{ErrorMessage: "boom",
		InferResponse: &kservepb.ModelInferResponse{Id: "3"}}), nil, clk.at(6))
	respond(t, m, respFrame(t, "3", "true", true), clk.at(7)) // nothing waits for 3 any more
	respond(t, m, []byte{0x0a, 0x09}, clk.at(8))
	// A malformed request is not remembered.
	request(m, []byte{0xff}, clk.at(9))
	got := rec.take()
	if len(got) != 2 || got[0].key.Model != "b" || got[1].key.Model != "a" || got[0].key.Route != monitor.RouteFallback {
		t.Fatalf("recorded %+v", got)
	}
	if rec.drops[monitor.StreamDropUnmatched] != 2 || m.n != 0 {
		t.Errorf("unmatched %d, outstanding %d; want 2 and 0", rec.drops[monitor.StreamDropUnmatched], m.n)
	}
}

func scanErr(t *testing.T, r *kservepb.ModelStreamInferResponse) wire.StreamResponseInfo {
	t.Helper()
	info, err := wire.ScanStreamResponse(mustMarshal(t, r))
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// TestStreamMeterIsBounded: a client that sends ten times the cap of requests that
// are never answered, with 64 KiB ids, holds the meter at its cap; the
// forgotten ones are counted, the newest still match.
func TestStreamMeterIsBounded(t *testing.T) {
	rec := newFakeStreamRecorder()
	m := New(rec, methods.ModelStreamInfer, "up", "")
	at := time.Now()
	long := strings.Repeat("x", 64<<10)
	for i := range 10 * maxOutstanding {
		id := string(rune('a'+i%26)) + long + string(rune(i))
		request(m, reqFrame(t, "llm", id), at)
		if m.n > maxOutstanding || len(m.byID) > maxOutstanding {
			t.Fatalf("after %d requests: %d outstanding, %d ids", i+1, m.n, len(m.byID))
		}
	}
	for k := range m.byID {
		if len(k) > maxIDKey {
			t.Fatalf("an id key of %d bytes", len(k))
		}
	}
	if got := rec.drops[monitor.StreamDropOutstanding]; got != 9*maxOutstanding {
		t.Errorf("%d dropped, want %d", got, 9*maxOutstanding)
	}
	last := 10*maxOutstanding - 1
	respond(t, m, respFrame(t, string(rune('a'+last%26))+long+string(rune(last)), "true", true), at.Add(time.Millisecond))
	if got := rec.take(); len(got) != 1 || got[0].sm.Responses != 1 {
		t.Errorf("the newest request did not match: %+v", got)
	}
	// Spare pendings are reused: a request without an id and its answer
	// allocate nothing in the meter.
	m.rec = discardStreams{}
	req, resp := reqFrame(t, "llm", ""), respFrame(t, "", "", true)
	if allocs := testing.AllocsPerRun(100, func() {
		request(m, req, at)
		respond(t, m, resp, at)
	}); allocs != 0 {
		t.Errorf("%.1f allocations per request and response", allocs)
	}
	if m.n != maxOutstanding-1 {
		t.Errorf("%d outstanding after matched pairs, want %d", m.n, maxOutstanding-1)
	}
}

// discardStreams records nothing.
type discardStreams struct{}

func (discardStreams) RecordStream(monitor.SeriesKey, monitor.StreamSample) {}
func (discardStreams) StreamDropped(monitor.StreamDrop)                     {}

// BenchmarkStreamMeter is the meter's cost per request and response of
// one token, with an id: both scans, the match and a registry's record.
func BenchmarkStreamMeter(b *testing.B) {
	reg := monitor.NewRegistry(monitor.Options{NoRequestHistogram: true})
	m := New(reg, methods.ModelStreamInfer, "up", "")
	marshal := func(m proto.Message) []byte {
		out, err := proto.Marshal(m)
		if err != nil {
			b.Fatal(err)
		}
		return out
	}
	req := marshal(&kservepb.ModelInferRequest{ModelName: "llm", Id: "req-0123456789",
		Inputs: []*kservepb.ModelInferRequest_InferInputTensor{{Name: "max_tokens", Datatype: "INT32", Shape: []int64{1}}}, RawInputContents: [][]byte{{4, 0, 0, 0}}})
	resp := marshal(&kservepb.ModelStreamInferResponse{InferResponse: &kservepb.ModelInferResponse{
		ModelName: "llm", Id: "req-0123456789", Parameters: map[string]*kservepb.InferParameter{"triton_final_response": {
			ParameterChoice: &kservepb.InferParameter_BoolParam{BoolParam: true}}},
		Outputs:           []*kservepb.ModelInferResponse_InferOutputTensor{{Name: "token", Datatype: "INT32", Shape: []int64{1}}},
		RawOutputContents: [][]byte{{1, 0, 0, 0}}}})
	at := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		request(m, req, at)
		info, err := wire.ScanStreamResponse(resp)
		m.Response(info, err, at)
	}
}
