package main

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tensorflowpb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

// fixedCall returns a newCall whose calls take d and then return err.
func fixedCall(d time.Duration, err error) func(*rand.Rand) func(context.Context) error {
	return func(*rand.Rand) func(context.Context) error {
		return func(ctx context.Context) error {
			time.Sleep(d)
			return err
		}
	}
}

// runFor runs g for d of (fake) time and returns its totals after the
// calls in flight have finished.
func runFor(g *generator, d time.Duration) loadSnapshot {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	g.run(ctx)
	return g.snapshot()
}

func TestGeneratorPoissonRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGenerator([]stream{
			{name: "a", rate: 50, newCall: fixedCall(0, nil)},
			{name: "off", rate: 0, newCall: fixedCall(0, status.Error(codes.Internal, "never sent"))},
		}, 256, 1)
		s := runFor(g, 20*time.Second)
		// 1000 expected; a Poisson count's standard deviation is ~32.
		if s.Sent < 850 || s.Sent > 1150 {
			t.Errorf("sent %d in 20s at 50/s", s.Sent)
		}
		if s.OK != s.Sent || s.Shed != 0 || len(s.Errors) != 0 || s.InFlight != 0 {
			t.Errorf("totals %+v", s)
		}
	})
}

// Slow responses must not slow the arrivals: that is what makes the load
// open loop and free of coordinated omission.
func TestGeneratorOpenLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGenerator([]stream{{name: "slow", rate: 20, newCall: fixedCall(2*time.Second, nil)}}, 256, 2)
		s := runFor(g, 20*time.Second)
		// A closed loop with one worker would send 10; open loop ~400.
		if s.Sent < 300 {
			t.Errorf("sent %d in 20s at 20/s with 2s responses", s.Sent)
		}
		// Stopping let the calls in flight finish rather than fail.
		if s.OK != s.Sent || s.InFlight != 0 {
			t.Errorf("totals %+v", s)
		}
	})
}

func TestGeneratorInflightCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hang := func(*rand.Rand) func(context.Context) error {
			return func(ctx context.Context) error {
				<-ctx.Done()
				return status.FromContextError(ctx.Err()).Err()
			}
		}
		g := newGenerator([]stream{{name: "hang", rate: 100, newCall: hang}}, 4, 3)
		g.callTimeout = 3 * time.Second
		s := runFor(g, 2*time.Second)
		if s.Sent != 4 || s.Shed < 100 {
			t.Errorf("sent %d shed %d; want 4 sent and the rest shed", s.Sent, s.Shed)
		}
		if s.Errors[codes.DeadlineExceeded] != 4 || s.OK != 0 {
			t.Errorf("totals %+v", s)
		}
	})
}

