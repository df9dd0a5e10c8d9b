package integration

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/proto/kservepb"
)

// otlpReceiver is an OTLP/gRPC trace collector in the test process, as
// opentelemetry-go tests its own exporter: it keeps every span it gets.
type otlpReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	addr  string
	mu    sync.Mutex
	spans []*tracepb.Span
}

func startOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{addr: lis.Addr().String()}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, r)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return r
}

func (r *otlpReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			r.spans = append(r.spans, ss.Spans...)
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// inTrace returns the spans of trace id so far.
func (r *otlpReceiver) inTrace(id []byte) []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range r.spans {
		if bytes.Equal(s.TraceId, id) {
			out = append(out, s)
		}
	}
	return out
}

// byID returns the span with id, or nil.
func (r *otlpReceiver) byID(id []byte) *tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.spans {
		if bytes.Equal(s.SpanId, id) {
			return s
		}
	}
	return nil
}

// attr returns a span attribute's value as text ("" if absent).
func attr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return anyText(kv.Value)
		}
	}
	return ""
}

func anyText(v *commonpb.AnyValue) string {
	switch x := v.Value.(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	}
	return ""
}

// traceparent makes a sampled W3C trace context for test call n: the
// client's span, the parent of infergate's server span.
func traceparent(n int) (header string, traceID, spanID []byte) {
	traceID, _ = hex.DecodeString(fmt.Sprintf("%032x", 0x7e57_0000+n))
	spanID, _ = hex.DecodeString(fmt.Sprintf("%016x", 0xc11e_0000+n))
	return fmt.Sprintf("00-%x-%x-01", traceID, spanID), traceID, spanID
}

// TestTracingPlainBatchedFallback runs infergate with tracing to an OTLP
// receiver and checks the spans of a plain call, of calls merged into one
// batch, and of a forced fallback call: the client's trace is the parent,
// each upstream attempt is a client span under the server span, and a
// batch is one span linked to each caller's attempt span and back.
func TestTracingPlainBatchedFallback(t *testing.T) {
	rcv := startOTLPReceiver(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50") // export within 50ms, not 5s
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("tr4ce\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newFailoverEnv(t, "--tracing", "--trace-protocol", "grpc", "--trace-endpoint", "http://"+rcv.addr,
		"--batching", "static", "--batch-models", "resnet50", "--batch-max-size", "4", "--batch-max-delay", "5s", // a full batch (4) goes at once
		"--admin-token-file", token)
	ctx := testCtx(t)
	call := func(n, rows int, model string) {
		t.Helper()
		tp, _, _ := traceparent(n)
		cctx := metadata.AppendToOutgoingContext(ctx, "traceparent", tp)
		if _, err := e.kc.ModelInfer(cctx, resnetRequest(model, rows)); err != nil {
			t.Errorf("call %d: %v", n, err)
		}
	}
	// spansOf waits for the server span of call n and its attempt spans.
	spansOf := func(n int) (server *tracepb.Span, attempts []*tracepb.Span) {
		t.Helper()
		_, tid, sid := traceparent(n)
		waitFor(t, 30*time.Second, fmt.Sprintf("call %d's server span and its attempt", n), func() bool {
			server, attempts = nil, nil
			for _, s := range rcv.inTrace(tid) {
				switch s.Kind {
				case tracepb.Span_SPAN_KIND_SERVER:
					server = s
				case tracepb.Span_SPAN_KIND_CLIENT:
					attempts = append(attempts, s)
				}
			}
			return server != nil && len(attempts) > 0
		})
		if !bytes.Equal(server.ParentSpanId, sid) {
			t.Errorf("call %d: server span's parent %x, want the client's span %x", n, server.ParentSpanId, sid)
		}
		for _, a := range attempts {
			if !bytes.Equal(a.ParentSpanId, server.SpanId) {
				t.Errorf("call %d: attempt span's parent %x, want the server span %x", n, a.ParentSpanId, server.SpanId)
			}
		}
		return server, attempts
	}

	// A plain call: mobilenet_v3 is neither batched nor routed.
	call(1, 1, "mobilenet_v3")
	srv, att := spansOf(1)
	if srv.Name != "inference.GRPCInferenceService/ModelInfer" || attr(srv, "rpc.system") != "grpc" ||
		attr(srv, "rpc.method") != "ModelInfer" || attr(srv, "rpc.grpc.status_code") != "0" || attr(srv, "infergate.model") != "mobilenet_v3" {
		t.Errorf("plain call's server span: %s %v", srv.Name, srv.Attributes)
	}
	if len(att) != 1 || attr(att[0], "infergate.attempt") != "primary" || attr(att[0], "server.address") != e.pri.grpc {
		t.Errorf("plain call's attempts: %v", att)
	}

	// Four callers at once ride in one batch (max size 4).
	var wg sync.WaitGroup
	for n := 10; n < 14; n++ {
		wg.Go(func() { call(n, 1, "resnet50") })
	}
	wg.Wait()
	var batchID []byte
	for n := 10; n < 14; n++ {
		srv, att := spansOf(n)
		if len(att) != 1 || len(att[0].Links) != 1 {
			t.Fatalf("batched call %d: attempts %v, want one linked to its batch", n, att)
		}
		if q := attr(srv, "infergate.queue_seconds"); q == "" {
			t.Errorf("batched call %d: no queue time on the server span", n)
		}
		link := att[0].Links[0].SpanId
		if batchID == nil {
			batchID = link
		} else if !bytes.Equal(batchID, link) {
			t.Errorf("batched call %d links batch %x, call 10 batch %x: not one batch", n, link, batchID)
		}
	}
	var batch *tracepb.Span
	waitFor(t, 30*time.Second, "the batch's span", func() bool { batch = rcv.byID(batchID); return batch != nil })
	if attr(batch, "infergate.batch.size") != "4" || attr(batch, "infergate.batch.rows") != "4" || len(batch.ParentSpanId) != 0 {
		t.Errorf("batch span: parent %x, attributes %v; want a root of 4 calls and 4 rows", batch.ParentSpanId, batch.Attributes)
	}
	linked := map[string]bool{}
	for _, l := range batch.Links {
		linked[hex.EncodeToString(l.SpanId)] = true
	}
	for n := 10; n < 14; n++ {
		_, att := spansOf(n)
		if !linked[hex.EncodeToString(att[0].SpanId)] {
			t.Errorf("the batch span does not link call %d's attempt", n)
		}
	}

	// A call forced onto the fallback.
	req, _ := http.NewRequest("POST", "http://"+e.gate.admin+"/api/v1/routes/resnet50", strings.NewReader(`{"route":"fallback"}`))
	req.Header.Set("Authorization", "Bearer tr4ce")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("force fallback: %s", resp.Status)
	}
	call(20, 1, "resnet50")
	srv, att = spansOf(20)
	if attr(srv, "infergate.route") != "fallback" || attr(srv, "infergate.route_reason") != "forced" {
		t.Errorf("fallback call's server span: %v", srv.Attributes)
	}
	if len(att) != 1 || attr(att[0], "infergate.attempt") != "forced" || attr(att[0], "server.address") != e.edge.grpc ||
		attr(att[0], "infergate.model") != "mobilenet_v3" {
		t.Errorf("fallback call's attempt: %v", att)
	}
}

