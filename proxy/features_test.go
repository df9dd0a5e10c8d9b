package proxy

import (
	"fmt"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/infergate/infergate/monitor"
)

// shapes formats a sample's inputs as the span attribute does.
func shapes(f monitor.CallFeatures) []string {
	var out []string
	for _, in := range f.Inputs {
		out = append(out, in.String())
	}
	return out
}

// TestCallFeaturesRecorded: every call's sample says what it carried, and
// its series the class of its size, on the path the call took (the relay
// forwards these calls unless INFERGATE_TEST_GRPC_PATH is set): a small
// request read whole, a 2 MiB one that the relay forwards as it arrives
// (read from its first bytes), and a Predict.
func TestCallFeaturesRecorded(t *testing.T) {
	e := newEnv(t, WithInputShapes(true))
	for _, c := range []struct {
		method string
		req    []byte
		class  string
		rows   int64
		inputs []string
	}{
		{"/inference.GRPCInferenceService/ModelInfer", mustMarshal(t, simpleRequest("simple", 64)), monitor.SizeClass4KiB, 1,
			[]string{"INPUT0:INT32[1,16]", "INPUT1:INT32[1,16]"}},
		{"/inference.GRPCInferenceService/ModelInfer", mustMarshal(t, simpleRequest("simple", 1<<20)), monitor.SizeClass16MiB, 1,
			[]string{"INPUT0:INT32[1,262144]", "INPUT1:INT32[1,262144]"}},
		{"/tensorflow.serving.PredictionService/Predict", mustMarshal(t, predictRequest("half_plus_two")), monitor.SizeClass4KiB, 3,
			[]string{"x:DT_FLOAT[3]"}},
	} {
		t.Run(fmt.Sprint(c.method, len(c.req)), func(t *testing.T) {
			if _, err := rawInvoke(ctxT(t), e.viaPxy, c.method, c.req); err != nil {
				t.Fatal(err)
			}
			rec := e.rec.next(t)
			f := rec.sm.Features
			if rec.key.SizeClass != c.class || f.BytesIn != int64(len(c.req)) || f.BytesOut == 0 ||
				f.Rows != c.rows || f.NumInputs != len(c.inputs) || !slices.Equal(shapes(f), c.inputs) {
				t.Errorf("size class %q, features %+v %v; want %q, %d bytes in, rows %d, inputs %v",
					rec.key.SizeClass, f, shapes(f), c.class, len(c.req), c.rows, c.inputs)
			}
		})
	}
	// Methods without tensors: a size class, no rows or inputs.
	if _, err := rawInvoke(ctxT(t), e.viaPxy, "/grpc.health.v1.Health/Check", nil); err != nil {
		t.Fatal(err)
	}
	if rec := e.rec.next(t); rec.key.SizeClass != monitor.SizeClass4KiB || rec.sm.Features.NumInputs != 0 {
		t.Errorf("health check: size class %q, features %+v", rec.key.SizeClass, rec.sm.Features)
	}
}

// TestCallFeaturesOffByDefault: without WithInputShapes a sample has the
// figures but no input strings (they cost allocations on every call).
func TestCallFeaturesOffByDefault(t *testing.T) {
	e := newEnv(t)
	if _, err := rawInvoke(ctxT(t), e.viaPxy, "/inference.GRPCInferenceService/ModelInfer", mustMarshal(t, simpleRequest("simple", 64))); err != nil {
		t.Fatal(err)
	}
	if f := e.rec.next(t).sm.Features; f.Rows != 1 || f.NumInputs != 2 || f.Inputs != nil {
		t.Errorf("features %+v, want rows 1, 2 inputs, no strings", f)
	}
}

// TestTracedCallFeatures: a traced call's server span says what it
// carried.
func TestTracedCallFeatures(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	e := newEnv(t, WithTracing(tp, propagation.TraceContext{}, SemconvOld))
	req := mustMarshal(t, simpleRequest("simple", 64))
	if _, err := rawInvoke(ctxT(t), e.viaPxy, "/inference.GRPCInferenceService/ModelInfer", req); err != nil {
		t.Fatal(err)
	}
	rec := e.rec.next(t) // the call is recorded after its span ends
	var server sdktrace.ReadOnlySpan
	for _, s := range sr.Ended() {
		if s.SpanKind() == trace.SpanKindServer {
			server = s
		}
	}
	if server == nil {
		t.Fatal("no server span")
	}
	for key, want := range map[string]string{
		"infergate.request.bytes":  fmt.Sprint(len(req)),
		"infergate.response.bytes": fmt.Sprint(rec.sm.BytesOut),
		"infergate.request.rows":   "1",
		"infergate.request.inputs": `["INPUT0:INT32[1,16]","INPUT1:INT32[1,16]"]`,
	} {
		if got := spanAttr(server, key); got != want {
			t.Errorf("%s = %s, want %s", key, got, want)
		}
	}
	if spanAttr(server, "infergate.request.inputs_partial") != "" {
		t.Error("a request read whole is marked partial")
	}
}

// TestCallFeaturesLazy: without WithInputShapes a call's inputs come on
// demand (for the calls a recorder keeps), and calls of one shape share a
// ShapeKey that another shape does not.
func TestCallFeaturesLazy(t *testing.T) {
	e := newEnv(t)
	var keys []uint64
	for _, raw := range []int{64, 64, 128} {
		if _, err := rawInvoke(ctxT(t), e.viaPxy, "/inference.GRPCInferenceService/ModelInfer", mustMarshal(t, simpleRequest("simple", raw))); err != nil {
			t.Fatal(err)
		}
		r := e.rec.next(t)
		f := r.sm.Features
		if f.Lazy == nil {
			t.Fatalf("raw %d: no lazy inputs", raw)
		}
		var got []string
		for _, in := range f.Lazy.CallInputs() {
			got = append(got, in.String())
		}
		want := fmt.Sprintf("[INPUT0:INT32[1,%d] INPUT1:INT32[1,%d]]", raw/4, raw/4)
		if fmt.Sprint(got) != want {
			t.Errorf("raw %d: lazy inputs %v, want %s", raw, got, want)
		}
		if r.sm.Attempts != 1 {
			t.Errorf("raw %d: %d attempts recorded, want 1", raw, r.sm.Attempts)
		}
		keys = append(keys, f.ShapeKey)
	}
	if keys[0] == 0 || keys[0] != keys[1] || keys[0] == keys[2] {
		t.Errorf("shape keys %v: want equal nonzero keys for one shape, another for the other", keys)
	}
}
