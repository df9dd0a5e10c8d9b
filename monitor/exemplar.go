package monitor

import (
	"time"
)

// Exemplars. A traced call leaves its trace id on the bucket of
// infergate_request_duration_seconds its Total fell in: a dashboard's p99
// panel then links to a trace of a call that made it. client_golang's
// ObserveWithExemplar would allocate a label map, a hex string and a
// protobuf message on every traced call; instead each shard keeps, under
// the lock record already holds, the most recent exemplar of each classic
// bucket in a fixed array, and the collector turns them into exemplars
// at scrape time (classic buckets and the native histogram alike,
// durations.go).

// ExemplarLabel is the exemplar label that carries the trace id, the name
// Grafana's Prometheus data source and Tempo look for.
const ExemplarLabel = "trace_id"

// exemplar is one traced call: 32 bytes.
type exemplar struct {
	trace [16]byte
	ns    int64 // Total, nanoseconds
	at    int64 // when it was recorded, Unix nanoseconds; 0: empty slot
}

// exemplarSet holds the latest exemplar of each classic bucket of
// durationBuckets, +Inf last: 18 × 32 = 576 bytes, allocated by a shard
// on its first traced call, so a series that is never traced pays one
// nil pointer per shard.
type exemplarSet [len(durationBuckets) + 1]exemplar

// exemplarSetBytes is the size of one exemplarSet, for the docs.
const exemplarSetBytes = (len(durationBuckets) + 1) * 32

// noteExemplar keeps a traced call as the latest exemplar of its classic
// bucket b. Called with sh.mu held.
func (sh *shard) noteExemplar(b int, trace [16]byte, total time.Duration, at time.Time) {
	if sh.ex == nil {
		sh.ex = new(exemplarSet)
	}
	sh.ex[b] = exemplar{trace: trace, ns: int64(total), at: at.UnixNano()}
}
