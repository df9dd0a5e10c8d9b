package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/infergate/infergate/internal/attack"
	"github.com/infergate/infergate/proto/kservepb"
)

// The front door under attack: each load of the
// table from internal/attack against infergate with its defaults in
// front of simserver, with a well-behaved client beside it on its own
// connection. The good client's rate and p99 during the attack are
// asserted as ratios to its own baseline, measured alone just before;
// infergate's RSS before, at its peak and after the attacker leaves
// against the "Done when" bounds. The attacker is its own process
// ("bench attack NAME -json", internal/attack), as it would be another
// client: its goroutines do not share the good client's scheduler.

const (
	// goodRate is the well-behaved client's calls per second.
	goodRate = 200
	// goodBaseline is how long it runs alone first.
	goodBaseline = 2 * time.Second
	// minAttackWindow is the shortest window the good client is judged
	// over: an attack the proxy cuts off in milliseconds is still judged
	// over enough calls for a p99 (400).
	minAttackWindow = 2 * time.Second
	// minGoodRate is the share of its baseline rate the good client keeps.
	minGoodRate = 0.9
	// attackP99Ratio bounds the good client's p99 during an attack, as a
	// multiple of its baseline p99. The issue states p99 only for rapid
	// reset (≤ 50 ms, 0.7 ms before it); for the other loads the bound is
	// a ratio, wide enough for an attacker that shares the machine's two
	// cores with the proxy, the model server and the good client itself.
	attackP99Ratio = 10
	// rssGrowth is the bound on what one attack may add to
	// infergate's RSS, at its peak and after the attacker leaves.
	rssGrowth = 64 << 20
)

// goodCall is one call of the good client.
type goodCall struct {
	start, end time.Time
	err        error
}

// goodClient makes goodRate unary ModelInfer calls a second for "simple"
// on its own connection, open loop (a schedule starts each call; a slow
// call does not delay the next).
type goodClient struct {
	kc    kservepb.GRPCInferenceServiceClient
	ok    atomic.Int64
	mu    sync.Mutex
	calls []goodCall
	stop  chan struct{}
	done  chan struct{}
	wg    sync.WaitGroup
}

func startGoodClient(t *testing.T, addr string) *goodClient {
	t.Helper()
	g := &goodClient{
		kc:   kservepb.NewGRPCInferenceServiceClient(dial(t, addr)),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	if _, err := g.kc.ModelInfer(testCtx(t), simpleRequest("good-warmup")); err != nil {
		t.Fatalf("good client's first call: %v", err)
	}
	g.ok.Add(1)
	go func() {
		defer close(g.done)
		// A call for every 1/goodRate slot, late slots caught up, so the
		// rate offered stays goodRate however busy the machine.
		const every = time.Second / goodRate
		req := simpleRequest("good")
		next := time.Now()
		for {
			select {
			case <-g.stop:
				return
			case <-time.After(time.Until(next)):
			}
			for ; !next.After(time.Now()); next = next.Add(every) {
				g.launch(req)
			}
		}
	}()
	t.Cleanup(g.halt)
	return g
}

// launch starts one call.
func (g *goodClient) launch(req *kservepb.ModelInferRequest) {
	g.wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		_, err := g.kc.ModelInfer(ctx, req)
		end := time.Now()
		cancel()
		if err == nil {
			g.ok.Add(1)
		}
		g.mu.Lock()
		g.calls = append(g.calls, goodCall{start, end, err})
		g.mu.Unlock()
	})
}

// halt stops the ticker and waits for the calls in flight.
func (g *goodClient) halt() {
	select {
	case <-g.stop:
	default:
		close(g.stop)
	}
	<-g.done
	g.wg.Wait()
}

// goodStats is the good client over one window.
type goodStats struct {
	window       time.Duration
	started, ok  int
	failed       int
	rate         float64 // calls that ended OK inside the window, per second
	p50, p99     time.Duration
	firstFailure string
}

