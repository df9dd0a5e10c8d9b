// Package monitor measures every proxied call in HDR histograms and exports
// exact tail latency: rolling 1m, 5m and 15m windows per series, read by
// alerts and the admin API through Registry.Snapshot and by Prometheus
// through Registry.Register. It knows nothing of gRPC or alerts.
//
// # Recording
//
// A Series is one (model, version, method, upstream, code class). The proxy
// resolves it once (Registry.Series takes no lock when the series exists)
// and calls Series.Record with the components of a finished call: total,
// upstream and queue time; overhead = total - upstream - queue, clamped at
// 0, is derived here. Record locks one of a few shards (sync.Pool tokens
// keep each processor on its own shard), records into dense HDR histograms
// (microseconds, 1 µs to 1 h, 3 significant figures; longer values clamp to
// 1 h in the quantiles while Max stays exact), and does not allocate.
//
// # Windows
//
// Registry.Run calls Rotate every slice (Options.SliceLength, 1s): the
// shards' dense histograms are swapped out, merged into a packed
// (sparse) slice and returned to a pool. The 1m window is the last 60
// slices; 5m and 15m are the current minute plus the 4 or 14 completed
// minutes before it, so they step once a minute and never hold data older
// than their length. Count, Sum and Max are exact; quantiles are within
// 0.1% and never above Max. A snapshot lags the calls by at most one slice.
//
// # Memory
//
// Measured by BenchmarkWindowMemory: an idle series costs about 1.8 KiB
// (shards and empty rings; a slice without calls holds no histogram). A
// series with calls in every slice holds its packed slices, about 0.4-0.6
// MiB at ~50 distinct latencies per second (it grows with the spread of
// latencies), plus, for each shard that recorded during the current slice,
// up to four dense histograms of 184 KiB each, borrowed from a pool until
// the next rotation. Rotation costs about 25 µs per dense histogram in use.
// Series live as long as the registry: they are not dropped when idle,
// because the proxy keeps *Series handles.
//
// # Prometheus
//
// Register adds infergate_request_duration_seconds (a classic plus native
// histogram updated by Record) and one collector that, per scrape, turns a
// snapshot into const summaries (infergate_request_latency_seconds,
// infergate_upstream_latency_seconds, infergate_proxy_overhead_seconds,
// infergate_queue_latency_seconds, label window), the
// infergate_request_latency_max_seconds gauge, and the counters and gauges
// infergate_requests_total, infergate_request_bytes_total,
// infergate_response_bytes_total, infergate_requests_in_flight,
// infergate_series_overflow_total and infergate_series. Empty windows
// export NaN quantiles; the queue summary appears only for series that ever
// queued. Once MaxSeries series exist, new keys share one series whose
// labels are all "other".
package monitor
