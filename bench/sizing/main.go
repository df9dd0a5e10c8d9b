// Command sizing measures what infergate's client connections cost it in
// memory: per idle connection, per open stream, per
// stream mid-upload, and infergate idle. Each run starts a fresh
// simserver and infergate (from -bin), makes one warm-up call, takes a
// baseline, applies one load with raw HTTP/2 clients of its own, holds it,
// and reads infergate's VmRSS (/proc/PID/status) and Go heap
// (go_memstats_heap_inuse_bytes on its admin /metrics), then the same
// after the load left. Under load it also fetches a heap profile with
// gc=1 (infergate runs with --pprof) for the live heap after a collection.
//
// Scenarios (-only): alone; idle-1000, idle-5000 (preface + SETTINGS);
// idle-5000-churn (5000 open and close, then 5000 more); streams (40
// connections x 250 ModelInfer HEADERS, no body); fat-headers (400 such
// streams with 256 KiB of metadata); fill-window (10 x 256 streams, each a
// complete 64 KiB message without END_STREAM); cut-64k and cut-4m (100
// connections x 1 stream that sent 64 KiB, or all, of a 4 MiB request and
// no END_STREAM: relayed as it arrives); whole-64k and whole-4m (the same
// with model_name after the tensor, so it is read whole under the budget);
// whole-4m-b256 (budget 256 MiB, GOMEMLIMIT 90% of 1 GiB); mix-c1g (those
// settings with 5000 idle connections, the 10,000 streams and the 100
// read-whole uploads at once).
//
//	make build && cd bench && go run ./sizing -bin ../bin -reps 3
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/internal/attack"
	"github.com/infergate/infergate/internal/childproc"
	"github.com/infergate/infergate/internal/h2raw"
	"github.com/infergate/infergate/proto/methods"
)

type scenario struct {
	name  string
	unit  string // what the delta is divided by
	per   int    // how many of unit
	flags []string
	env   []string
	run   func(ctx context.Context, addr string, r *result) (func(), error)
}

// sample is one reading of both processes.
type sample struct {
	RSS, RSSAnon, Heap, Goroutines, Buffered, SimRSS int64
	HeapAlloc, Stack, Retained, NextGC, GCs          int64
}

type result struct {
	Scenario                  string
	Rep                       int
	Fresh, Base, Load, Peak   sample
	Live                      sample // after a forced GC, under load
	After                     sample
	PerUnitRSS, PerUnitHeap   float64
	PerUnitLive               float64 // heap in use after a forced GC
	Unit                      string
	N                         int
	Notes                     map[string]any
	Err                       string `json:",omitempty"`
	SetupSeconds, LoadSeconds float64
}

func main() {
	bin := flag.String("bin", "bin", "folder with infergate and simserver")
	reps := flag.Int("reps", 3, "runs of each scenario")
	only := flag.String("only", "", "comma-separated scenarios (default all)")
	settle := flag.Duration("settle", 2*time.Second, "hold time before the loaded reading")
	out := flag.String("json", "", "write every run's result as JSON lines here")
	flag.StringVar(&profDir, "profiles", "", "keep each run's heap profile (after a forced GC, under load) in this folder")
	flag.Parse()

	all := scenarios()
	var pick []scenario
	for _, s := range all {
		if *only == "" || slices.Contains(strings.Split(*only, ","), s.name) {
			pick = append(pick, s)
		}
	}
	var jw io.Writer = io.Discard
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			fatal(err)
		}
		defer f.Close()
		jw = f
	}
	results := map[string][]*result{}
	for rep := 1; rep <= *reps; rep++ {
		for _, s := range pick {
			r := runOne(*bin, s, rep, *settle)
			results[s.name] = append(results[s.name], r)
			b, _ := json.Marshal(r)
			fmt.Fprintln(jw, string(b))
			fmt.Fprintf(os.Stderr, "%-20s rep %d: base RSS %s heap %s | load RSS %s (peak %s) heap %s buffered %s gor %d | live heap %s retained %s | after RSS %s | %.1f KiB RSS/%s, %.1f KiB heap/%s, %.1f KiB live/%s sim ΔRSS %s %v %s\n",
				s.name, rep, mib(r.Base.RSS), mib(r.Base.Heap), mib(r.Load.RSS), mib(r.Peak.RSS), mib(r.Load.Heap), mib(r.Load.Buffered), r.Load.Goroutines,
				mib(r.Live.Heap), mib(r.Load.Retained), mib(r.After.RSS), r.PerUnitRSS/1024, r.Unit, r.PerUnitHeap/1024, r.Unit, r.PerUnitLive/1024, r.Unit, mib(r.Load.SimRSS-r.Base.SimRSS), r.Notes, r.Err)
		}
	}
	fmt.Println("scenario | per | RSS/unit median [min–max] | heap/unit | live heap/unit (after GC) | base RSS | base heap | load RSS | load heap | buffered | sim ΔRSS | after RSS")
	for _, s := range pick {
		rs := results[s.name]
		f := func(g func(*result) float64) string {
			v := make([]float64, 0, len(rs))
			for _, r := range rs {
				v = append(v, g(r))
			}
			slices.Sort(v)
			return fmt.Sprintf("%.1f [%.1f–%.1f]", v[len(v)/2], v[0], v[len(v)-1])
		}
		fmt.Printf("%s | %d %s | %s KiB | %s KiB | %s KiB | %s MiB | %s MiB | %s MiB | %s MiB | %s MiB | %s MiB | %s MiB\n", s.name, s.per, s.unit,
			f(func(r *result) float64 { return r.PerUnitRSS / 1024 }),
			f(func(r *result) float64 { return r.PerUnitHeap / 1024 }),
			f(func(r *result) float64 { return r.PerUnitLive / 1024 }),
			f(func(r *result) float64 { return float64(r.Base.RSS) / (1 << 20) }),
			f(func(r *result) float64 { return float64(r.Base.Heap) / (1 << 20) }),
			f(func(r *result) float64 { return float64(r.Load.RSS) / (1 << 20) }),
			f(func(r *result) float64 { return float64(r.Load.Heap) / (1 << 20) }),
			f(func(r *result) float64 { return float64(r.Load.Buffered) / (1 << 20) }),
			f(func(r *result) float64 { return float64(r.Load.SimRSS-r.Base.SimRSS) / (1 << 20) }),
			f(func(r *result) float64 { return float64(r.After.RSS) / (1 << 20) }))
	}
}

