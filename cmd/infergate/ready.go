package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/admin"
	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/tfservingpb"
)

// ReadinessConfig configures how /readyz checks the upstream, off the
// request path, over the proxy's own upstream connections (TLS included).
type ReadinessConfig struct {
	// Probe is auto (grpc.health.v1, then KServe ServerReady, then
	// TF-Serving model metadata), health, kserve, tfserving or tcp.
	// Default auto.
	Probe string `yaml:"probe"`
	// Model is the model whose status the tfserving probe (and auto, on a
	// TF-Serving upstream) checks. Default none: the server answering is
	// enough.
	Model string `yaml:"model"`
	// Interval is the time between probes. Default 2s.
	Interval time.Duration `yaml:"interval"`
	// Timeout bounds one probe. Default 1s.
	Timeout time.Duration `yaml:"timeout"`
}

// Defaults of ReadinessConfig.
const (
	defaultReadyInterval = 2 * time.Second
	defaultReadyTimeout  = time.Second
)

// defaultReadiness returns the documented defaults of ReadinessConfig.
func defaultReadiness() ReadinessConfig {
	return ReadinessConfig{Probe: "auto", Interval: defaultReadyInterval, Timeout: defaultReadyTimeout}
}

// Problems returns one error per bad field, each starting with the field's
// YAML name.
func (c ReadinessConfig) Problems() []error {
	var errs []error
	switch c.Probe {
	case "auto", "health", "kserve", "tfserving", "tcp":
	default:
		errs = append(errs, fmt.Errorf("probe: must be auto, health, kserve, tfserving or tcp, got %q", c.Probe))
	}
	if c.Interval <= 0 {
		errs = append(errs, fmt.Errorf("interval: must be positive, got %s", c.Interval))
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("timeout: must be positive, got %s", c.Timeout))
	}
	return errs
}

// Calls failing this way in the last seconds mark the upstream not ready
// even when it says it is: every one of at least failingMinCalls failed.
const failingMinCalls = 20

// readiness probes the upstream off the request path and caches the
// verdict for /readyz. The probe runs over the proxy's own upstream
// connection, so a TLS misconfiguration or an unreachable server shows
// exactly as calls would meet it.
type readiness struct {
	cfg ReadinessConfig
	// upstream is the default upstream's address now: a reload may move
	// it (routingStep); conn follows it by itself.
	upstream func() string
	conn     grpc.ClientConnInterface
	// recent returns the proxied calls of the last seconds and how many
	// failed with a server error; nil: not used.
	recent func() (calls, failed uint64)
	now    func() time.Time

	state atomic.Pointer[admin.ReadyState]
}

func newReadiness(cfg ReadinessConfig, upstream func() string, conn grpc.ClientConnInterface,
	recent func() (uint64, uint64)) *readiness {
	r := &readiness{cfg: cfg, upstream: upstream, conn: conn, recent: recent, now: time.Now}
	r.state.Store(&admin.ReadyState{Upstream: upstream(), Reason: "not checked yet"})
	return r
}

