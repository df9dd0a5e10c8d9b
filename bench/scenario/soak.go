package scenario

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc/codes"

	"github.com/infergate/infergate/bench/load"
	"github.com/infergate/infergate/internal/childproc"
	"github.com/infergate/infergate/proto/kservepb"
)

// Call kinds of the soak mix, as they appear in reports.
const (
	SoakResnet50    = "resnet50"
	SoakSimple      = "simple"
	SoakHalfPlusTwo = "half_plus_two"
	SoakStream      = "stream"
	SoakJunk        = "junk"
)

// SoakConfig configures RunSoak. Zero values are documented defaults.
type SoakConfig struct {
	// Simserver and Infergate are the binaries; both required.
	Simserver string
	Infergate string
	// InfergateArgs and SimserverArgs are extra arguments.
	InfergateArgs []string
	SimserverArgs []string

	// Rate is the offered load in calls per second; zero means 150.
	Rate float64
	// Duration is the length of the load; zero means 10 minutes.
	Duration time.Duration
	// Sample is the time between samples; zero means 30 s.
	Sample time.Duration
	// Baseline is the time of the sample the last one is compared with
	// (the first sample at or after it); zero means 2 minutes.
	Baseline time.Duration
	// Tolerance is the largest relative change of RSS and goroutines
	// between the baseline and the last sample that passes; zero means 0.10.
	Tolerance float64

	// JunkFraction of calls name a model that does not exist, a new name
	// each time; zero means 0.01, negative none.
	JunkFraction float64
	// StreamFraction of calls are ModelStreamInfer streams of StreamMessages
	// simple requests; zero means 0.02, negative none.
	StreamFraction float64
	// StreamMessages is the number of requests per stream; zero means 3.
	StreamMessages int
	// ShortFraction of the other calls get a deadline drawn uniformly from
	// [ShortMin, ShortMax]; zero means 0.05, negative none.
	ShortFraction float64
	// ShortMin and ShortMax bound short deadlines; zero means 1 ms and
	// 10 ms (resnet50 takes about 5 ms, so some expire and some do not).
	ShortMin, ShortMax time.Duration
	// Timeout is the deadline of every other call; zero means 10 s.
	Timeout time.Duration
	// Conns is the number of client connections; zero means 4.
	Conns int
	// Arrival is the gap distribution; zero is Fixed.
	Arrival load.Arrival
	// Seed seeds the mix, the short deadlines and Poisson gaps; zero means 1.
	Seed uint64

	// WorkDir holds the process logs; empty means a new temporary folder,
	// removed afterwards unless KeepWorkDir is set.
	WorkDir     string
	KeepWorkDir bool
	// Log receives progress lines; nil means none.
	Log io.Writer
}

// Validate fills defaults and reports every problem, joined.
func (c *SoakConfig) Validate() error {
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		} else if *v < 0 {
			*v = 0
		}
	}
	defaultTo(&c.Rate, 150)
	defaultTo(&c.Duration, 10*time.Minute)
	defaultTo(&c.Sample, 30*time.Second)
	defaultTo(&c.Baseline, 2*time.Minute)
	defaultTo(&c.Tolerance, 0.10)
	def(&c.JunkFraction, 0.01)
	def(&c.StreamFraction, 0.02)
	def(&c.ShortFraction, 0.05)
	defaultTo(&c.StreamMessages, 3)
	defaultTo(&c.ShortMin, time.Millisecond)
	defaultTo(&c.ShortMax, 10*time.Millisecond)
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	if c.Conns == 0 {
		c.Conns = 4
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	var errs []error
	if c.Rate < 0 {
		errs = append(errs, fmt.Errorf("soak: rate %g: must be positive", c.Rate))
	}
	if c.Duration < 0 || c.Sample < 0 || c.Baseline < 0 || c.Timeout < 0 {
		errs = append(errs, errors.New("soak: duration, sample, baseline and timeout must be positive"))
	}
	if c.Sample > c.Duration && c.Duration > 0 {
		errs = append(errs, fmt.Errorf("soak: sample %s: longer than the duration %s", c.Sample, c.Duration))
	}
	if c.Tolerance < 0 {
		errs = append(errs, fmt.Errorf("soak: tolerance %g: must be positive", c.Tolerance))
	}
	if c.JunkFraction+c.StreamFraction > 1 || c.ShortFraction > 1 {
		errs = append(errs, fmt.Errorf("soak: fractions junk %g + stream %g and short %g must each be at most 1",
			c.JunkFraction, c.StreamFraction, c.ShortFraction))
	}
	if c.StreamMessages < 0 {
		errs = append(errs, fmt.Errorf("soak: stream messages %d: must be positive", c.StreamMessages))
	}
	if c.ShortMin < 0 || c.ShortMax < c.ShortMin {
		errs = append(errs, fmt.Errorf("soak: short deadlines %s..%s: want 0 < min <= max", c.ShortMin, c.ShortMax))
	}
	if c.Conns < 0 {
		errs = append(errs, fmt.Errorf("soak: conns %d: must be positive", c.Conns))
	}
	for _, b := range []struct{ name, path string }{{"simserver", c.Simserver}, {"infergate", c.Infergate}} {
		if b.path == "" {
			errs = append(errs, fmt.Errorf("soak: %s: binary path required", b.name))
		} else if _, err := os.Stat(b.path); err != nil {
			errs = append(errs, fmt.Errorf("soak: %s %s: %w", b.name, b.path, errMissingBinary))
		}
	}
	return errors.Join(errs...)
}