func mib(n int64) string { return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20)) }

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "sizing:", err)
	os.Exit(1)
}

// proc is a started child and the key=value pairs of its start line.
type proc struct {
	*childproc.Proc
	addrs map[string]string
}

var addrRE = regexp.MustCompile(`(\w+)=(\S+)`)

// start runs path with args and waits for its start line, the first line
// that begins with prefix.
func start(path string, args, env []string, prefix string) (*proc, error) {
	cp, err := childproc.Start(context.Background(), childproc.Spec{
		Name: filepath.Base(path), Path: path, Args: args, Env: append(cleanEnv(), env...),
		Ready: regexp.MustCompile(`^` + regexp.QuoteMeta(prefix) + `.*`),
	})
	if err != nil {
		return nil, err
	}
	p := &proc{Proc: cp, addrs: map[string]string{}}
	for _, m := range addrRE.FindAllStringSubmatch(cp.Match[0], -1) {
		p.addrs[m[1]] = m[2]
	}
	return p, nil
}

// cleanEnv is this process's environment without Go runtime settings,
// so that each child runs with the defaults unless a scenario sets them.
func cleanEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		if strings.HasPrefix(e, "GOMEMLIMIT=") || strings.HasPrefix(e, "GOGC=") || strings.HasPrefix(e, "GODEBUG=") {
			continue
		}
		env = append(env, e)
	}
	return env
}

func status(pid int) (rss, anon int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = v << 10
		case "RssAnon:":
			anon = v << 10
		}
	}
	return rss, anon
}

func metrics(admin string) map[string]float64 {
	m := map[string]float64{}
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		return m
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "#") {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err == nil {
			m[l[:i]] = v
		}
	}
	return m
}

func read(ig, sim *proc) sample {
	var s sample
	s.RSS, s.RSSAnon = status(ig.Pid())
	s.SimRSS, _ = status(sim.Pid())
	m := metrics(ig.addrs["admin"])
	s.Heap = int64(m["go_memstats_heap_inuse_bytes"])
	s.Goroutines = int64(m["go_goroutines"])
	s.Buffered = int64(m["infergate_buffered_bytes"])
	s.HeapAlloc = int64(m["go_memstats_heap_alloc_bytes"])
	s.Stack = int64(m["go_memstats_stack_inuse_bytes"])
	s.Retained = int64(m["go_memstats_heap_idle_bytes"] - m["go_memstats_heap_released_bytes"])
	s.NextGC = int64(m["go_memstats_next_gc_bytes"])
	s.GCs = int64(m["go_gc_duration_seconds_count"])
	return s
}

