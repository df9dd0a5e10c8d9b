package gpu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of SamplerOptions.
const (
	DefaultInterval = time.Second
	DefaultTimeout  = 2 * time.Second
	minTimeout      = 250 * time.Millisecond
)

// SamplerOptions configures a Sampler. The zero value samples every second.
type SamplerOptions struct {
	// Name labels the source in metrics and the API ("nvml",
	// "prometheus"); empty means "gpu".
	Name string
	// Interval is the sampling period; 0 or less means 1s.
	Interval time.Duration
	// Timeout bounds one sample; 0 or less means 2s or the interval,
	// whichever is shorter, but at least 250ms. A sample past it counts as
	// an error and the next one waits until it returns.
	Timeout time.Duration
	// Now is the clock stamped on readings; nil means time.Now.
	Now func() time.Time
	// Logger receives state changes (a source going down or coming back),
	// not every failed sample; nil discards.
	Logger *slog.Logger
}

// Status is a sampler's state for metrics and the API.
type Status struct {
	// Name is the source's name.
	Name string
	// Up is true when the last sample succeeded.
	Up bool
	// Errors counts failed or timed-out samples since the start.
	Errors uint64
	// LastError is the last failure's text; empty while Up.
	LastError string
	// Reading is the last successful reading (nil before the first); its
	// devices carry Source = Name.
	Reading *Reading
}

// Sampler runs one Source periodically off the request path. Status is
// safe for concurrent use and never blocks.
type Sampler struct {
	src      Source
	name     string
	interval time.Duration
	timeout  time.Duration
	now      func() time.Time
	log      *slog.Logger

	last   atomic.Pointer[Reading]
	up     atomic.Bool
	off    atomic.Bool // the source returned ErrSourceOff: sampling stops
	errors atomic.Uint64
	lastMu sync.Mutex
	errMsg string

	// busy holds a result channel while an abandoned sample still runs.
	busy chan sampleResult
}

type sampleResult struct {
	r   Reading
	err error
}

// NewSampler returns a sampler of src; call Run to start it.
func NewSampler(src Source, opts SamplerOptions) *Sampler {
	s := &Sampler{src: src, name: opts.Name, interval: opts.Interval, timeout: opts.Timeout, now: opts.Now, log: opts.Logger}
	if s.name == "" {
		s.name = "gpu"
	}
	if s.interval <= 0 {
		s.interval = DefaultInterval
	}
	if s.timeout <= 0 {
		s.timeout = max(min(DefaultTimeout, s.interval), minTimeout)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Run samples at once, then every interval until ctx ends or the source
// switches itself off (ErrSourceOff); then it closes the source if it is
// an io.Closer. Ticks missed while a sample runs are dropped, not queued.
func (s *Sampler) Run(ctx context.Context) {
	defer func() {
		if c, ok := s.src.(io.Closer); ok {
			c.Close()
		}
	}()
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		s.SampleOnce(ctx)
		if s.off.Load() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SampleOnce takes one sample now and records its outcome; Run calls it on
// its ticker. It returns within the timeout even when the source hangs.
func (s *Sampler) SampleOnce(ctx context.Context) {
	if s.busy != nil {
		// The previous sample outlived its timeout: wait for it (within
		// the timeout again) rather than pile up a second call.
		select {
		case res := <-s.busy:
			s.busy = nil
			s.record(res)
		case <-time.After(s.timeout):
			s.fail(fmt.Errorf("gpu: %s: previous sample still running after %s", s.name, s.timeout))
		case <-ctx.Done():
		}
		return
	}
	sctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	at := s.now()
	done := make(chan sampleResult, 1)
	go func() {
		r, err := s.src.Sample(sctx)
		if r.At.IsZero() {
			r.At = at
		}
		done <- sampleResult{r, err}
	}()
	select {
	case res := <-done:
		s.record(res)
	case <-sctx.Done():
		if ctx.Err() != nil {
			// Shutting down: not the source's fault.
			s.busy = done
			return
		}
		s.busy = done
		s.fail(fmt.Errorf("gpu: %s: sample timed out after %s", s.name, s.timeout))
	}
}

func (s *Sampler) record(res sampleResult) {
	if res.err != nil {
		s.fail(res.err)
		return
	}
	r := res.r
	r.Devices = append([]Device(nil), r.Devices...)
	for i := range r.Devices {
		r.Devices[i].Source = s.name
	}
	s.last.Store(&r)
	if !s.up.Swap(true) {
		s.log.Info("gpu source up", "source", s.name, "devices", len(r.Devices))
	}
	s.lastMu.Lock()
	s.errMsg = ""
	s.lastMu.Unlock()
}

func (s *Sampler) fail(err error) {
	if errors.Is(err, ErrSourceOff) {
		s.off.Store(true)
	}
	s.errors.Add(1)
	wasUp := s.up.Swap(false)
	s.lastMu.Lock()
	first := s.errMsg == "" && !wasUp && s.errors.Load() == 1
	s.errMsg = err.Error()
	s.lastMu.Unlock()
	// Log transitions only: a dead endpoint sampled every second must not
	// flood the log. ErrSourceOff was logged by the source itself.
	if (wasUp || first) && !errors.Is(err, ErrSourceOff) {
		s.log.Warn("gpu source down", "source", s.name, "err", err)
	}
}

// Status returns the sampler's current state.
func (s *Sampler) Status() Status {
	s.lastMu.Lock()
	msg := s.errMsg
	s.lastMu.Unlock()
	return Status{Name: s.name, Up: s.up.Load(), Errors: s.errors.Load(), LastError: msg, Reading: s.last.Load()}
}
