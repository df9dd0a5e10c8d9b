package proxy

import (
	"io"
	"testing"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/methods"
)

// A Recorder that cannot record stream samples gets no meter.
func TestStreamMeterNeedsStreamRecorder(t *testing.T) {
	if newStreamMeter(newFakeRecorder(), methods.ModelStreamInfer, "up", "") != nil {
		t.Error("a meter for a Recorder that cannot record streams")
	}
}

// TestStreamThroughProxy runs a ModelStreamInfer stream through the proxy
// into a real registry: the pumps feed the meter, one TTFR and one
// request end per request of a model that is not decoupled.
func TestStreamThroughProxy(t *testing.T) {
	reg := monitor.NewRegistry(monitor.Options{NoRequestHistogram: true})
	e := newEnv(t, WithRecorder(reg))
	stream, err := kservepb.NewGRPCInferenceServiceClient(e.viaPxy).ModelStreamInfer(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		req := simpleRequest("simple", 64)
		req.Id = string(rune('a' + i))
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("after CloseSend: %v", err)
	}
	var ss monitor.SeriesSnapshot
	for ss.Stream == nil || ss.Calls == 0 {
		reg.Rotate()
		for _, s := range reg.Snapshot() {
			if s.Key.Method == methods.ModelStreamInfer && s.Key.CodeClass == monitor.CodeClassOK {
				ss = s
			}
		}
	}
	st := ss.Stream[monitor.Window1m]
	if st[monitor.StreamFirstResponse].Count != 5 || st[monitor.StreamResponses].Count != 5 || st[monitor.StreamResponseGap].Count != 0 {
		t.Errorf("stream stats %+v", st)
	}
	if ss.Key.Model != "simple" || ss.Key.Upstream != e.upstream || monitor.StreamResponses.Value(st[monitor.StreamResponses].Max) != 1 {
		t.Errorf("series %+v", ss.Key)
	}
}