// heapProfile fetches a heap profile after a forced GC, kept in dir when
// dir is set.
func heapProfile(admin, dir, name string, rep int) error {
	resp, err := http.Get("http://" + admin + "/debug/pprof/heap?gc=1")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var w io.Writer = io.Discard
	if dir != "" {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.pb.gz", name, rep)))
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	_, err = io.Copy(w, resp.Body)
	return err
}

var profDir string

func runOne(bin string, s scenario, rep int, settle time.Duration) *result {
	r := &result{Scenario: s.name, Rep: rep, Unit: s.unit, N: s.per, Notes: map[string]any{}}
	fail := func(err error) *result { r.Err = err.Error(); return r }
	sim, err := start(filepath.Join(bin, "simserver"), []string{"-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0"}, nil, "simserver:")
	if err != nil {
		return fail(err)
	}
	defer sim.Kill()
	args := append([]string{"--upstream", sim.addrs["grpc"], "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--pprof"}, s.flags...)
	ig, err := start(filepath.Join(bin, "infergate"), args, s.env, "infergate:")
	if err != nil {
		return fail(err)
	}
	defer ig.Kill()
	addr := ig.addrs["grpc"]
	r.Notes["version"] = ig.addrs["version"]
	r.Notes["budget"] = ig.addrs["buffer_budget"]
	time.Sleep(500 * time.Millisecond)
	r.Fresh = read(ig, sim)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Warm-up: one whole call through the relay (opens the upstream pool).
	wc, err := dialRaw(ctx, addr)
	if err != nil {
		return fail(err)
	}
	if err := wc.Call(ctx, 1, requestFields(addr), grpcMsg(marshalSimple())); err != nil {
		return fail(fmt.Errorf("warm-up call: %w", err))
	}
	wc.Close()
	time.Sleep(time.Second)
	r.Base = read(ig, sim)

	t0 := time.Now()
	leave, err := s.run(ctx, addr, r)
	r.SetupSeconds = time.Since(t0).Seconds()
	if err != nil {
		if leave != nil {
			leave()
		}
		return fail(err)
	}
	t1 := time.Now()
	for time.Since(t1) < settle {
		time.Sleep(200 * time.Millisecond)
		x := read(ig, sim)
		if x.RSS > r.Peak.RSS {
			r.Peak = x
		}
		r.Load = x
	}
	r.LoadSeconds = time.Since(t0).Seconds()
	// Live heap: a heap profile with gc=1 runs a collection first.
	if err := heapProfile(ig.addrs["admin"], profDir, s.name, rep); err != nil {
		r.Notes["profile"] = err.Error()
	}
	r.Live = read(ig, sim)
	leave()
	time.Sleep(2 * time.Second)
	r.After = read(ig, sim)
	r.PerUnitRSS = float64(r.Load.RSS-r.Base.RSS) / float64(s.per)
	r.PerUnitHeap = float64(r.Load.Heap-r.Base.Heap) / float64(s.per)
	r.PerUnitLive = float64(r.Live.Heap-r.Base.Heap) / float64(s.per)
	return r
}

// requestFields are a grpc-go client's HEADERS for ModelInfer.
func requestFields(authority string) []hpack.HeaderField {
	return []hpack.HeaderField{
		{Name: ":method", Value: "POST"},
		{Name: ":scheme", Value: "http"},
		{Name: ":path", Value: methods.ModelInfer},
		{Name: ":authority", Value: authority},
		{Name: "content-type", Value: "application/grpc"},
		{Name: "user-agent", Value: "grpc-go/1.75.0"},
		{Name: "te", Value: "trailers"},
	}
}

func grpcMsg(m []byte) []byte {
	b := make([]byte, 5+len(m))
	n := len(m)
	b[1], b[2], b[3], b[4] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	copy(b[5:], m)
	return b
}

func marshalSimple() []byte { return mustMarshal(attack.SimpleRequest()) }

// uploadBody is a 4 MiB ModelInfer for identity_fp32 as one gRPC
// message. nameLast puts model_name after the tensor (valid protobuf:
// fields may come in any order), so the relay cannot read the target
// from the first 64 KiB and reads the request whole, under the budget;
// otherwise it is laid out as every serializer writes it and the relay
// cuts it through.
func uploadBody(nameLast bool) []byte {
	req := attack.IdentityRequest("identity_fp32", 4<<20)
	if !nameLast {
		return grpcMsg(mustMarshal(req))
	}
	req.ModelName = ""
	m := mustMarshal(req)
	m = protowire.AppendTag(m, 1, protowire.BytesType)
	m = protowire.AppendString(m, "identity_fp32")
	return grpcMsg(m)
}

// dialMany opens n connections, conc at a time, each set up on the
// server's side (SETTINGS ACKed) before it counts.
func dialMany(ctx context.Context, addr string, n, conc int) ([]*h2raw.Conn, func(), error) {
	conns := make([]*h2raw.Conn, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			c, err := dialRaw(ctx, addr)
			if err == nil {
				err = c.Wait(ctx, func(s *h2raw.Seen) bool { return s.SettingsAcked })
			}
			if err != nil {
				errs <- err
				if c != nil {
					c.Close()
				}
				return
			}
			conns[i] = c
		})
	}
	wg.Wait()
	closeAll := func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}
	select {
	case err := <-errs:
		return nil, closeAll, fmt.Errorf("%d of %d connections failed, first: %w", len(errs)+1, n, err)
	default:
	}
	return conns, closeAll, nil
}

