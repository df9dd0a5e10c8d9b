// Package monitor measures every proxied call in HDR histograms and exports
// exact tail latency: rolling 1m, 5m and 15m windows per series, read by
// alerts and the admin API through Registry.Snapshot and by Prometheus
// through Registry.Register. It knows nothing of gRPC or alerts.
//
// # Recording
//
// A Series is one (model, version, method, upstream, route, code class).
// The proxy calls Registry.Record with the key and the components of each
// finished call (total, upstream and queue time; overhead = total -
// upstream - queue, clamped at 0, is derived here); the lookup of an
// existing series takes no lock. Callers must not keep *Series handles: a series idle for
// Options.IdleTimeout is dropped, and a dropped series refuses calls.
// Record locks one of a few shards (sync.Pool tokens keep each processor
// on its own shard) and appends the call's components, in microseconds, to
// a small buffer of 32 calls; only a shard that takes more calls than that
// in one slice moves them into dense HDR histograms (1 µs to 1 h, 3
// significant figures; longer values clamp to 1 h in the quantiles while
// Max stays exact), so a series with a few calls a second never holds one.
// Record does not allocate in the steady state (BenchmarkSeriesRecordParallel:
// about 20 ns per call, 0 allocations, on 2 cores).
//
// # Windows
//
// Registry.Run rotates the windows every slice (Options.SliceLength, 1s): the
// shards' buffers and dense histograms are drained into a slice that keeps
// each call's components as HDR bucket indexes (2 bytes each, up to 256
// calls: values in one bucket are the same to an HDR histogram) or in a
// packed HDR histogram per component, and returned to their pools. The 1m window is the last 60
// slices; 5m and 15m are the current minute plus the 4 or 14 completed
// minutes before it, so they step once a minute and never hold data older
// than their length. Count, Sum and Max are exact; quantiles are those of
// an HDR histogram of the same values (within 0.1%, never above Max): from
// bucket indexes they are read by sorting and taking the top of the bucket
// at the rank, which TestRawPercentilesMatchHDR checks against the
// histogram. A snapshot lags the calls by at most one slice.
//
// # Bounded by design
//
// What clients send cannot grow the registry without limit. Once MaxSeries
// series exist, new keys share one series whose labels are all "other"; so
// do keys whose model, version or method is longer than MaxLabelBytes (128)
// or not valid UTF-8; infergate_series_overflow_total{reason} counts them.
// A call the upstream answers NotFound or Unimplemented for a model (for
// calls without a model: a method) that has no series of its own is
// recorded with that label set to "(unknown)", so junk names share one
// series. A series without calls for IdleTimeout (default 15m, the longest
// window) is dropped at a rotation: its memory goes back, its
// infergate_request_duration_seconds label set is deleted when no other
// series shares it, and its place under the cap frees up. Its counters
// (infergate_requests_total and the byte counters) disappear with it and
// start from zero if the key comes back, as Prometheus counters of a
// vanished label set do.
//
// # Memory
//
// Measured by TestSeriesHeap with full 15-minute windows: a series with
// one call a second that is a model of its own holds about 44 KiB, its
// slow-call keeper and its infergate_request_duration_seconds histogram
// included (about 2 KiB: its native buckets are 8-byte counts, dense over
// the range its calls span; a series spread over all of 100 µs to 60 s
// fills 616 of them, 4.8 KiB), where a busy series used to hold over
// 1 MiB, so 1,000 such series hold about 44 MiB of heap (integration's
// TestThousandSeriesMemory bounds the process's RSS); at 50 to 100 calls
// a second about 0.5 MiB,
// dominated by the packed one-minute buckets. Shards
// borrow a 512-byte call buffer per slice with calls, and dense histograms
// (184 KiB per component) only past 32 calls in a slice. Rotation costs
// about 50 µs per busy series; a /metrics scrape of 1,000 series with one
// call a second (BenchmarkScrape1000: snapshot, collection, text encoding
// of 11 MB) about 250 ms on 2 cores.
//
// # Streams
//
// A stream (Triton's ModelStreamInfer) carries many requests, and a
// decoupled model answers each with many responses, so its call's length
// says little. Registry.RecordStream takes, per response, the wait for it
// (from the request for the first response, TTFR; from the previous
// response otherwise, the inter-response gap) and, per completed request,
// its number of responses, into the stream part of the stream's series:
// the same key, cap, overflow series, label checks and idle expiry as
// calls (a series whose streams answer is not idle), the same HDR
// geometry, buffers, slices and merger, rotated with the series' window.
// A count n is held as the duration n µs (StreamQuantity.Value reads it
// back). A series gets its stream part on its first stream sample, so
// unary series pay one pointer. SeriesSnapshot.Stream and
// RecentStats.Stream carry the quantities; StreamDropped counts what a
// stream meter left out.
//
// # Prometheus
//
// Register adds infergate_request_duration_seconds (a classic plus native
// histogram whose buckets Record counts in its shard, durations.go) and one
// collector that, per scrape, turns a
// snapshot into const summaries (infergate_request_latency_seconds,
// infergate_upstream_latency_seconds, infergate_proxy_overhead_seconds,
// infergate_queue_latency_seconds, label window), the
// infergate_request_latency_max_seconds gauge, and the counters and gauges
// infergate_requests_total, infergate_request_bytes_total,
// infergate_response_bytes_total, infergate_requests_in_flight,
// infergate_series_overflow_total{reason} and infergate_series; for
// series with stream samples the summaries
// infergate_stream_first_response_seconds,
// infergate_stream_response_gap_seconds and
// infergate_stream_responses_per_request, and for all
// infergate_stream_dropped_total{reason}. Empty windows export NaN
// quantiles; the queue summary appears only for series that ever queued.
//
// A Sample with a TraceID leaves it as the exemplar (label trace_id) of
// its bucket of infergate_request_duration_seconds: each shard keeps the
// latest traced call per classic bucket (576 bytes, allocated on its
// first traced call; nothing per call), and the histogram's collector
// attaches them at scrape time, to the classic buckets and the native
// histogram (exemplar.go).
package monitor
