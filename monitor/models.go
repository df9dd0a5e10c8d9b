package monitor

import (
	"slices"
	"strings"
	"time"
)

// ModelView is one model's recent latency, as /api/v1/models shows it
// before anything is added from elsewhere (a baseline, a GPU, a cause
// hint): its calls of the last slices and their quantiles.
type ModelView struct {
	Model string
	// Window is the time the slices cover.
	Window time.Duration
	// Calls, P50 and P99 are the calls' count and end-to-end latency;
	// QueueP99 their time in a batch queue, QueueSeen whether the
	// model's series ever queued.
	Calls     uint64
	P50, P99  time.Duration
	QueueP99  time.Duration
	QueueSeen bool
}

// Models returns the recent latency of every model group names (as in
// Recent: group keys a series by model, "" leaves it out) that had calls
// in the last n completed slices, sorted by model.
func (r *Registry) Models(n int, group func(SeriesKey) string) []ModelView {
	recent, _ := r.Recent(n, group)
	n = min(max(n, 1), r.cfg.slicesPerMinute)
	window := time.Duration(n) * time.Minute / time.Duration(r.cfg.slicesPerMinute)
	out := make([]ModelView, 0, len(recent))
	for model, rs := range recent {
		tot, q := rs.Stats[ComponentTotal], rs.Stats[ComponentQueue]
		if tot.Count == 0 {
			continue // only open streams: no finished call yet
		}
		out = append(out, ModelView{Model: model, Window: window, Calls: tot.Count, P50: tot.P50, P99: tot.P99,
			QueueP99: q.P99, QueueSeen: rs.QueueSeen})
	}
	slices.SortFunc(out, func(a, b ModelView) int { return strings.Compare(a.Model, b.Model) })
	return out
}