// RunSoak starts simserver and infergate in front of it, drives the
// production-like mix through infergate at cfg.Rate for cfg.Duration, and
// samples infergate every cfg.Sample. The processes are stopped before it
// returns. A cancelled ctx ends the load early; the samples so far, and
// one taken then, are reported.
func RunSoak(ctx context.Context, cfg SoakConfig) (*SoakReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dir, cleanup, err := workDir("soak", cfg.WorkDir, cfg.KeepWorkDir)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	fmt.Fprintf(cfg.Log, "bench: soak: work dir %s\n", dir)
	sim, m, err := StartProcess(ctx, childproc.Spec{
		Name: "simserver", Path: cfg.Simserver,
		Args:    append([]string{"--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"}, cfg.SimserverArgs...),
		LogPath: filepath.Join(dir, "simserver.log"), Ready: simserverLine,
	})
	if err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	defer sim.Stop()
	ig, listen, admin, err := startInfergate(ctx, cfg.Infergate, m[1], filepath.Join(dir, "infergate.log"), cfg.InfergateArgs)
	if err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	defer ig.Stop()
	fmt.Fprintf(cfg.Log, "bench: soak: infergate pid %d grpc=%s admin=%s\n", ig.Pid(), listen, admin)

	mix, err := newSoakMix(&cfg)
	if err != nil {
		return nil, err
	}
	rep := newSoakReport(cfg)
	probe := soakProbe{pid: ig.Pid(), admin: admin}
	iv := newSoakInterval()

	first, err := probe.sample(ctx, 0, iv.swap())
	if err != nil {
		return nil, fmt.Errorf("soak: first sample: %w", err)
	}
	rep.Samples = append(rep.Samples, first)
	fmt.Fprintf(cfg.Log, "bench: soak: %s\n", first.progress())

	// The schedule runs past the end and is stopped after the last sample,
	// so that every sample, the last included, sees infergate under load
	// with the client's connections open.
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	start := time.Now()
	loadDone := make(chan struct{})
	var (
		stats   load.MixStats
		loadErr error
	)
	go func() {
		defer close(loadDone)
		stats, loadErr = load.RunMix(loadCtx, load.MixConfig{
			Target: listen, Rate: cfg.Rate, Arrival: cfg.Arrival, Seed: cfg.Seed,
			Duration: cfg.Duration + cfg.Sample, Timeout: cfg.Timeout, Conns: cfg.Conns,
			Next: func(seq int64) load.Call { iv.sent(); return mix.next(seq) },
			Done: iv.record,
		})
	}()

	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for k := time.Duration(1); ; k++ {
		due := min(k*cfg.Sample, cfg.Duration)
		timer.Reset(time.Until(start.Add(due)))
		stopped := false
		select {
		case <-timer.C:
		case <-loadDone: // an error, or ctx was cancelled
			if loadErr != nil {
				return nil, fmt.Errorf("soak: load: %w", loadErr)
			}
			stopped = true
		}
		at := time.Since(start)
		s, err := probe.sample(context.WithoutCancel(ctx), at, iv.swap())
		if err != nil {
			return nil, fmt.Errorf("soak: sample at %s: %w (infergate log: %s)", fmtAt(at), err, ig.Tail())
		}
		rep.Samples = append(rep.Samples, s)
		fmt.Fprintf(cfg.Log, "bench: soak: %s\n", s.progress())
		if stopped || due == cfg.Duration {
			break
		}
	}
	stopLoad()
	<-loadDone
	rep.Late, rep.Dropped = stats.Late, stats.Dropped
	rep.Judge()
	return rep, nil
}