func scenarios() []scenario {
	idle := func(n int) scenario {
		return scenario{name: fmt.Sprintf("idle-%d", n), unit: "conn", per: n,
			run: func(ctx context.Context, addr string, r *result) (func(), error) {
				_, leave, err := dialMany(ctx, addr, n, 64)
				return leave, err
			}}
	}
	// churn: 5000 connections open and close, then 5000 more: the
	// second round reuses (and so zeroes, making resident) the memory the
	// first one freed, as a long-running proxy does.
	churn := scenario{name: "idle-5000-churn", unit: "conn", per: 5000,
		run: func(ctx context.Context, addr string, r *result) (func(), error) {
			_, leave, err := dialMany(ctx, addr, 5000, 64)
			leave()
			if err != nil {
				return func() {}, err
			}
			time.Sleep(3 * time.Second)
			_, leave, err = dialMany(ctx, addr, 5000, 64)
			return leave, err
		}}
	const nConns, perConn = 40, 250
	streams := scenario{name: "streams", unit: "stream", per: nConns * perConn,
		run: func(ctx context.Context, addr string, r *result) (func(), error) {
			conns, leave, err := dialMany(ctx, addr, nConns, 40)
			if err != nil {
				return leave, err
			}
			hdr := requestFields(addr)
			for _, c := range conns {
				for i := range perConn {
					if err := open(c, uint32(2*i+1), hdr); err != nil {
						return leave, err
					}
				}
				if err := c.Sync(ctx); err != nil {
					return leave, err
				}
			}
			var resets int64
			for _, c := range conns {
				resets += c.ResetCount()
			}
			r.Notes["resets"] = resets
			if resets > 0 {
				return leave, fmt.Errorf("%d streams reset", resets)
			}
			return leave, nil
		}}
	// fat: open streams whose HEADERS carry 256 KiB of metadata each (the
	// relay accepts header lists up to 8 MiB), 10 connections x 40
	// streams, held: what an open stream costs when it sends more than a
	// gRPC client's usual headers.
	const fatConns, fatStreams, fatBytes = 10, 40, 256 << 10
	fat := scenario{name: "fat-headers", unit: "stream", per: fatConns * fatStreams,
		run: func(ctx context.Context, addr string, r *result) (func(), error) {
			conns, leave, err := dialMany(ctx, addr, fatConns, fatConns)
			if err != nil {
				return leave, err
			}
			hdr := append(requestFields(addr), hpack.HeaderField{Name: "x-meta", Value: strings.Repeat("m", fatBytes)})
			for _, c := range conns {
				for i := range fatStreams {
					if err := open(c, uint32(2*i+1), hdr); err != nil {
						return leave, err
					}
				}
				if err := c.Sync(ctx); err != nil {
					return leave, err
				}
			}
			var resets int64
			for _, c := range conns {
				resets += c.ResetCount()
			}
			r.Notes["resets"] = resets
			return leave, nil
		}}
	// fill: 10 connections x 256 streams (the default limit), each
	// HEADERS and one complete 64 KiB message (the initial window, which
	// the relay takes without asking the budget), no END_STREAM, held.
	const fillConns, fillStreams = 10, 256
	fill := scenario{name: "fill-window", unit: "stream", per: fillConns * fillStreams,
		run: func(ctx context.Context, addr string, r *result) (func(), error) {
			conns, leave, err := dialMany(ctx, addr, fillConns, fillConns)
			if err != nil {
				return leave, err
			}
			body := grpcMsg(make([]byte, 64<<10-5))
			hdr := requestFields(addr)
			var wg sync.WaitGroup
			errs := make(chan error, fillConns)
			for _, c := range conns {
				wg.Go(func() {
					for i := range fillStreams {
						id := uint32(2*i + 1)
						if err := open(c, id, hdr); err != nil {
							errs <- err
							return
						}
						if _, err := c.Send(ctx, id, body, false, 5*time.Second); err != nil {
							errs <- err
							return
						}
					}
					if err := c.Sync(ctx); err != nil {
						errs <- err
					}
				})
			}
			wg.Wait()
			var resets int64
			for _, c := range conns {
				resets += c.ResetCount()
			}
			r.Notes["resets"] = resets
			r.Notes["sent_MiB"] = fillConns * fillStreams * len(body) >> 20
			select {
			case err := <-errs:
				return leave, err
			default:
			}
			return leave, nil
		}}
	upload := func(name string, nameLast bool, send int, flags, env []string) scenario {
		const n = 100
		return scenario{name: name, unit: "stream", per: n, flags: flags, env: env,
			run: func(ctx context.Context, addr string, r *result) (func(), error) {
				return uploads(ctx, addr, r, n, nameLast, send)
			}}
	}
	const win = 64 << 10
	c1g := []string{"--max-buffered-bytes", strconv.Itoa(256 << 20)}
	c1gEnv := []string{"GOMEMLIMIT=" + strconv.Itoa(1<<30*9/10)}
	// mix: a 1 GiB container's settings (budget 256 MiB, soft limit 90%)
	// with everything at once: 5000 idle connections, 40 x 250 open
	// streams, 100 read-whole 4 MiB uploads filling the budget.
	mix := scenario{name: "mix-c1g", unit: "-", per: 1, flags: c1g, env: c1gEnv,
		run: func(ctx context.Context, addr string, r *result) (func(), error) {
			var leaves []func()
			leave := func() {
				for _, l := range leaves {
					l()
				}
			}
			_, l, err := dialMany(ctx, addr, 5000, 64)
			leaves = append(leaves, l)
			if err != nil {
				return leave, err
			}
			l, err = streams.run(ctx, addr, r)
			leaves = append(leaves, l)
			if err != nil {
				return leave, err
			}
			l, err = uploads(ctx, addr, r, 100, true, 1<<30)
			leaves = append(leaves, l)
			return leave, err
		}}
	return []scenario{
		{name: "alone", unit: "-", per: 1, run: func(context.Context, string, *result) (func(), error) { return func() {}, nil }},
		idle(1000),
		idle(5000),
		churn,
		streams,
		fat,
		fill,
		upload("cut-64k", false, win, nil, nil),
		upload("cut-4m", false, 1<<30, nil, nil),
		upload("whole-64k", true, win, nil, nil),
		upload("whole-4m", true, 1<<30, nil, nil),
		upload("whole-4m-b256", true, 1<<30, c1g, c1gEnv),
		mix,
	}
}

