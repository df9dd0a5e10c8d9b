package main

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/infergate/infergate/batcher"
	"github.com/infergate/infergate/proto/kservepb"
)

// Discovery of the upstream's batching: what Triton's model configs say of
// each ready model (max_batch_size, the dynamic batcher's preferred sizes
// and queue delay), asked at start and every batchDiscoveryInterval, so a
// model loaded or unloaded is seen within it. The batcher caps merged rows
// at each model's max_batch_size and, with batching.auto, batches the
// models that batch.

// batchDiscoveryInterval is how often the upstream's models are asked.
const batchDiscoveryInterval = 30 * time.Second

// maxDiscoveredModels bounds the model configs asked per round: a
// repository of thousands of models must not turn one round into
// thousands of calls.
const maxDiscoveredModels = 1000

// discoverBatching runs the discovery until ctx ends. An upstream without
// the KServe repository API (TF-Serving, which keeps its batching in a
// server-wide file no API reports) is asked once and then left alone.
//
// levels takes each model's priority_levels (flow control sends a call's
// band as its priority where a model has them).
func discoverBatching(ctx context.Context, b *batcher.Batcher, cc grpc.ClientConnInterface, levels func(map[string]int), log *slog.Logger) {
	kc := kservepb.NewGRPCInferenceServiceClient(cc)
	t := time.NewTicker(batchDiscoveryInterval)
	defer t.Stop()
	for {
		limits, lv, err := askLimits(ctx, kc)
		switch {
		case status.Code(err) == codes.Unimplemented:
			log.Warn("batching: the upstream does not list its models' batching (no KServe RepositoryIndex: TF-Serving?); only the models named by batching.models are batched, with no cap from the server")
			return
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			log.Warn("batching: cannot read the upstream's model configs; keeping the last ones", "error", err)
		default:
			b.SetLimits(limits)
			if levels != nil {
				levels(lv)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// askLimits reads the batching of every ready model of the upstream, and
// the priority levels of those that have them.
func askLimits(ctx context.Context, kc kservepb.GRPCInferenceServiceClient) (map[string]batcher.Limits, map[string]int, error) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	idx, err := kc.RepositoryIndex(rctx, &kservepb.RepositoryIndexRequest{Ready: true})
	if err != nil {
		return nil, nil, err
	}
	limits := map[string]batcher.Limits{}
	levels := map[string]int{}
	for _, m := range idx.Models {
		if len(limits) >= maxDiscoveredModels {
			break
		}
		if _, seen := limits[m.Name]; seen || (m.State != "" && m.State != "READY") {
			continue
		}
		resp, err := kc.ModelConfig(rctx, &kservepb.ModelConfigRequest{Name: m.Name})
		if err != nil {
			continue // unloaded since the index, or not ours to read: no limit
		}
		c := resp.GetConfig()
		l := batcher.Limits{MaxBatchSize: int(c.GetMaxBatchSize())}
		if db := c.GetDynamicBatching(); db != nil {
			for _, s := range db.GetPreferredBatchSize() {
				l.PreferredSizes = append(l.PreferredSizes, int(s))
			}
			l.MaxQueueDelay = time.Duration(db.GetMaxQueueDelayMicroseconds()) * time.Microsecond
			if n := db.GetPriorityLevels(); n > 0 {
				levels[m.Name] = int(min(n, 1<<16))
			}
		}
		limits[m.Name] = l
	}
	return limits, levels, nil
}