// TestTailSamplingKeepsFailedCalls runs infergate with tail-based sampling
// at a budget of 2 spans a second, far under the load, against a model
// that fails a fifth of its calls: every failed call's spans reach the
// collector, most of the rest do not, and the sampler's rate and counts
// are on /metrics, promtool-clean.
func TestTailSamplingKeepsFailedCalls(t *testing.T) {
	rcv := startOTLPReceiver(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	sim := startSim(t)
	gate := startProxy(t, sim.grpc, "--tracing", "--trace-protocol", "grpc", "--trace-endpoint", "http://"+rcv.addr,
		"--trace-max-spans-per-second", "2")
	kc := kservepb.NewGRPCInferenceServiceClient(dial(t, gate.grpc))
	fault(t, sim.admin, `{"model":"mobilenet_v3","error_rate":0.2,"error_code":"INTERNAL"}`)
	ctx := testCtx(t)
	var failed []int
	n := 0
	call := func() {
		n++
		tp, _, _ := traceparent(1000 + n)
		cctx := metadata.AppendToOutgoingContext(ctx, "traceparent", tp)
		if _, err := kc.ModelInfer(cctx, resnetRequest("mobilenet_v3", 1)); status.Code(err) == codes.Internal {
			failed = append(failed, 1000+n)
		} else if err != nil {
			t.Fatalf("call %d: %v", n, err)
		}
	}
	ratio := func() float64 {
		m := find(scrape(t, gate.admin), "infergate_tracing_sample_ratio", nil)
		if len(m) != 1 {
			t.Fatalf("infergate_tracing_sample_ratio: %d series", len(m))
		}
		return m[0].GetGauge().GetValue()
	}
	// Calls until the rate controller has seen a second of them and
	// lowered the rate, and at least 200.
	for n < 200 || ratio() >= 1 {
		for range 20 {
			call()
		}
		if n > 20000 {
			t.Fatalf("ratio still %v after %d calls", ratio(), n)
		}
	}
	if len(failed) == 0 {
		t.Fatal("no call failed")
	}
	for _, c := range failed {
		_, tid, _ := traceparent(c)
		waitFor(t, 30*time.Second, fmt.Sprintf("failed call %d's server and attempt spans", c), func() bool {
			return len(rcv.inTrace(tid)) >= 2
		})
	}
	fams := scrape(t, gate.admin)
	kept := counterSum(fams, "infergate_tracing_spans_total", map[string]string{"decision": "error"})
	dropped := counterSum(fams, "infergate_tracing_spans_total", map[string]string{"decision": "dropped"})
	if kept < float64(2*len(failed)) || dropped == 0 {
		t.Errorf("spans kept as errors %v (want at least %d), dropped %v (want some):\n%s", kept, 2*len(failed), dropped,
			dumpFamilies(fams, "infergate_tracing_"))
	}
	rcv.mu.Lock()
	total := len(rcv.spans)
	rcv.mu.Unlock()
	t.Logf("%d calls, %d failed; %d spans exported; ratio %v", n, len(failed), total, ratio())
	if total >= 2*n {
		t.Errorf("%d spans exported of %d calls: nothing dropped", total, n)
	}
	promtoolClean(t, gate.admin, "infergate_tracing_sample_ratio", "infergate_tracing_spans_total",
		"infergate_tracing_max_spans_per_second", "infergate_tracing_buffered_spans")
}
