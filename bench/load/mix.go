package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Call is one request of a mixed open-loop run (RunMix).
type Call struct {
	// Kind labels the call in outcomes ("resnet50", "junk", ...).
	Kind string
	// Payload is the request. For a stream it is the message type of the
	// stream's requests (ModelInferRequest for ModelStreamInfer).
	Payload *Payload
	// Timeout bounds the call; zero means MixConfig.Timeout.
	Timeout time.Duration
	// StreamMethod, when set, sends Payload Messages times on one
	// bidirectional stream of this full method (e.g. KServe's
	// ModelStreamInfer), closes the send side and reads responses until the
	// server ends the stream.
	StreamMethod string
	// Messages is the number of stream messages; zero means 1.
	Messages int
}

// Outcome is one finished call of RunMix.
type Outcome struct {
	Kind string
	// Intended is the call's place on the timeline; Latency is measured
	// from it, so a stalled generator cannot hide a stalled server.
	Intended time.Time
	Latency  time.Duration
	Code     codes.Code
	// Late is true when the call had to wait for an in-flight slot.
	Late bool
	// ResponseBytes is the size of the response (all responses of a stream).
	ResponseBytes int
}

// MixConfig configures RunMix. Zero values are documented defaults.
type MixConfig struct {
	// Target is a loopback host:port.
	Target string
	// Rate is the number of calls per second; required.
	Rate float64
	// Arrival is the gap distribution; zero is Fixed.
	Arrival Arrival
	// Seed seeds Poisson gaps; zero means 1.
	Seed uint64
	// MaxInFlight caps outstanding calls; zero means DefaultMaxInFlight.
	// When it is reached the schedule waits, and the wait counts in the
	// latency of the late call.
	MaxInFlight int
	// Duration is the length of the schedule; required.
	Duration time.Duration
	// Timeout bounds calls whose Call.Timeout is zero; zero means
	// DefaultTimeout.
	Timeout time.Duration
	// Conns is the number of client connections; zero means 1.
	Conns int
	// Next chooses call seq (0, 1, ...). It is called from the scheduler
	// goroutine only, in order, just before the call is sent; required.
	Next func(seq int64) Call
	// Done receives every outcome, from the calls' own goroutines
	// (concurrently); it must be quick. Required.
	Done func(Outcome)
}

// MixStats counts what RunMix's schedule did.
type MixStats struct {
	// Sent counts calls started.
	Sent int64 `json:"sent"`
	// Late counts calls that waited for an in-flight slot.
	Late int64 `json:"late"`
	// Dropped counts calls scheduled before the end that were never sent
	// because the run stopped while they waited for a slot.
	Dropped int64 `json:"dropped"`
}

// Validate fills defaults and returns every problem found, joined.
func (c *MixConfig) Validate() error {
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Conns == 0 {
		c.Conns = 1
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	var errs []error
	if err := CheckLoopback(c.Target); err != nil {
		errs = append(errs, err)
	}
	if c.Rate <= 0 {
		errs = append(errs, fmt.Errorf("load: mix: rate %g: must be positive", c.Rate))
	}
	if c.Duration <= 0 {
		errs = append(errs, fmt.Errorf("load: mix: duration %s: must be positive", c.Duration))
	}
	if c.MaxInFlight < 0 || c.Timeout < 0 || c.Conns < 0 {
		errs = append(errs, errors.New("load: mix: max in flight, timeout and conns must not be negative"))
	}
	if c.Next == nil || c.Done == nil {
		errs = append(errs, errors.New("load: mix: Next and Done are required"))
	}
	return errors.Join(errs...)
}

// RunMix runs an open loop at cfg.Rate for cfg.Duration whose every call
// is chosen by cfg.Next, and reports each outcome to cfg.Done. Like Run's
// open loop it starts one goroutine per call on an intended timeline, so
// a slow server never slows the schedule. It returns when the schedule has
// ended (or ctx is cancelled) and every call has finished, each bounded by
// its timeout.
func RunMix(ctx context.Context, cfg MixConfig) (MixStats, error) {
	if err := cfg.Validate(); err != nil {
		return MixStats{}, err
	}
	conns, err := dial(ctx, &Config{Target: cfg.Target, Timeout: cfg.Timeout, Conns: cfg.Conns})
	if err != nil {
		return MixStats{}, err
	}
	defer func() {
		for _, cc := range conns {
			_ = cc.Close()
		}
	}()
	return runMix(ctx, &cfg, conns, time.Now), nil
}

func runMix(ctx context.Context, cfg *MixConfig, conns []*grpc.ClientConn, now func() time.Time) MixStats {
	// Calls outlive ctx so that the tail is still measured; timeouts bound them.
	callCtx := context.WithoutCancel(ctx)
	start := now()
	end := start.Add(cfg.Duration)
	s := newSchedule(start, cfg.Rate, cfg.Arrival, cfg.Seed)
	slots := make(chan struct{}, cfg.MaxInFlight)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	var (
		wg    sync.WaitGroup
		stats MixStats
	)
	defer wg.Wait()
	for seq := int64(0); ; seq++ {
		t := s.next()
		if !t.Before(end) {
			return stats
		}
		if d := t.Sub(now()); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return stats
			}
		}
		if ctx.Err() != nil {
			return stats
		}
		late := false
		select {
		case slots <- struct{}{}:
		default:
			late = true
			stats.Late++
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				limit := now()
				if end.Before(limit) {
					limit = end
				}
				stats.Dropped += countUntil(s, t, limit)
				return stats
			}
		}
		c := cfg.Next(seq)
		if c.Timeout == 0 {
			c.Timeout = cfg.Timeout
		}
		cc := conns[seq%int64(len(conns))]
		stats.Sent++
		wg.Go(func() {
			defer func() { <-slots }()
			n, err := invoke(callCtx, cc, c)
			cfg.Done(Outcome{
				Kind: c.Kind, Intended: t, Latency: now().Sub(t), Code: status.Code(err),
				Late: late, ResponseBytes: n,
			})
		})
	}
}

// countUntil counts intended times from t (included) before limit.
func countUntil(s *schedule, t, limit time.Time) int64 {
	var n int64
	for i := 0; t.Before(limit) && i < maxDroppedScan; i, t = i+1, s.next() {
		n++
	}
	return n
}

// invoke sends one call and returns the response size.
func invoke(parent context.Context, cc *grpc.ClientConn, c Call) (int, error) {
	ctx, cancel := context.WithTimeout(parent, c.Timeout)
	defer cancel()
	if c.StreamMethod == "" {
		var out sink
		err := cc.Invoke(ctx, c.Payload.Method, c.Payload.Body, &out)
		return out.n, err
	}
	st, err := cc.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, c.StreamMethod)
	if err != nil {
		return 0, err
	}
	for range max(c.Messages, 1) {
		if err := st.SendMsg(c.Payload.Body); err != nil {
			break // the status comes from RecvMsg
		}
	}
	if err := st.CloseSend(); err != nil {
		return 0, err
	}
	total := 0
	for {
		var out sink
		err := st.RecvMsg(&out)
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
		total += out.n
	}
}
