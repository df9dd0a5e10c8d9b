// Bench is infergate's load generator and scenario runner.
//
// Usage:
//
//	bench load -target 127.0.0.1:8001 -proto kserve -model simple -c 8 -d 10s
//	bench load -target 127.0.0.1:8500 -proto tf -model half_plus_two -rate 2000 -arrival poisson
//	bench load -target 127.0.0.1:8001 -model llm_stream -stream -c 4 -d 10s
//	bench overhead [-quick] [-repeat N] [-open-base direct|slowest] [-out DIR]
//	bench overhead -size simple,1MiB,16MiB -c 8,32 -conns 1,4 -repeat 3 [-ghz PATH] [-byte-relay] [-haproxy-tcp]
//	bench uploads [-c 100] [-bytes 4MiB] [-d 10s] [-repeat 3] [-out DIR]
//	bench relay -listen 127.0.0.1:9000 -upstream 127.0.0.1:8001
//	bench batching [-quick] [-static 64:2ms,32:5ms] [-out DIR]
//	bench soak [-rate 150] [-d 10m] [-sample 30s] [-infergate-args "..."] [-out DIR]
//	bench detect [-days 14] [-scale 1440] [-light 10m] [-out DIR]
//	bench failover [-rate 200] [-fault 20s] [-recovery 20s] [-flags-only] [-out DIR]
//	bench attack rapid-reset -addr 127.0.0.1:9001 [-d 5s] [-json]
//	bench attack big-uploads -addr 127.0.0.1:9001 [-c 100] [-bytes 4194304] [-d 10s]
//
// load runs one closed-loop (-c) or open-loop (-rate) measurement against a
// loopback model server or proxy and prints a Markdown table (and writes
// JSON with -out, Markdown with -md); with -stream it sends on
// ModelStreamInfer to a decoupled model and adds each request's time to
// its first response, the gaps between its responses and their number,
// as infergate measures them. overhead starts simserver, infergate,
// nginx and HAProxy (h2 on both sides, http-reuse always; left out, and
// said so in the report, when not installed) itself and compares the
// paths for a small and a 1 MiB payload (or -size's), at each -c caller
// count on each -conns connection count, and runs ghz beside its own
// client when installed; with -byte-relay it also measures relay (path
// tcp-relay), a TCP byte relay that parses nothing and splices, and with
// -haproxy-tcp HAProxy in mode tcp (path haproxy-tcp): the floors of any
// proxy's cost on the machine. uploads starts simserver, infergate,
// nginx and HAProxy and runs -c callers, each on its own connection,
// sending -bytes ModelInfer requests to identity_fp32 in a closed loop
// for -d through each proxy, in -repeat interleaved rounds; it reports
// per path the calls ok and failed, calls/s and MB/s, p50/p99 and the
// proxy's peak RSS (VmHWM of infergate's and HAProxy's one process, the
// sampled sum of nginx's workers' VmRSS) as a table (uploads.md and
// uploads.json with -out). batching compares batching off, static and adaptive against
// offered load and draws a plot. soak starts simserver and infergate and
// drives an open-loop, production-like mix through infergate for a long
// time (KServe ModelInfer on resnet50 with 1 to 4 rows and simple, TF Predict on
// half_plus_two, a few ModelStreamInfer streams, some calls with short
// deadlines, 1% of calls to junk model names that are each new). Every
// -sample it records infergate's RSS (VmRSS of its pid), go_goroutines, the
// size and scrape time of /metrics, and the interval's calls sent, ok and
// failed by code with p50/p99; it prints one Markdown table row per sample
// and a verdict: RSS and goroutines must stay within -tolerance (10%)
// between the first sample at or after -baseline (2m) and the last, else
// the verdict is FAIL and bench exits 1. With -out it writes soak.json and
// soak.md. detect replays a compressed multi-day latency and load pattern
// through infergate with its default alert rules, injects a x1.47
// slowdown, a +10 ms/min creep, a 5% INTERNAL error spike and a GPU
// saturation, and reports the time from each injection to firing, the
// false alerts over the judged normal days and a steady light load, and
// what a Prometheus rule over rate[5m] with for: 5m would have done
// (detect.md, detect.json, detect.png). failover starts a primary
// simserver (resnet50), an edge simserver (mobilenet_v3) and infergate
// with resnet50 falling back to the edge's mobilenet_v3, drives open-loop
// ModelInfer through it, injects a hang, 100% errors, a 10x slowdown,
// dropped connections and a SIGKILL of the primary one after another, and
// reports per fault the time to fall over and back, failed calls, p99 and
// route flips, with every call accounted for (failover.md, .json, .png,
// calls.csv). attack runs one misbehaving HTTP/2 client from internal/attack
// (raw frames: rapid-reset, empty-headers, hold-streams, never-read,
// huge-length, malformed-neighbour; or big-uploads, 100 honest grpc-go
// callers with 4 MiB requests) against a loopback server or proxy and
// prints its report (-json: as JSON): frames and streams sent, the GOAWAY
// and when it came, the resets received. Run "bench <command> -h" for the flags.
package main
