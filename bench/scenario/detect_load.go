package scenario

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/bench/load"
)

// detectLoad is an open loop whose rate can change while it runs: the
// detect scenario replays a diurnal pattern, so load.RunMix's fixed rate
// does not fit, and bench/load is not this scenario's to change. Like
// load's open loop it sends each call at its intended time on its own
// goroutine and measures latency from that time, so a slow server cannot
// hide its tail behind a slow generator.
type detectLoad struct {
	conns   []*grpc.ClientConn
	payload *load.Payload
	timeout time.Duration
	rate    atomic.Uint64 // math.Float64bits of calls per second
	slots   chan struct{}

	mu  sync.Mutex
	sec map[int64]*detectSecond // by Unix second of the intended send time

	late atomic.Int64
}

// detectSecond collects the calls intended in one real second.
type detectSecond struct {
	sent, ok, failed int64
	hist             *hdrhistogram.Histogram // successful calls, µs
}

// detectMaxInFlight bounds outstanding calls; a saturated upstream with
// a 10 s timeout at ~600 calls/s stays below it.
const detectMaxInFlight = 20000

// detectRawCodec sends pre-marshalled request bytes and drops responses:
// the same trick as bench/load's unexported codec, so the generator spends
// its CPU on timing, not protobuf. It names itself "proto" because
// servers accept only application/grpc(+proto).
type detectRawCodec struct{}

func (detectRawCodec) Name() string { return "proto" }

func (detectRawCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.([]byte)
	if !ok {
		return nil, fmt.Errorf("detect: raw codec: cannot marshal %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (detectRawCodec) Unmarshal(_ mem.BufferSlice, v any) error {
	if _, ok := v.(*detectDiscard); !ok {
		return fmt.Errorf("detect: raw codec: cannot unmarshal into %T", v)
	}
	return nil
}

type detectDiscard struct{}

func newDetectLoad(target string, pl *load.Payload, conns int, timeout time.Duration) (*detectLoad, error) {
	if err := load.CheckLoopback(target); err != nil {
		return nil, err
	}
	l := &detectLoad{payload: pl, timeout: timeout, slots: make(chan struct{}, detectMaxInFlight), sec: map[int64]*detectSecond{}}
	for range conns {
		cc, err := grpc.NewClient("passthrough:///"+target,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.ForceCodecV2(detectRawCodec{})))
		if err != nil {
			l.close()
			return nil, fmt.Errorf("detect: dial %s: %w", target, err)
		}
		cc.Connect()
		l.conns = append(l.conns, cc)
	}
	return l, nil
}

func (l *detectLoad) close() {
	for _, cc := range l.conns {
		_ = cc.Close()
	}
}

// setRate changes the rate from the next gap on.
func (l *detectLoad) setRate(r float64) { l.rate.Store(math.Float64bits(r)) }

func (l *detectLoad) getRate() float64 { return math.Float64frombits(l.rate.Load()) }

// run sends until ctx ends, then waits for the calls in flight. Gaps are
// 1/rate at the rate current when each call is scheduled; the timeline
// advances from intended times, not send times, so it does not drift.
func (l *detectLoad) run(ctx context.Context) {
	callCtx := context.WithoutCancel(ctx) // the tail of the last second is still measured
	var wg sync.WaitGroup
	defer wg.Wait()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	next := time.Now()
	for seq := 0; ; seq++ {
		if d := time.Until(next); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-ctx.Done():
				return
			}
		} else if ctx.Err() != nil {
			return
		}
		t := next
		r := l.getRate()
		if r <= 0 {
			// Paused: look again shortly.
			next = time.Now().Add(10 * time.Millisecond)
			continue
		}
		next = t.Add(time.Duration(float64(time.Second) / r))
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
		l.sent(t)
		cc := l.conns[seq%len(l.conns)]
		wg.Go(func() {
			defer func() { <-l.slots }()
			cctx, cancel := context.WithTimeout(callCtx, l.timeout)
			err := cc.Invoke(cctx, l.payload.Method, l.payload.Body, &detectDiscard{})
			cancel()
			l.done(t, time.Since(t), status.Code(err))
		})
	}
}

func (l *detectLoad) second(t time.Time) *detectSecond {
	k := t.Unix()
	s := l.sec[k]
	if s == nil {
		s = &detectSecond{hist: hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 2)}
		l.sec[k] = s
	}
	return s
}

func (l *detectLoad) sent(t time.Time) {
	l.mu.Lock()
	l.second(t).sent++
	l.mu.Unlock()
}

func (l *detectLoad) done(t time.Time, lat time.Duration, code codes.Code) {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.second(t)
	if code != codes.OK {
		s.failed++
		return
	}
	s.ok++
	_ = s.hist.RecordValue(min(max(lat.Microseconds(), 1), int64(time.Minute/time.Microsecond)))
}

// DetectSecond is the client's view of one real second: the calls
// intended in it and the latency quantiles of those that succeeded (ms,
// from intended send times).
type DetectSecond struct {
	At     float64 `json:"t_s"` // seconds since the run started
	Sent   int64   `json:"sent"`
	OK     int64   `json:"ok"`
	Failed int64   `json:"failed"`
	P50    float64 `json:"p50_ms"`
	P99    float64 `json:"p99_ms"`
}

// seconds returns the finished seconds (those older than the timeout, so
// no call of theirs is still running) relative to start, and forgets them.
func (l *detectLoad) seconds(start time.Time, all bool) []DetectSecond {
	cut := time.Now().Add(-l.timeout - time.Second).Unix()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []DetectSecond
	for k, s := range l.sec {
		if !all && k >= cut {
			continue
		}
		d := DetectSecond{At: float64(k) - float64(start.UnixNano())/1e9, Sent: s.sent, OK: s.ok, Failed: s.failed}
		if s.ok > 0 {
			d.P50 = float64(s.hist.ValueAtQuantile(50)) / 1000
			d.P99 = float64(s.hist.ValueAtQuantile(99)) / 1000
		}
		out = append(out, d)
		delete(l.sec, k)
	}
	return out
}