// uploads opens n connections with one ModelInfer stream each that sends
// the first send bytes of a 4 MiB request, as the windows allow, and no
// END_STREAM.
func uploads(ctx context.Context, addr string, r *result, n int, nameLast bool, send int) (func(), error) {
	conns, leave, err := dialMany(ctx, addr, n, 50)
	if err != nil {
		return leave, err
	}
	body := uploadBody(nameLast)
	if send > len(body) {
		send = len(body)
	}
	r.Notes["request_bytes"] = len(body)
	hdr := requestFields(addr)
	var mu sync.Mutex
	var wg sync.WaitGroup
	whole, sentTotal := 0, 0
	var firstErr error
	for _, c := range conns {
		wg.Go(func() {
			err := open(c, 1, hdr)
			k := 0
			if err == nil {
				// No END_STREAM: the request stays open.
				k, err = c.Send(ctx, 1, body[:send], false, time.Second)
			}
			if err == nil {
				err = c.Sync(ctx)
			}
			mu.Lock()
			sentTotal += k
			if k == len(body) {
				whole++
			}
			if err != nil && firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	var resets int64
	for _, c := range conns {
		resets += c.ResetCount()
	}
	r.Notes["resets"] = resets
	r.Notes["sent_MiB"] = fmt.Sprintf("%.1f", float64(sentTotal)/(1<<20))
	r.Notes["whole_4MiB_sent"] = whole
	if firstErr == nil && resets > 0 {
		firstErr = fmt.Errorf("%d streams reset", resets)
	}
	return leave, firstErr
}

func mustMarshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// dialRaw opens a raw connection as light as the measured loads need: 4
// KiB buffers, so thousands fit in this process, and no window returned
// for what the server sends (the loads get nothing back).
func dialRaw(ctx context.Context, addr string) (*h2raw.Conn, error) {
	return h2raw.Dial(ctx, addr, h2raw.Options{BufSize: 4 << 10, NoReplenish: true})
}

// open opens stream id with hdr, its send window followed.
func open(c *h2raw.Conn, id uint32, hdr []hpack.HeaderField) error {
	c.Watch(id)
	return c.Headers(id, hdr, false)
}