func (s goodStats) String() string {
	str := fmt.Sprintf("%.1f ok calls/s, p50 %s p99 %s, %d started, %d failed over %s",
		s.rate, s.p50.Round(10*time.Microsecond), s.p99.Round(10*time.Microsecond), s.started, s.failed, s.window.Round(time.Millisecond))
	if s.firstFailure != "" {
		str += " (first failure: " + s.firstFailure + ")"
	}
	return str
}

// stats judges the calls started in [from, to): latency of every one of
// them (failed ones too), rate of those that ended OK inside the window.
// Call it after halt.
func (g *goodClient) stats(from, to time.Time) goodStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := goodStats{window: to.Sub(from)}
	var lat []time.Duration
	okInside := 0
	for _, c := range g.calls {
		if c.err == nil && !c.end.Before(from) && c.end.Before(to) {
			okInside++
		}
		if c.start.Before(from) || !c.start.Before(to) {
			continue
		}
		s.started++
		lat = append(lat, c.end.Sub(c.start))
		if c.err != nil {
			s.failed++
			if s.firstFailure == "" {
				s.firstFailure = c.err.Error()
			}
		} else {
			s.ok++
		}
	}
	s.rate = float64(okInside) / s.window.Seconds()
	slices.Sort(lat)
	if n := len(lat); n > 0 {
		s.p50 = lat[(n-1)/2]
		s.p99 = lat[(99*n+99)/100-1]
	}
	return s
}

// procStatus reads one kB field (VmRSS, VmHWM) of /proc/PID/status, in bytes.
func procStatus(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field+":" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no %s", pid, field)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// benchAttack runs "bench attack NAME -addr ADDR -json ARGS..." as its
// own process and returns its report.
func benchAttack(name string, args ...string) func(ctx context.Context, addr string) (*attack.Report, error) {
	return func(ctx context.Context, addr string) (*attack.Report, error) {
		cmd := exec.CommandContext(ctx, filepath.Join(binDir, "bench"), append([]string{"attack", name, "-addr", addr, "-json"}, args...)...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return nil, fmt.Errorf("bench attack %s %v: %w\n%s", name, args, err, stderr.String())
		}
		var r attack.Report
		if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("bench attack %s: report %q: %w", name, stdout.String(), err)
		}
		return &r, nil
	}
}

// frontDoor is one attack's setting: simserver, infergate with its
// defaults, and the good client, already measured alone.
type frontDoor struct {
	t        *testing.T
	e        env
	pid      int
	good     *goodClient
	baseFrom time.Time
	baseTo   time.Time
}

func newFrontDoor(t *testing.T) *frontDoor {
	t.Helper()
	e := newEnv(t)
	f := &frontDoor{t: t, e: e, pid: e.gate.Pid(), good: startGoodClient(t, e.gate.grpc)}
	time.Sleep(300 * time.Millisecond) // connections and pools warm
	f.baseFrom = time.Now()
	time.Sleep(goodBaseline)
	f.baseTo = time.Now()
	return f
}

// attackResult is what one attack did to infergate and the good client.
type attackResult struct {
	rep                 *attack.Report
	from, to            time.Time // the window the good client is judged over
	rssBefore, rssPeak  int64
	rssAfter            int64
	base, during        goodStats
	afterWait           time.Duration
	simBefore, simAfter simCounts
	goodOKDuring        int64
}

