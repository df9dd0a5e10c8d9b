package proxy

import (
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

func TestMeasurement(t *testing.T) {
	e := newEnv(t)
	ks := kservepb.NewGRPCInferenceServiceClient(e.viaPxy)
	tf := tfservingpb.NewPredictionServiceClient(e.viaPxy)
	req := simpleRequest("simple", 4096)
	resp, err := ks.ModelInfer(ctxT(t), req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tf.Predict(ctxT(t), predictRequest("half_plus_two")); err != nil {
		t.Fatal(err)
	}
	// Half a MiB arrives in many buffers: the model name is read across them.
	if _, err := ks.ModelInfer(ctxT(t), simpleRequest("big", 256<<10)); err != nil {
		t.Fatal(err)
	}
	label := predictRequest("half_plus_two")
	label.ModelSpec.VersionChoice = &tfservingpb.ModelSpec_VersionLabel{VersionLabel: "stable"}
	if _, err := tf.Predict(ctxT(t), label); err != nil {
		t.Fatal(err)
	}
	if _, err := ks.ModelReady(ctxT(t), &kservepb.ModelReadyRequest{Name: "simple", Version: "3"}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("ModelReady: %v", err)
	}
	if _, err := healthpb.NewHealthClient(e.viaPxy).Check(ctxT(t), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}

	wants := []monitor.SeriesKey{
		{Model: "simple", Version: "1", Method: "/inference.GRPCInferenceService/ModelInfer", CodeClass: "ok", SizeClass: "le_64KiB"},
		{Model: "half_plus_two", Version: "7", Method: "/tensorflow.serving.PredictionService/Predict", CodeClass: "ok", SizeClass: "le_4KiB"},
		{Model: "big", Version: "1", Method: "/inference.GRPCInferenceService/ModelInfer", CodeClass: "ok", SizeClass: "le_1MiB"},
		{Model: "half_plus_two", Version: "stable", Method: "/tensorflow.serving.PredictionService/Predict", CodeClass: "ok", SizeClass: "le_4KiB"},
		{Model: "simple", Version: "3", Method: "/inference.GRPCInferenceService/ModelReady", CodeClass: "server_error", SizeClass: "le_4KiB"},
		{Method: "/grpc.health.v1.Health/Check", CodeClass: "ok", SizeClass: "le_4KiB"},
	}
	// A handler records after its response is sent, so records may come
	// in another order than the calls.
	got := map[monitor.SeriesKey]monitor.Sample{}
	for range wants {
		r := e.rec.next(t)
		got[r.key] = r.sm
	}
	for i, w := range wants {
		w.Upstream, w.Route = e.upstream, monitor.RoutePrimary
		sm, ok := got[w]
		if !ok {
			t.Errorf("no record %+v; got %v", w, got)
			continue
		}
		if sm.Total < sm.Upstream || sm.Upstream < 0 {
			t.Errorf("record %d: total %v < upstream %v", i, sm.Total, sm.Upstream)
		}
		if i == 0 {
			if sm.Code != "OK" || sm.BytesIn != int64(proto.Size(req)) || sm.BytesOut != int64(proto.Size(resp)) {
				t.Errorf("record 0 sample %+v, want bytes %d/%d", sm, proto.Size(req), proto.Size(resp))
			}
		}
	}
	if v := e.rec.InFlight(e.upstream).Value(); v != 0 {
		t.Errorf("in flight %d after the calls", v)
	}
}

func TestClockTimesTheCall(t *testing.T) {
	// A clock that advances one second per reading: total spans four
	// readings (start, before and after Invoke, end), upstream one.
	var mu sync.Mutex
	var tick time.Time
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		tick = tick.Add(time.Second)
		return tick
	}
	e := newEnv(t, WithClock(clock))
	if _, err := kservepb.NewGRPCInferenceServiceClient(e.viaPxy).ModelInfer(ctxT(t), simpleRequest("simple", 16)); err != nil {
		t.Fatal(err)
	}
	r := e.rec.next(t)
	if r.sm.Upstream != time.Second || r.sm.Total != 3*time.Second {
		t.Errorf("upstream %v total %v, want 1s and 3s", r.sm.Upstream, r.sm.Total)
	}
}

// signalListener reports when the server closes it, which GracefulStop does
// first.
type signalListener struct {
	net.Listener
	once   sync.Once
	closed chan struct{}
}

func (l *signalListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}