// soakMix chooses each call of the soak. It is used from the scheduler
// goroutine only.
type soakMix struct {
	cfg                 *SoakConfig
	rng                 *rand.Rand
	simple, halfPlusTwo *load.Payload
	// resnet[i] has i+1 rows: with batching on, requests of several rows
	// meet batch sizes they do not divide (a one-row-only load hid a
	// dispatcher crash).
	resnet [soakResnetRows]*load.Payload
}

// soakResnetRows is the largest row count of the soak's resnet50 calls.
const soakResnetRows = 4

// Weights of the three real models among the calls that are neither junk
// nor streams.
var soakWeights = []struct {
	kind   string
	weight float64
}{{SoakResnet50, 0.40}, {SoakSimple, 0.35}, {SoakHalfPlusTwo, 0.25}}

func newSoakMix(cfg *SoakConfig) (*soakMix, error) {
	mk := func(p load.Protocol, name string, rows int64) (*load.Payload, error) {
		in, _ := load.ModelDefaults(name)
		in[0].Shape = append([]int64{rows}, in[0].Shape[1:]...)
		pl, err := load.NewPayload(p, name, in)
		if err != nil {
			return nil, fmt.Errorf("soak: %w", err)
		}
		return pl, nil
	}
	m := &soakMix{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5deece66d))}
	var err error
	for i := range m.resnet {
		if m.resnet[i], err = mk(load.KServe, SoakResnet50, int64(i+1)); err != nil {
			return nil, err
		}
	}
	if m.simple, err = mk(load.KServe, SoakSimple, 1); err != nil {
		return nil, err
	}
	if m.halfPlusTwo, err = mk(load.TFServing, SoakHalfPlusTwo, 1); err != nil {
		return nil, err
	}
	return m, nil
}

// next picks call seq: junk (a model name never used before, KServe or TF
// by turns), a stream, or one of the real models, some with a short
// deadline.
func (m *soakMix) next(seq int64) load.Call {
	u := m.rng.Float64()
	switch {
	case u < m.cfg.JunkFraction:
		name := fmt.Sprintf("soak-junk-%08d", seq)
		p := load.KServe
		if seq%2 == 1 {
			p = load.TFServing
		}
		// simple's inputs: a plausible request for a model that is not there.
		in, _ := load.ModelDefaults(SoakSimple)
		pl, err := load.NewPayload(p, name, in)
		if err != nil {
			panic(err) // cannot happen: known inputs, non-empty name
		}
		return load.Call{Kind: SoakJunk, Payload: pl}
	case u < m.cfg.JunkFraction+m.cfg.StreamFraction:
		return load.Call{Kind: SoakStream, Payload: m.simple, Messages: m.cfg.StreamMessages,
			StreamMethod: kservepb.GRPCInferenceService_ModelStreamInfer_FullMethodName}
	}
	c := load.Call{}
	w := m.rng.Float64()
	for _, sw := range soakWeights {
		c.Kind = sw.kind
		if w < sw.weight {
			break
		}
		w -= sw.weight
	}
	switch c.Kind {
	case SoakResnet50:
		c.Payload = m.resnet[m.rng.IntN(len(m.resnet))]
	case SoakSimple:
		c.Payload = m.simple
	default:
		c.Payload = m.halfPlusTwo
	}
	if m.rng.Float64() < m.cfg.ShortFraction {
		span := m.cfg.ShortMax - m.cfg.ShortMin
		c.Timeout = m.cfg.ShortMin + time.Duration(m.rng.Int64N(int64(span)+1))
	}
	return c
}

