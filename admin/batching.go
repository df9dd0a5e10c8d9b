package admin

import (
	"maps"
	"slices"

	"github.com/infergate/infergate/batcher"
)

// batchingJSON is the body of GET /api/v1/batching: an empty list when
// batching is off (b nil).
func batchingJSON(b *batcher.Batcher) any {
	type modelJSON struct {
		Model           string  `json:"model"`
		Mode            string  `json:"mode"`
		MaxSize         int     `json:"max_size"`
		PreferredSizes  []int   `json:"preferred_sizes,omitempty"`
		MaxDelaySeconds float64 `json:"max_delay_seconds"`
		QueueSize       int     `json:"queue_size"`
		SLOSeconds      float64 `json:"slo_seconds"`
		Slots           int     `json:"slots"`
		RetryUnbatched  bool    `json:"retry_unbatched"`
		Shed            bool    `json:"shed"`
		batcher.ModelSource
		Queues []batcher.QueueStats `json:"queues"`
	}
	out := struct {
		Models []modelJSON `json:"models"`
	}{Models: []modelJSON{}}
	if b == nil {
		return out
	}
	queues := b.Stats()
	pols := b.Policies()
	sources := b.Sources()
	for _, name := range slices.Sorted(maps.Keys(pols)) {
		p := pols[name]
		m := modelJSON{
			Model: name, Mode: p.Mode.String(), MaxSize: p.MaxSize, PreferredSizes: p.PreferredSizes,
			MaxDelaySeconds: p.MaxDelay.Seconds(), QueueSize: p.QueueSize, SLOSeconds: p.SLO.Seconds(),
			Slots: p.Slots, RetryUnbatched: p.RetryUnbatched, Shed: p.Shed, ModelSource: sources[name], Queues: []batcher.QueueStats{},
		}
		for _, q := range queues {
			if q.Model == name {
				m.Queues = append(m.Queues, q)
			}
		}
		out.Models = append(out.Models, m)
	}
	return out
}