func TestLoadSnapshotString(t *testing.T) {
	cases := []struct {
		name string
		s    loadSnapshot
		want string
	}{
		{"clean", loadSnapshot{Sent: 5, OK: 5}, "sent 5  ok 5  errors 0  shed 0  in flight 0"},
		{"errors by code", loadSnapshot{Sent: 9, OK: 4, Shed: 2, InFlight: 1,
			Errors: map[codes.Code]uint64{codes.Unavailable: 3, codes.InvalidArgument: 1}},
			"sent 9  ok 4  errors 4 (InvalidArgument 1, Unavailable 3)  shed 2  in flight 1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.s.String(); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// fakeKServe records ModelInfer requests; other methods are not used.
type fakeKServe struct {
	kservepb.GRPCInferenceServiceClient
	mu  sync.Mutex
	got []*kservepb.ModelInferRequest
}

func (f *fakeKServe) ModelInfer(_ context.Context, in *kservepb.ModelInferRequest, _ ...grpc.CallOption) (*kservepb.ModelInferResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, in)
	return &kservepb.ModelInferResponse{}, nil
}

// fakeTF records Predict requests.
type fakeTF struct {
	tfservingpb.PredictionServiceClient
	got []*tfservingpb.PredictRequest
}

func (f *fakeTF) Predict(_ context.Context, in *tfservingpb.PredictRequest, _ ...grpc.CallOption) (*tfservingpb.PredictResponse, error) {
	f.got = append(f.got, in)
	return &tfservingpb.PredictResponse{}, nil
}

func TestDemoStreamsRequests(t *testing.T) {
	kc, tc := &fakeKServe{}, &fakeTF{}
	streams := demoStreams(kc, tc, 0.5)
	wantRates := map[string]float64{
		"kserve resnet50": 30, "tf resnet50": 10, "kserve mobilenet_v3": 40, "kserve simple": 25, "tf half_plus_two": 15,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range streams {
		if s.rate != wantRates[s.name] {
			t.Errorf("%s: rate %g, want %g", s.name, s.rate, wantRates[s.name])
		}
		for range 20 {
			if err := s.newCall(rng)(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	models := map[string]int{}
	for _, r := range kc.got {
		models[r.ModelName]++
		switch r.ModelName {
		case "resnet50", "mobilenet_v3":
			in := r.Inputs[0]
			n := in.Shape[0]
			if in.Name != "input" || in.Datatype != "FP32" || len(in.Shape) != 2 || in.Shape[1] != 64 || n < 1 || n > 8 {
				t.Errorf("%s input %v", r.ModelName, in)
			}
			if len(r.RawInputContents) != 1 || int64(len(r.RawInputContents[0])) != n*64*4 {
				t.Errorf("%s raw contents for N=%d: %d bytes", r.ModelName, n, len(r.RawInputContents[0]))
			}
		case "simple":
			if len(r.Inputs) != 2 || r.Inputs[0].Name != "INPUT0" || r.Inputs[1].Name != "INPUT1" ||
				r.Inputs[0].Datatype != "INT32" || len(r.RawInputContents) != 2 || len(r.RawInputContents[1]) != 64 {
				t.Errorf("simple request %v", r)
			}
		}
	}
	if models["resnet50"] != 20 || models["mobilenet_v3"] != 20 || models["simple"] != 20 {
		t.Errorf("kserve requests by model %v", models)
	}
	for _, r := range tc.got {
		switch r.ModelSpec.GetName() {
		case "resnet50":
			x := r.Inputs["input"]
			dims := x.GetTensorShape().GetDim()
			if x.Dtype != tensorflowpb.DataType_DT_FLOAT || len(dims) != 2 || dims[1].Size != 64 ||
				int64(len(x.TensorContent)) != dims[0].Size*64*4 {
				t.Errorf("tf resnet50 input %v", x)
			}
			v := math.Float32frombits(binary.LittleEndian.Uint32(x.TensorContent))
			if v < 0 || v >= 1 {
				t.Errorf("payload value %g outside [0,1)", v)
			}
		case "half_plus_two":
			x := r.Inputs["x"]
			if x.Dtype != tensorflowpb.DataType_DT_FLOAT || len(x.FloatVal) != 3 || x.TensorShape.Dim[0].Size != 3 {
				t.Errorf("half_plus_two input %v", x)
			}
		default:
			t.Errorf("unexpected TF model %q", r.ModelSpec.GetName())
		}
	}
	if len(tc.got) != 40 {
		t.Errorf("%d TF requests, want 40", len(tc.got))
	}
}

// One stream stuck at its cap must not shed another stream's arrivals.
func TestGeneratorCapIsPerStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hang := func(*rand.Rand) func(context.Context) error {
			return func(ctx context.Context) error {
				<-ctx.Done()
				return ctx.Err()
			}
		}
		g := newGenerator([]stream{
			{name: "stuck", rate: 100, newCall: hang},
			{name: "fine", rate: 100, newCall: fixedCall(0, nil)},
		}, 2, 4)
		g.callTimeout = time.Minute
		s := runFor(g, 5*time.Second)
		if s.OK < 400 || s.Errors[codes.Unknown] != 2 {
			t.Errorf("totals %+v: want the fine stream unshed and 2 stuck calls", s)
		}
	})
}