// soakInterval collects the outcomes of one sample interval.
type soakInterval struct {
	mu  sync.Mutex
	cur *intervalStats
}

type intervalStats struct {
	sent, ok, failed int64
	errs             map[string]int64
	hist             *hdrhistogram.Histogram // successful calls, µs
}

func newIntervalStats() *intervalStats {
	return &intervalStats{errs: map[string]int64{}, hist: hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)}
}

func newSoakInterval() *soakInterval { return &soakInterval{cur: newIntervalStats()} }

func (iv *soakInterval) sent() {
	iv.mu.Lock()
	iv.cur.sent++
	iv.mu.Unlock()
}

// record counts one outcome; only successful calls enter the latency
// histogram, so fast failures (junk names) do not flatter it.
func (iv *soakInterval) record(o load.Outcome) {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	if o.Code != codes.OK {
		iv.cur.failed++
		iv.cur.errs[o.Code.String()]++
		return
	}
	iv.cur.ok++
	us := min(max(o.Latency.Microseconds(), 1), int64(time.Hour/time.Microsecond))
	_ = iv.cur.hist.RecordValue(us)
}

// swap ends the interval and returns its counts as a sample's call fields.
func (iv *soakInterval) swap() SoakSample {
	fresh := newIntervalStats()
	iv.mu.Lock()
	done := iv.cur
	iv.cur = fresh
	iv.mu.Unlock()
	s := SoakSample{Sent: done.sent, OK: done.ok, Failed: done.failed}
	if len(done.errs) > 0 {
		s.Errors = done.errs
	}
	if done.ok > 0 {
		s.P50 = float64(done.hist.ValueAtQuantile(50)) / 1000
		s.P99 = float64(done.hist.ValueAtQuantile(99)) / 1000
	}
	return s
}

// soakProbe reads infergate's memory and /metrics.
type soakProbe struct {
	pid   int
	admin string
}

// sample completes s (the interval's calls) with infergate's state now.
func (p soakProbe) sample(ctx context.Context, at time.Duration, s SoakSample) (SoakSample, error) {
	s.At = at.Seconds()
	rss, err := readVmRSS(fmt.Sprintf("/proc/%d/status", p.pid))
	if err != nil {
		return s, err
	}
	s.RSSBytes = rss
	body, took, err := scrapeMetrics(ctx, p.admin)
	if err != nil {
		return s, err
	}
	s.MetricsBytes, s.ScrapeMs = len(body), float64(took.Microseconds())/1000
	s.MetricsSamples, s.Goroutines, err = parseSoakMetrics(body)
	return s, err
}

// readVmRSS returns the VmRSS line of a /proc/<pid>/status file in bytes.
func readVmRSS(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("rss: %w", err)
	}
	defer f.Close()
	return parseVmRSS(f)
}

func parseVmRSS(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("rss: VmRSS line %q: want N kB", sc.Text())
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("rss: VmRSS line %q: %w", sc.Text(), err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("rss: %w", err)
	}
	return 0, errors.New("rss: no VmRSS line (process gone?)")
}

// scrapeMetrics fetches http://admin/metrics in the classic text format
// and times it, body included.
func scrapeMetrics(ctx context.Context, admin string) ([]byte, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/metrics", nil)
	if err != nil {
		return nil, 0, fmt.Errorf("scrape %s: %w", admin, err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	t0 := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("scrape %s: %w", admin, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	took := time.Since(t0)
	if err != nil {
		return nil, 0, fmt.Errorf("scrape %s: %w", admin, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("scrape %s: status %s", admin, resp.Status)
	}
	return body, took, nil
}

// parseSoakMetrics counts the samples of a text exposition and reads
// go_goroutines.
func parseSoakMetrics(body []byte) (samples int, goroutines int, err error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return 0, 0, fmt.Errorf("parse metrics: %w", err)
	}
	for _, line := range bytes.Split(body, []byte("\n")) {
		if len(line) > 0 && line[0] != '#' {
			samples++
		}
	}
	g, ok := fams["go_goroutines"]
	if !ok || len(g.GetMetric()) == 0 {
		return samples, 0, errors.New("metrics: no go_goroutines")
	}
	return samples, int(g.GetMetric()[0].GetGauge().GetValue()), nil
}
