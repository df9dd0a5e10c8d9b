package sim

import (
	"context"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// execute simulates one execution of a validated request of batch items on
// m (version version), applying the model's fault, and records its
// statistics. start is when the request arrived. It returns the fault that
// applied (nil if none; the caller alters the answer with it) or a gRPC
// status error. The order follows a GPU server: faults that refuse the
// request act first, then the request queues for a slot, holds it for the
// compute latency, and releases it before any network-like delay.
func (s *Server) execute(ctx context.Context, m *model, version string, batch int, start time.Time) (*activeFault, error) {
	f := s.faults.Load().lookup(m.cfg.Name, version)
	slowdown := 1.0
	if f != nil {
		if f.DropConnections {
			s.conns.drop(ctx)
			m.stats.recordFailure(ReasonBackend, s.now().Sub(start))
			return nil, status.Errorf(codes.Unavailable, "simserver: connection dropped by fault injection for model '%s'", m.cfg.Name)
		}
		if f.Hang {
			select {
			case <-ctx.Done():
				return nil, s.ctxFailure(ctx, m, start)
			case <-s.closed:
				m.stats.recordFailure(ReasonRejected, s.now().Sub(start))
				return nil, status.Error(codes.Unavailable, "simserver: server is shutting down")
			}
		}
		if f.ErrorRate > 0 && s.chance(f.ErrorRate) {
			m.stats.recordFailure(ReasonBackend, s.now().Sub(start))
			return nil, injectedError(f.code, f.ErrorCode, m.cfg.Name)
		}
		slowdown = f.Slowdown
	}
	if m.slots != nil {
		m.stats.pending.Add(1)
		select {
		case m.slots <- struct{}{}:
			m.stats.pending.Add(-1)
		case <-ctx.Done():
			m.stats.pending.Add(-1)
			return nil, s.ctxFailure(ctx, m, start)
		}
	}
	computeStart := s.now()
	var err error
	// A throttled GPU runs at a lower clock: compute takes longer.
	slowdown *= s.gpu.slowdown()
	if d := m.cfg.Latency.Duration(batch, slowdown, s.tail(m, batch)); d > 0 {
		s.gpu.beginAs(m.cfg.Name, batch, computeStart)
		err = s.sleep(ctx, d)
		s.gpu.endAs(m.cfg.Name, batch, s.now())
	}
	if m.slots != nil {
		<-m.slots
	}
	computeEnd := s.now()
	if err != nil {
		return nil, s.sleepFailure(ctx, m, start, err)
	}
	if f != nil && f.DelayMS > 0 {
		if err := s.sleep(ctx, time.Duration(f.DelayMS*float64(time.Millisecond))); err != nil {
			return nil, s.sleepFailure(ctx, m, start, err)
		}
	}
	end := s.now()
	m.stats.recordSuccess(batch, end.Sub(start), computeStart.Sub(start), computeEnd.Sub(computeStart), end)
	return f, nil
}

// ctxFailure records a request ended by its client and returns the status
// for the context's error (CANCELLED or DEADLINE_EXCEEDED).
func (s *Server) ctxFailure(ctx context.Context, m *model, start time.Time) error {
	m.stats.recordFailure(ReasonCanceled, s.now().Sub(start))
	return status.FromContextError(ctx.Err()).Err()
}

// sleepFailure maps a failed Sleep: the client's context, or else a broken
// sleeper (INTERNAL).
func (s *Server) sleepFailure(ctx context.Context, m *model, start time.Time, err error) error {
	if ctx.Err() != nil {
		return s.ctxFailure(ctx, m, start)
	}
	m.stats.recordFailure(ReasonBackend, s.now().Sub(start))
	return status.Errorf(codes.Internal, "simserver: simulated execution of '%s': %v", m.cfg.Name, err)
}

// chance reports true with probability p, from the seeded source.
func (s *Server) chance(p float64) bool {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return s.rng.Float64() < p
}

// tail returns the long-tail factor of one execution of batch rows of m: 1,
// or with the profile's probability a factor drawn from its range. The draw
// is a function of the seed, the model and the index of the execution's
// first row among every row the model has executed, not of how many
// executions came before: two runs that send the same requests in the same
// order meet the same slow executions whether they batch them or not, so
// a comparison of batching policies is paired (common random numbers)
// rather than decided by which run drew more tail.
func (s *Server) tail(m *model, batch int) float64 {
	p := &m.cfg.Latency
	if p.TailProbability <= 0 {
		return 1
	}
	first := m.rows.Add(uint64(batch)) - uint64(batch)
	u := splitmix64(s.cfg.Seed ^ m.seed ^ first*0x9e3779b97f4a7c15)
	if unit(u) >= p.TailProbability {
		return 1
	}
	return p.TailMinFactor + unit(splitmix64(u))*(p.TailMaxFactor-p.TailMinFactor)
}

// splitmix64 is a 64-bit mixing function (Steele, Lea and Flood's
// SplitMix64 finaliser): nearby inputs give unrelated outputs.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// unit maps u to [0, 1) with 53 bits.
func unit(u uint64) float64 { return float64(u>>11) / (1 << 53) }

// injectedError is the status of an error_rate fault. It carries a
// google.rpc.ErrorInfo detail so tests can check that details survive a
// proxy; Triton itself sends no details.
func injectedError(code codes.Code, name, model string) error {
	st := status.Newf(code, "simserver: injected %s fault for model '%s'", name, model)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{
		Reason: "INJECTED_FAULT", Domain: "simserver.infergate", Metadata: map[string]string{"model": model},
	}); err == nil {
		st = d
	}
	return st.Err()
}
