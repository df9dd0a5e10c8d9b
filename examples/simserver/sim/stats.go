package sim

import (
	"sync/atomic"
	"time"
)

// Failure reasons, as in Triton's nv_inference_request_failure{reason}.
const (
	// ReasonOther is a request rejected by validation.
	ReasonOther = "OTHER"
	// ReasonBackend is a failure of the model itself (injected errors,
	// dropped connections).
	ReasonBackend = "BACKEND"
	// ReasonCanceled is a request whose client cancelled or timed out.
	ReasonCanceled = "CANCELED"
	// ReasonRejected is a request refused before it ran (server closing).
	ReasonRejected = "REJECTED"
)

var failureReasons = [...]string{ReasonOther, ReasonBackend, ReasonCanceled, ReasonRejected}

// duration is a StatisticDuration: a count and a cumulative time.
type duration struct {
	count atomic.Uint64
	ns    atomic.Uint64
}

func (d *duration) add(dt time.Duration) {
	d.count.Add(1)
	d.ns.Add(uint64(max(dt, 0)))
}

// modelStats are one model's cumulative statistics. Atomics, not a mutex,
// so that concurrent requests to a model with unlimited slots do not
// serialise on bookkeeping.
type modelStats struct {
	success, fail, queue, computeInfer duration
	inferenceCount, execCount          atomic.Uint64
	failures                           [len(failureReasons)]atomic.Uint64
	cancelled                          atomic.Int64
	pending                            atomic.Int64
	lastInferenceMS                    atomic.Uint64
	// byPriority counts requests by their priority parameter: [0] none
	// or 0, [i] level i, the last one any level beyond.
	byPriority [maxPriorityCounted + 2]atomic.Uint64
}

// maxPriorityCounted is the highest priority level counted on its own.
const maxPriorityCounted = 8

// countPriority counts a request whose priority parameter is p (0 none).
func (s *modelStats) countPriority(p uint64) {
	s.byPriority[min(p, maxPriorityCounted+1)].Add(1)
}

// recordFailure counts a failed request and its duration.
func (s *modelStats) recordFailure(reason string, dt time.Duration) {
	s.fail.add(dt)
	for i, r := range failureReasons {
		if r == reason {
			s.failures[i].Add(1)
		}
	}
	if reason == ReasonCanceled {
		s.cancelled.Add(1)
	}
}

// recordSuccess counts a successful execution of batch items.
func (s *modelStats) recordSuccess(batch int, total, queue, compute time.Duration, end time.Time) {
	s.success.add(total)
	s.queue.add(queue)
	s.computeInfer.add(compute)
	s.inferenceCount.Add(uint64(batch))
	s.execCount.Add(1)
	s.lastInferenceMS.Store(uint64(end.UnixMilli()))
}
