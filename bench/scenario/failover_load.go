package scenario

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/bench/load"
	"github.com/infergate/infergate/grpcwire"
	"github.com/infergate/infergate/proto/kservepb"
)

// failoverMaxInFlight bounds outstanding calls; 1 s deadlines at a few
// hundred calls/s stay far below it.
const failoverMaxInFlight = 20000

// failoverLoad is a fixed-rate open loop that records every call: unlike
// load.RunMix it reads each response's headers and model_name to tell
// which route answered. Like load's open loop it sends each call at its
// intended time on its own goroutine and measures latency from that time.
type failoverLoad struct {
	conns         []*grpc.ClientConn
	req           *kservepb.ModelInferRequest
	rate          float64
	timeout       time.Duration
	fallbackModel string
	slots         chan struct{}
	// answeredBy, when set, names who answered an OK call in place of
	// routeOf (bench release: the version); opts are added to each call
	// (gzip sends it to grpc-go's door).
	answeredBy func(header, trailer metadata.MD, resp *kservepb.ModelInferResponse) string
	opts       []grpc.CallOption

	sent       atomic.Int64
	late       atomic.Int64
	headerSeen atomic.Int64

	mu    sync.Mutex
	calls []FailoverCall
}

func newFailoverLoad(target, model, fallbackModel string, rate float64, timeout time.Duration, conns int) (*failoverLoad, error) {
	if err := load.CheckLoopback(target); err != nil {
		return nil, err
	}
	pl, err := load.NewPayload(load.KServe, model, []load.Tensor{{Name: "input", Datatype: "FP32", Shape: []int64{1, 64}}})
	if err != nil {
		return nil, fmt.Errorf("failover: %w", err)
	}
	req := &kservepb.ModelInferRequest{}
	if err := proto.Unmarshal(pl.Body, req); err != nil {
		return nil, fmt.Errorf("failover: payload: %w", err)
	}
	l := &failoverLoad{req: req, rate: rate, timeout: timeout, fallbackModel: fallbackModel,
		slots: make(chan struct{}, failoverMaxInFlight)}
	for range conns {
		cc, err := grpc.NewClient("passthrough:///"+target, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			l.close()
			return nil, fmt.Errorf("failover: dial %s: %w", target, err)
		}
		cc.Connect()
		l.conns = append(l.conns, cc)
	}
	return l, nil
}

func (l *failoverLoad) close() {
	for _, cc := range l.conns {
		_ = cc.Close()
	}
}

// run sends calls every 1/rate from start until ctx ends, then waits for
// the calls in flight (each bounded by the timeout). At of each call is
// its intended time relative to start.
func (l *failoverLoad) run(ctx context.Context, start time.Time) {
	callCtx := context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	gap := time.Duration(float64(time.Second) / l.rate)
	dl, hasDL := ctx.Deadline()
	for seq := 0; ; seq++ {
		t := start.Add(time.Duration(seq) * gap)
		if hasDL && !t.Before(dl) {
			// The context's own timer may not have fired yet.
			return
		}
		if d := time.Until(t); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
		select {
		case l.slots <- struct{}{}:
		default:
			l.late.Add(1)
			select {
			case l.slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
		l.sent.Add(1)
		cc := l.conns[seq%len(l.conns)]
		wg.Go(func() {
			defer func() { <-l.slots }()
			c := l.call(callCtx, cc, t)
			c.At = t.Sub(start).Seconds()
			l.mu.Lock()
			l.calls = append(l.calls, c)
			l.mu.Unlock()
		})
	}
}

// call sends one ModelInfer intended at t and classifies its answer.
func (l *failoverLoad) call(ctx context.Context, cc *grpc.ClientConn, t time.Time) FailoverCall {
	cctx, cancel := context.WithDeadline(ctx, t.Add(l.timeout))
	defer cancel()
	var header, trailer metadata.MD
	resp := &kservepb.ModelInferResponse{}
	err := cc.Invoke(cctx, kservepb.GRPCInferenceService_ModelInfer_FullMethodName, l.req, resp,
		append([]grpc.CallOption{grpc.Header(&header), grpc.Trailer(&trailer)}, l.opts...)...)
	c := FailoverCall{Latency: float64(time.Since(t).Microseconds()) / 1000, Code: status.Code(err)}
	if c.Code == codes.OK && l.answeredBy != nil {
		c.Route = l.answeredBy(header, trailer, resp)
	} else if c.Code == codes.OK {
		var fromHeader bool
		c.Route, fromHeader = routeOf(header, trailer, resp.GetModelName(), l.fallbackModel)
		if fromHeader {
			l.headerSeen.Add(1)
		}
	}
	return c
}

// routeOf says which route answered an OK call: grpcwire.HeaderRoute in the
// headers (or, tolerated, the trailers) when present, else the model that
// answered: the fallback model means the fallback. fromHeader reports
// whether the header decided.
func routeOf(header, trailer metadata.MD, modelName, fallbackModel string) (route string, fromHeader bool) {
	v := header.Get(grpcwire.HeaderRoute)
	if len(v) == 0 {
		v = trailer.Get(grpcwire.HeaderRoute)
	}
	if len(v) > 0 {
		if v[len(v)-1] == RouteFallback {
			return RouteFallback, true
		}
		return RoutePrimary, true
	}
	if modelName != "" && modelName == fallbackModel {
		return RouteFallback, false
	}
	return RoutePrimary, false
}

// snapshot returns the calls sent so far and those recorded; after run
// returns the two agree unless a call was lost.
func (l *failoverLoad) snapshot() (int64, []FailoverCall) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent.Load(), append([]FailoverCall(nil), l.calls...)
}
