package main

import (
	"context"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/admin"
	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

type kserveReady struct {
	kservepb.UnimplementedGRPCInferenceServiceServer
	ready bool
}

func (k kserveReady) ServerReady(context.Context, *kservepb.ServerReadyRequest) (*kservepb.ServerReadyResponse, error) {
	return &kservepb.ServerReadyResponse{Ready: k.ready}, nil
}

type tfMetadata struct {
	tfservingpb.UnimplementedPredictionServiceServer
	model string
}

func (t tfMetadata) GetModelMetadata(_ context.Context, req *tfservingpb.GetModelMetadataRequest) (*tfservingpb.GetModelMetadataResponse, error) {
	switch req.GetModelSpec().GetName() {
	case "":
		return nil, status.Error(codes.InvalidArgument, "Missing ModelSpec")
	case t.model:
		return &tfservingpb.GetModelMetadataResponse{}, nil
	}
	return nil, status.Error(codes.NotFound, "Servable not found for request: Latest("+req.GetModelSpec().GetName()+")")
}

// serveGRPC starts a gRPC server with register's services on loopback and
// returns a client connection to it.
func serveGRPC(t *testing.T, register func(*grpc.Server)) (string, *grpc.ClientConn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	register(s)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return lis.Addr().String(), cc
}

func checkOnce(t *testing.T, cfg ReadinessConfig, addr string, cc grpc.ClientConnInterface, recent func() (uint64, uint64)) admin.ReadyState {
	t.Helper()
	cfg.Interval, cfg.Timeout = defaultReadyInterval, defaultReadyTimeout
	r := newReadiness(cfg, func() string { return addr }, cc, recent)
	r.check(context.Background())
	return r.current()
}

func TestReadinessProbes(t *testing.T) {
	hs := health.NewServer()
	healthAddr, healthCC := serveGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, hs) })
	kAddr, kCC := serveGRPC(t, func(s *grpc.Server) { kservepb.RegisterGRPCInferenceServiceServer(s, kserveReady{ready: true}) })
	kNotAddr, kNotCC := serveGRPC(t, func(s *grpc.Server) { kservepb.RegisterGRPCInferenceServiceServer(s, kserveReady{}) })
	tfAddr, tfCC := serveGRPC(t, func(s *grpc.Server) {
		tfservingpb.RegisterPredictionServiceServer(s, tfMetadata{model: "half_plus_two"})
	})

	// A port nothing listens on: the probe fails fast with UNAVAILABLE.
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	deadAddr := lis.Addr().String()
	lis.Close()
	deadCC, _ := grpc.NewClient(deadAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer deadCC.Close()

	cases := []struct {
		name      string
		cfg       ReadinessConfig
		addr      string
		cc        grpc.ClientConnInterface
		ready     bool
		probe     string
		reasonHas string
	}{
		{"health serving", ReadinessConfig{Probe: "auto"}, healthAddr, healthCC, true, "grpc.health.v1", "SERVING"},
		{"kserve only", ReadinessConfig{Probe: "auto"}, kAddr, kCC, true, "kserve.ServerReady", "ready=true"},
		{"kserve not ready", ReadinessConfig{Probe: "auto"}, kNotAddr, kNotCC, false, "kserve.ServerReady", "ready=false"},
		{"tfserving model", ReadinessConfig{Probe: "auto", Model: "half_plus_two"}, tfAddr, tfCC, true, "tfserving.GetModelMetadata", "available"},
		{"tfserving missing model", ReadinessConfig{Probe: "tfserving", Model: "resnet"}, tfAddr, tfCC, false, "tfserving.GetModelMetadata", "NotFound"},
		{"tfserving answers", ReadinessConfig{Probe: "auto"}, tfAddr, tfCC, true, "tfserving.GetModelMetadata", "answers gRPC"},
		{"health on a server without it", ReadinessConfig{Probe: "health"}, kAddr, kCC, false, "grpc.health.v1", "not implemented"},
		{"unreachable", ReadinessConfig{Probe: "auto"}, deadAddr, deadCC, false, "grpc.health.v1", "Unavailable"},
		{"tcp unreachable", ReadinessConfig{Probe: "tcp"}, deadAddr, deadCC, false, "tcp", "connection refused"},
		{"tcp", ReadinessConfig{Probe: "tcp"}, kAddr, kCC, true, "tcp", "ok"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := checkOnce(t, tc.cfg, tc.addr, tc.cc, nil)
			if st.Ready != tc.ready || st.Probe != tc.probe || !strings.Contains(st.Reason, tc.reasonHas) {
				t.Errorf("got ready=%t probe=%q reason=%q; want ready=%t probe=%q reason containing %q",
					st.Ready, st.Probe, st.Reason, tc.ready, tc.probe, tc.reasonHas)
			}
		})
	}

	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	if st := checkOnce(t, ReadinessConfig{Probe: "auto"}, healthAddr, healthCC, nil); st.Ready || !strings.Contains(st.Reason, "NOT_SERVING") {
		t.Errorf("NOT_SERVING upstream: %+v", st)
	}
}

func TestReadinessFailingEveryCall(t *testing.T) {
	hs := health.NewServer()
	addr, cc := serveGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, hs) })
	cfg := ReadinessConfig{Probe: "auto"}
	if st := checkOnce(t, cfg, addr, cc, func() (uint64, uint64) { return 40, 40 }); st.Ready || !strings.Contains(st.Reason, "failed all 40 calls") {
		t.Errorf("every call failing: %+v", st)
	}
	// One success among them, or too few calls to judge: the probe decides.
	if st := checkOnce(t, cfg, addr, cc, func() (uint64, uint64) { return 40, 39 }); !st.Ready {
		t.Errorf("39 of 40 failing: %+v", st)
	}
	if st := checkOnce(t, cfg, addr, cc, func() (uint64, uint64) { return failingMinCalls - 1, failingMinCalls - 1 }); !st.Ready {
		t.Errorf("too few calls: %+v", st)
	}
}