// run runs one attack, samples infergate's RSS meanwhile, waits (up to
// 5 s) for the RSS to come back once the attacker has left, stops the
// good client and judges it.
func (f *frontDoor) run(name string, fn func(ctx context.Context, addr string) (*attack.Report, error)) attackResult {
	t := f.t
	t.Helper()
	var r attackResult
	r.simBefore = simCallCounts(t, f.e.sim.admin)
	okBefore := f.good.ok.Load()
	// VmHWM from here on: "5" to clear_refs resets the peak to the
	// current RSS; the sampler below covers kernels that refuse it.
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", f.pid), []byte("5"), 0)
	var err error
	if r.rssBefore, err = procStatus(f.pid, "VmRSS"); err != nil {
		t.Fatal(err)
	}
	var peak atomic.Int64
	peak.Store(r.rssBefore)
	sampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if v, err := procStatus(f.pid, "VmRSS"); err == nil && v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-sampling:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r.from = time.Now()
	r.rep, err = fn(ctx, f.e.gate.grpc)
	r.to = time.Now()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if end := r.from.Add(minAttackWindow); r.to.Before(end) {
		time.Sleep(time.Until(end))
		r.to = end
	}
	close(sampling)
	<-sampled
	r.rssPeak = peak.Load()
	if hwm, err := procStatus(f.pid, "VmHWM"); err == nil && hwm > r.rssPeak {
		r.rssPeak = hwm
	}
	// The attacker has closed its connections: RSS should come back.
	leftAt := time.Now()
	for {
		r.rssAfter, _ = procStatus(f.pid, "VmRSS")
		if r.rssAfter-r.rssBefore <= rssGrowth || time.Since(leftAt) > 5*time.Second {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.afterWait = time.Since(leftAt)
	f.good.halt()
	r.goodOKDuring = f.good.ok.Load() - okBefore
	r.simAfter = settledSimCounts(t, f.e.sim.admin)
	r.base = f.good.stats(f.baseFrom, f.baseTo)
	r.during = f.good.stats(r.from, r.to)
	t.Logf("%s report:\n%s", name, r.rep)
	t.Logf("good client alone: %s", r.base)
	t.Logf("good client during %s: %s (rate x%.2f, p99 x%.1f)", name, r.during, r.during.rate/r.base.rate, float64(r.during.p99)/float64(r.base.p99))
	t.Logf("infergate RSS: %.1f MiB before, %.1f MiB peak (+%.1f), %.1f MiB after (+%.1f, %s after the attacker left)",
		mib(r.rssBefore), mib(r.rssPeak), mib(r.rssPeak-r.rssBefore), mib(r.rssAfter), mib(r.rssAfter-r.rssBefore), r.afterWait.Round(time.Millisecond))
	return r
}

// checkGood asserts the good client's rate and p99 during the attack
// against its baseline; p99Limit 0 means attackP99Ratio x baseline.
func (r attackResult) checkGood(t *testing.T, p99Limit time.Duration) {
	t.Helper()
	if p99Limit == 0 {
		p99Limit = attackP99Ratio * r.base.p99
	}
	if ratio := r.during.rate / r.base.rate; ratio < minGoodRate {
		t.Errorf("good client kept %.1f%% of its rate (%.1f/s alone, %.1f/s during the attack), want >= %.0f%%",
			100*ratio, r.base.rate, r.during.rate, 100*minGoodRate)
	}
	if r.during.p99 > p99Limit {
		t.Errorf("good client p99 %s during the attack (%s alone, x%.1f), want <= %s",
			r.during.p99.Round(10*time.Microsecond), r.base.p99.Round(10*time.Microsecond),
			float64(r.during.p99)/float64(r.base.p99), p99Limit.Round(10*time.Microsecond))
	}
	if r.during.failed > 0 {
		t.Errorf("good client: %d of %d calls failed during the attack (first: %s)", r.during.failed, r.during.started, r.during.firstFailure)
	}
}

// checkRSS asserts the bound on RSS growth, at the peak and after
// the attacker left.
func (r attackResult) checkRSS(t *testing.T) {
	t.Helper()
	if g := r.rssPeak - r.rssBefore; g > rssGrowth {
		t.Errorf("infergate RSS grew %.1f MiB at its peak (%.1f -> %.1f MiB), want <= %d MiB",
			mib(g), mib(r.rssBefore), mib(r.rssPeak), rssGrowth>>20)
	}
	if g := r.rssAfter - r.rssBefore; g > rssGrowth {
		t.Errorf("infergate RSS still %.1f MiB above its start %s after the attacker left (%.1f -> %.1f MiB), want <= %d MiB",
			mib(g), r.afterWait.Round(time.Millisecond), mib(r.rssBefore), mib(r.rssAfter), rssGrowth>>20)
	}
}

// simCounts are simserver's counters for the attacker's model
// (identity_fp32; the good client calls simple).
type simCounts struct {
	ran       float64 // requests it executed or failed: nv_inference_request_success + _failure
	cancelled float64 // simserver_cancelled_total (a part of the failures)
}

func simCallCounts(t *testing.T, admin string) simCounts {
	t.Helper()
	fams := scrape(t, admin)
	m := map[string]string{"model": "identity_fp32"}
	return simCounts{
		ran:       counterSum(fams, "nv_inference_request_success", m) + counterSum(fams, "nv_inference_request_failure", m),
		cancelled: counterSum(fams, "simserver_cancelled_total", m),
	}
}

// settledSimCounts reads the counters until two reads 200 ms apart agree
// (calls sent upstream late still land), for at most 3 s.
func settledSimCounts(t *testing.T, admin string) simCounts {
	t.Helper()
	prev := simCallCounts(t, admin)
	for range 15 {
		time.Sleep(200 * time.Millisecond)
		cur := simCallCounts(t, admin)
		if cur == prev {
			return cur
		}
		prev = cur
	}
	return prev
}

// TestFrontDoorRapidReset: CVE-2023-44487 with request bodies for 5 s on
// one connection. The bar: the model server runs <= 0.1% of the
// reset calls, and the good client keeps >= 90% of its rate with p99 <=
// 50 ms (0.7 ms alone). On a loaded 2-core machine the good client's own
// baseline p99 can pass 10 ms, so the p99 bound is max(50 ms, 5 x its
// baseline p99). Measured before the fix: 23-59% of the rate, p99
// 1.1-2.0 s, 4.2k-118k reset calls run upstream.
func TestFrontDoorRapidReset(t *testing.T) {
	f := newFrontDoor(t)
	r := f.run("rapid reset", benchAttack("rapid-reset", "-d", "5s", "-model", "identity_fp32"))
	// The reset calls go to a model of their own: its counters are
	// theirs alone (the good client's calls, in flight at either read,
	// made the count off by one or two, against a bar of 0.1%).
	ran := r.simAfter.ran - r.simBefore.ran
	cancelled := r.simAfter.cancelled - r.simBefore.cancelled
	t.Logf("simserver ran %.0f of the %d reset calls (%.3f%%), %.0f of them cancelled there; %d good calls meanwhile",
		ran, r.rep.Streams, 100*ran/float64(max(r.rep.Streams, 1)), cancelled, r.goodOKDuring)
	if ran*1000 > float64(r.rep.Streams) {
		t.Errorf("simserver ran %.0f of %d reset calls (%.3f%%), want <= 0.1%% (%d)",
			ran, r.rep.Streams, 100*ran/float64(max(r.rep.Streams, 1)), r.rep.Streams/1000)
	}
	r.checkGood(t, max(50*time.Millisecond, 5*r.base.p99))
}

// TestFrontDoorEmptyHeaders: 400k zero-length streams (HEADERS with
// END_STREAM, 16 bytes each) on one connection grow infergate's RSS by
// <= 64 MiB, and it comes back when the attacker leaves. Before the fix:
// +461 to +547 MiB, good p99 31-41 ms.
func TestFrontDoorEmptyHeaders(t *testing.T) {
	f := newFrontDoor(t)
	r := f.run("400k empty HEADERS", benchAttack("empty-headers", "-streams", "400000"))
	r.checkRSS(t)
	r.checkGood(t, 0)
}

// TestFrontDoorHeldStreams: 200k streams opened with valid HEADERS and no
// body, held 2 s: RSS growth <= 64 MiB, back when the attacker leaves.
// Before the fix: +214 MB (grpc-go direct +2.3 GB; nginx GOAWAY at once).
func TestFrontDoorHeldStreams(t *testing.T) {
	f := newFrontDoor(t)
	r := f.run("200k held streams", benchAttack("hold-streams", "-streams", "200000", "-hold", "2s"))
	r.checkRSS(t)
	r.checkGood(t, 0)
}

// TestFrontDoorNeverRead: 50 calls to identity_fp32 with 4 MiB answers
// (so 4 MiB requests, END_STREAM last, once all are sent), windows of
// 2^31-1 advertised and the answers never read, held 3 s: RSS growth <=
// 64 MiB, back when the attacker leaves. Before the fix: +346 MB (grpc-go
// +40 MB, nginx +0.6 MB; this attacker, whose answers all start after
// its last byte, takes grpc-go direct to +520 MiB). The good client is
// judged over the hold, the attack proper: during the 200 MiB of uploads
// before it, honest bytes like BigUploads', its p99 is x54-76 of its
// baseline even against grpc-go direct. A proxy may also withhold window
// so that the requests never complete (the budget making a sender wait):
// then no answer waits for a reader either, which the log says; memory
// and the good client are judged all the same. The uploads get 8 s.
func TestFrontDoorNeverRead(t *testing.T) {
	f := newFrontDoor(t)
	r := f.run("50 never-read 4 MiB answers", benchAttack("never-read", "-streams", "50", "-bytes", "4194304", "-hold", "3s", "-upload-timeout", "8s"))
	if r.rep.Uploaded < 50 {
		t.Logf("infergate took %d of the 50 requests whole in 8 s (stopped: %s): it withheld window", r.rep.Uploaded, r.rep.Stopped)
	} else if r.rep.Stopped != "" {
		t.Errorf("the attack stopped early: %s", r.rep.Stopped)
	}
	r.checkRSS(t)
	// The attacker process ended at r.to: its clock started Elapsed before.
	holdFrom := r.to.Add(-r.rep.Elapsed + r.rep.UploadedAfter)
	r.during = f.good.stats(holdFrom, r.to)
	t.Logf("good client while nobody reads the answers (the last %s): %s (rate x%.2f, p99 x%.1f)",
		r.to.Sub(holdFrom).Round(time.Millisecond), r.during, r.during.rate/r.base.rate, float64(r.during.p99)/float64(r.base.p99))
	// In the hold simserver computes the 50 answers (200 MB of copies on
	// the machine's 2 cores) while the good client calls: its p99 rose to
	// 20-40 ms alone and 178 ms, once 522 ms, under make test's other
	// packages, in runs where infergate held under 30 MiB of them. The
	// issue bounds memory here, not p99; the good client's rate is held to
	// 90% all the same, and its p99 to what a proxy stalled for the 3 s
	// hold could not keep.
	r.checkGood(t, max(time.Second, attackP99Ratio*r.base.p99))
}

// TestFrontDoorHugeLength: a request whose gRPC length prefix says 1 GB,
// its DATA coming for 5 s as fast as the window allows. Issue point 5:
// an oversize request is answered (RESOURCE_EXHAUSTED, as grpc-go does),
// then reset: no more window for it. The bytes taken are bounded by the
// window a stream has before its first bytes are read (grpc-go took 82
// KB; 16 MiB is four of the relay's 4 MiB stream windows), and RSS grows
// <= 64 MiB. Before the fix: answered but ~70 MB taken, RSS +168 MB.
func TestFrontDoorHugeLength(t *testing.T) {
	f := newFrontDoor(t)
	r := f.run("1 GB length prefix", benchAttack("huge-length", "-length", "1000000000", "-d", "5s"))
	if r.rep.GRPCStatus != "8" {
		t.Errorf("1 GB request answered grpc-status %q (%q), want 8 (RESOURCE_EXHAUSTED)", r.rep.GRPCStatus, r.rep.GRPCMessage)
	}
	if r.rep.StreamReset == "" {
		t.Errorf("1 GB request not reset after its answer: it took %d bytes (%d after the answer)", r.rep.Accepted, r.rep.AcceptedAfterAnswer)
	}
	if r.rep.Accepted > 16<<20 {
		t.Errorf("1 GB request: infergate took %.1f MiB of it (%.1f MiB after answering), want <= 16 MiB",
			mib(r.rep.Accepted), mib(r.rep.AcceptedAfterAnswer))
	}
	r.checkRSS(t)
	r.checkGood(t, 0)
}

// TestFrontDoorMalformedNeighbour: a malformed request (an upper-case
// header name; a second :path) beside a good call on the same
// connection: the malformed one is reset, its later DATA ignored (RFC
// 9113 §5.1), and the good call answered with grpc-status 0 on a
// connection that lives. Before the fix: GOAWAY PROTOCOL_ERROR, the good
// call lost.
func TestFrontDoorMalformedNeighbour(t *testing.T) {
	f := newFrontDoor(t)
	var reps []*attack.Report
	r := f.run("malformed neighbours", func(ctx context.Context, addr string) (*attack.Report, error) {
		for _, m := range []string{"uppercase", "second-path"} {
			rep, err := benchAttack("malformed-neighbour", "-malformation", m)(ctx, addr)
			if err != nil {
				return nil, err
			}
			reps = append(reps, rep)
		}
		return reps[0], nil
	})
	for i, m := range []string{"uppercase", "second-path"} {
		rep := reps[i]
		if i > 0 {
			t.Logf("%s report:\n%s", m, rep)
		}
		if !rep.GoodAnswered || rep.GoAway != nil || rep.ClosedAfter > 0 || rep.NeighbourReset == "" {
			var gone string
			if rep.GoAway != nil {
				gone = "GOAWAY " + rep.GoAway.String()
			} else if rep.ClosedAfter > 0 {
				gone = "closed after " + rep.ClosedAfter.String()
			}
			t.Errorf("%s: good call answered %v (grpc-status %q %q, reset %q), malformed stream reset %q, connection %q; want the good call answered with status 0, the other reset, the connection alive",
				m, rep.GoodAnswered, rep.GRPCStatus, rep.GRPCMessage, rep.StreamReset, rep.NeighbourReset, gone)
		}
		if rep.NeighbourReset != "" && rep.NeighbourReset != http2.ErrCodeProtocol.String() {
			t.Logf("%s: malformed stream reset %s (grpc-go: PROTOCOL_ERROR)", m, rep.NeighbourReset)
		}
	}
	r.checkGood(t, 0)
}

// TestFrontDoorBigUploads: 100 callers, each on its own connection, send
// 4 MiB requests to identity_fp32 for 10 s (400 MiB in flight): peak RSS
// <= 256 MiB with the defaults, no call fails. Before the fix: peak RSS
// 1,094-1,244 MiB, above the shipped sidecar's 1 GiB limit. These are
// honest calls entitled to the CPU, so the good client's p99 is logged,
// not bounded (against grpc-go direct it is p50 114 ms, p99 516 ms,
// x190 of its baseline, on this machine); its rate is held to >= 90%.
func TestFrontDoorBigUploads(t *testing.T) {
	if testing.Short() {
		t.Skip("10 s of 100 x 4 MiB uploads")
	}
	f := newFrontDoor(t)
	r := f.run("100 x 4 MiB uploads", benchAttack("big-uploads", "-c", "100", "-bytes", "4194304", "-d", "10s"))
	if r.rssPeak > 256<<20 {
		t.Errorf("100 x 4 MiB uploads: peak RSS %.1f MiB (%.1f before), want <= 256 MiB", mib(r.rssPeak), mib(r.rssBefore))
	}
	if r.rep.Failed > 0 || r.rep.OK == 0 {
		t.Errorf("100 x 4 MiB uploads: %d ok, %d failed %v (first: %s), want none failed", r.rep.OK, r.rep.Failed, r.rep.Codes, r.rep.FirstError)
	}
	if ratio := r.during.rate / r.base.rate; ratio < minGoodRate {
		t.Errorf("good client kept %.1f%% of its rate (%.1f/s alone, %.1f/s during the uploads), want >= %.0f%%",
			100*ratio, r.base.rate, r.during.rate, 100*minGoodRate)
	}
	if r.during.failed > 0 {
		t.Errorf("good client: %d of %d calls failed during the uploads (first: %s)", r.during.failed, r.during.started, r.during.firstFailure)
	}
}