// run probes now and then every interval until ctx ends.
func (r *readiness) run(ctx context.Context) {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		r.check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// current returns the last verdict.
func (r *readiness) current() admin.ReadyState { return *r.state.Load() }

// check runs one probe and stores its verdict.
func (r *readiness) check(ctx context.Context) {
	pctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	st := admin.ReadyState{Upstream: r.upstream()}
	st.Probe, st.Ready, st.Reason = r.probe(pctx)
	if ctx.Err() != nil {
		return
	}
	if r.recent != nil {
		st.RecentCalls, st.RecentFailed = r.recent()
		if st.Ready && st.RecentCalls >= failingMinCalls && st.RecentFailed == st.RecentCalls {
			st.Ready = false
			st.Reason = fmt.Sprintf("the upstream failed all %d calls of the last seconds (its %s says ready)", st.RecentCalls, st.Probe)
		}
	}
	st.CheckedAt = r.now()
	r.state.Store(&st)
}

// probe asks the upstream whether it is ready, the way cfg.Probe says.
func (r *readiness) probe(ctx context.Context) (probe string, ready bool, reason string) {
	switch r.cfg.Probe {
	case "tcp":
		ready, reason = tcpReady(ctx, r.upstream())
		return "tcp", ready, reason
	case "health":
		return r.health(ctx)
	case "kserve":
		return r.kserve(ctx)
	case "tfserving":
		return r.tfserving(ctx)
	}
	// auto: the first readiness RPC the server implements decides.
	probe, ready, reason = r.health(ctx)
	if !unimplemented(reason) {
		return probe, ready, reason
	}
	probe, ready, reason = r.kserve(ctx)
	if !unimplemented(reason) {
		return probe, ready, reason
	}
	return r.tfserving(ctx)
}

const unimplementedReason = "not implemented by the upstream"

func unimplemented(reason string) bool { return reason == unimplementedReason }

// rpcReason turns a failed probe RPC into a reason; Unimplemented gets a
// fixed text so auto mode moves on to the next probe.
func rpcReason(method string, err error) string {
	s := status.Convert(err)
	if s.Code() == codes.Unimplemented {
		return unimplementedReason
	}
	return fmt.Sprintf("%s: %s: %s", method, s.Code(), s.Message())
}

func (r *readiness) health(ctx context.Context) (string, bool, string) {
	const probe = "grpc.health.v1"
	resp, err := healthpb.NewHealthClient(r.conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		return probe, false, rpcReason("grpc.health.v1.Health/Check", err)
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return probe, false, "grpc.health.v1.Health/Check: " + resp.GetStatus().String()
	}
	return probe, true, "grpc.health.v1: SERVING"
}

func (r *readiness) kserve(ctx context.Context) (string, bool, string) {
	const probe = "kserve.ServerReady"
	resp, err := kservepb.NewGRPCInferenceServiceClient(r.conn).ServerReady(ctx, &kservepb.ServerReadyRequest{})
	if err != nil {
		return probe, false, rpcReason("inference.GRPCInferenceService/ServerReady", err)
	}
	if !resp.GetReady() {
		return probe, false, "inference.GRPCInferenceService/ServerReady: ready=false"
	}
	return probe, true, "kserve ServerReady: ready=true"
}

// tfserving checks the configured model's metadata: TF-Serving answers it
// only for a loaded, available version. Without a model, any answer from
// the server (an error status about the empty name included) shows that
// it serves gRPC over this connection.
func (r *readiness) tfserving(ctx context.Context) (string, bool, string) {
	const probe = "tfserving.GetModelMetadata"
	req := &tfservingpb.GetModelMetadataRequest{
		ModelSpec:     &tfservingpb.ModelSpec{Name: r.cfg.Model},
		MetadataField: []string{"signature_def"},
	}
	_, err := tfservingpb.NewPredictionServiceClient(r.conn).GetModelMetadata(ctx, req)
	switch {
	case err == nil:
		return probe, true, fmt.Sprintf("tensorflow.serving.PredictionService/GetModelMetadata: model %q available", r.cfg.Model)
	case r.cfg.Model == "" && answered(err):
		return probe, true, "the upstream answers gRPC (no readiness RPC; set readiness.model to check a model)"
	}
	return probe, false, rpcReason("tensorflow.serving.PredictionService/GetModelMetadata", err)
}

// answered reports whether err is a status the server itself sent, as
// opposed to one the client made because it could not reach it.
func answered(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Unimplemented, codes.Unknown:
		return false
	}
	return true
}

func tcpReady(ctx context.Context, addr string) (bool, string) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Err != nil {
			err = op.Err
		}
		return false, "tcp connect: " + err.Error()
	}
	c.Close()
	return true, "tcp connect ok"
}

// recentFailures returns the readiness probe's view of the proxied calls
// of the last ten seconds: how many, and how many failed with a server
// error. Calls over the series cap count too, but their class is lost in
// the overflow series, so they count as calls only.
func recentFailures(mon *monitor.Registry) func() (uint64, uint64) {
	return func() (calls, failed uint64) {
		for class, n := range mon.RecentCalls(10) {
			calls += n
			if class == monitor.CodeClassServerError {
				failed += n
			}
		}
		return calls, failed
	}
}
