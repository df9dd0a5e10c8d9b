package sim

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

// Version is the simulated server's version, reported by ServerMetadata.
const Version = "0.1.0"

// MaxMessageBytes is the gRPC message size limit simserver uses on both
// directions (tensors are large; Triton allows up to INT32_MAX).
const MaxMessageBytes = 256 << 20

// Server is a simulated Triton / TF-Serving model server. It is safe for
// concurrent use; build it with New and release it with Close.
type Server struct {
	cfg    Config
	now    func() time.Time
	sleep  func(context.Context, time.Duration) error
	log    *slog.Logger
	models map[string]*model
	order  []*model // config order, for listings

	requests requestLog // the last ModelInfer calls' headers (requests.go)

	faultMu sync.Mutex // serialises fault writers
	faults  atomic.Pointer[faultSet]

	rngMu sync.Mutex
	rng   *rand.Rand

	gpu      *gpu
	conns    *connTracker
	health   *health.Server
	registry *prometheus.Registry

	closed    chan struct{}
	closeOnce sync.Once
	sampler   sync.WaitGroup
}

// New validates cfg, loads its models and starts the GPU sampler.
func New(cfg Config) (*Server, error) {
	models := cfg.Models
	if models == nil {
		models = DefaultModels()
	}
	// Validate a copy: Validate fills defaults, and the caller's slice
	// stays theirs.
	models = append([]ModelConfig(nil), models...)
	if err := validateModels(models); err != nil {
		return nil, err
	}
	cfg.Models = models
	s := &Server{
		cfg:    cfg,
		now:    cfg.Now,
		sleep:  cfg.Sleep,
		log:    cfg.Logger,
		models: make(map[string]*model, len(models)),
		rng:    rand.New(rand.NewPCG(cfg.Seed, 0x51a5e7)),
		conns:  &connTracker{conns: make(map[string]net.Conn)},
		health: health.NewServer(),
		closed: make(chan struct{}),
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.sleep == nil {
		s.sleep = timerSleep
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	for _, mc := range models {
		m := newModel(mc)
		s.models[mc.Name] = m
		s.order = append(s.order, m)
	}
	s.faults.Store(&faultSet{})
	s.gpu = newGPU(s.now())
	s.registry = prometheus.NewPedanticRegistry()
	if err := s.registry.Register(&collector{s: s}); err != nil {
		return nil, fmt.Errorf("sim: register metrics: %w", err)
	}
	s.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(kservepb.GRPCInferenceService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	s.health.SetServingStatus(tfservingpb.PredictionService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	interval := cfg.SampleInterval
	if interval == 0 {
		interval = time.Second
	}
	if interval > 0 {
		s.sampler.Add(1)
		go s.sampleLoop(interval)
	}
	return s, nil
}

// RegisterGRPC registers the KServe v2, TF-Serving and grpc.health.v1
// services on r.
func (s *Server) RegisterGRPC(r grpc.ServiceRegistrar) {
	kservepb.RegisterGRPCInferenceServiceServer(r, &kserveService{s: s})
	tfservingpb.RegisterPredictionServiceServer(r, &tfService{s: s})
	healthpb.RegisterHealthServer(r, s.health)
}

// ServerOptions are the grpc.Server options simserver uses: 256 MiB
// messages both ways, and the metadata echo (see EchoPrefix).
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessageBytes), grpc.MaxSendMsgSize(MaxMessageBytes),
		grpc.ChainUnaryInterceptor(echoUnary), grpc.ChainStreamInterceptor(echoStream),
	}
}

// WrapListener returns l with its accepted connections tracked, which the
// drop_connections fault needs to close a client's connection.
func (s *Server) WrapListener(l net.Listener) net.Listener {
	return &trackingListener{Listener: l, t: s.conns}
}

// Close marks the health service NOT_SERVING, releases hung requests (they
// fail UNAVAILABLE) and stops the GPU sampler. It does not stop the
// grpc.Server, which the caller owns. Close is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.health.Shutdown()
		close(s.closed)
		s.sampler.Wait()
	})
	return nil
}

// Cancelled returns how many requests to model ended because their client's
// context ended (cancel or deadline) while hung, queued, executing or
// delayed.
func (s *Server) Cancelled(model string) int64 {
	if m := s.models[model]; m != nil {
		return m.stats.cancelled.Load()
	}
	return 0
}

// SetFault validates f and sets (replaces) the fault for f.Model; it
// returns the fault as stored (defaults filled). A *FieldError names the bad
// field.
func (s *Server) SetFault(f Fault) (Fault, error) {
	code, err := f.normalize(func(name string) *ModelConfig {
		if m := s.models[name]; m != nil {
			return &m.cfg
		}
		return nil
	})
	if err != nil {
		return Fault{}, err
	}
	s.faultMu.Lock()
	next := s.copyFaults()
	next[f.Model] = &activeFault{Fault: f, code: code, seed: faultSeed(s.cfg.Seed, f.Model, f.Version)}
	s.faults.Store(&next)
	s.gpu.setThrottle(next.throttle())
	s.faultMu.Unlock()
	s.log.Info("fault set", "model", f.Model, "version", f.Version, "slowdown", f.Slowdown, "error_rate", f.ErrorRate,
		"error_code", f.ErrorCode, "hang", f.Hang, "drop_connections", f.DropConnections, "delay_ms", f.DelayMS,
		"throttle", f.Throttle, "flip_rate", f.FlipRate, "perturb", f.Perturb)
	return f, nil
}

// ClearFaults heals model ("*" for the all-models fault), or every fault
// when model is "". It returns the faults still active.
func (s *Server) ClearFaults(model string) []Fault {
	s.faultMu.Lock()
	next := faultSet{}
	if model != "" {
		next = s.copyFaults()
		delete(next, model)
	}
	s.faults.Store(&next)
	s.gpu.setThrottle(next.throttle())
	s.faultMu.Unlock()
	s.log.Info("faults cleared", "model", model)
	return next.list()
}

// Faults lists the active faults, sorted by model.
func (s *Server) Faults() []Fault { return s.faults.Load().list() }

func (s *Server) copyFaults() faultSet {
	cur := *s.faults.Load()
	next := make(faultSet, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	return next
}

// SampleGPU closes the current telemetry period at now and returns its
// sample; the sampler calls it every SampleInterval.
func (s *Server) SampleGPU(now time.Time) GPUStats { return s.gpu.sample(now) }

// ModelGPUUse returns each model's share of the simulated GPU's busy time
// and energy up to the last sample: the ground truth for a proxy's cost
// attribution.
func (s *Server) ModelGPUUse() map[string]ModelUse { return s.gpu.modelUse() }

// GPU returns the last GPU telemetry sample.
func (s *Server) GPU() GPUStats { return s.gpu.snapshot() }

// Registry is the Prometheus registry /metrics serves.
func (s *Server) Registry() *prometheus.Registry { return s.registry }

// sampleLoop samples the GPU every interval until Close.
func (s *Server) sampleLoop(interval time.Duration) {
	defer s.sampler.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.gpu.sample(s.now())
		case <-s.closed:
			return
		}
	}
}

// lookup returns the model served on protocol, or nil.
func (s *Server) lookup(name, protocol string) *model {
	m := s.models[name]
	if m == nil || !m.cfg.serves(protocol) {
		return nil
	}
	return m
}

// timerSleep waits d on a real timer, or until ctx ends.
func timerSleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
