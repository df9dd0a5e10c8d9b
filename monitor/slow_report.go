package monitor

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
)

// SlowCall is one of a window's slowest calls, as Registry.SlowCalls
// reports it.
type SlowCall struct {
	At                     time.Time
	Total, Upstream, Queue time.Duration
	// Method, Upstream (the one that answered), Route, CodeClass and
	// SizeClass are the call's series key.
	Method, UpstreamName, Route, CodeClass, SizeClass string
	Code                                              string // gRPC code name
	Attempts                                          int    // upstream attempts (hedges, retries); 0: not counted (streams)
	BatchID                                           uint64 // 0: not batched
	TraceID                                           string // 32 hex digits; "" when untraced
	BytesIn, BytesOut, Rows                           int64
	// Inputs is "INPUT0:FP32[8,3,224,224]", space-separated for several
	// inputs; "" when the proxy did not read them.
	Inputs    string
	NumInputs int
	Partial   bool // the inputs were read from the request's first bytes only
}

// SlowDiff says how a window's slowest calls differ from all its calls.
// The slow calls' figures are exact; all calls' are read from a
// histogram (medians within 10%) and a sketch of the most common shapes.
type SlowDiff struct {
	Calls     int64 // all calls of the window
	SlowCalls int
	// Median request bytes of the slow calls and of all calls, and
	// their ratio (0 when all calls' median is 0).
	SlowMedianBytes, MedianBytes, BytesRatio float64
	// The same for rows (the batch dimension).
	SlowMedianRows, MedianRows, RowsRatio float64
	// Shape is the most common inputs among the slow calls ("" when none
	// was read), ShapeSlowShare the share of slow calls that had it and
	// ShapeShare the share of all calls. ShapeShareAtMost says the shape
	// was not among the counted ones: ShapeShare is then an upper bound.
	Shape            string
	ShapeSlowShare   float64
	ShapeShare       float64
	ShapeShareAtMost bool
	// Summary says it in one sentence.
	Summary string
}

// SlowWindow is one window of a model's slowest calls.
type SlowWindow struct {
	Window  Window
	Calls   []SlowCall // slowest first
	Differs SlowDiff
}

// SlowReport is the slowest calls of one (model, version), newest window
// (1m) first.
type SlowReport struct {
	Model, Version string
	Windows        []SlowWindow
}

// SlowModels returns the models that have slow-call records, sorted.
func (r *Registry) SlowModels() []string {
	var out []string
	for g := range r.state.Load().slow {
		out = append(out, g.model)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// SlowCalls returns the slowest calls of model, one report per version
// (sorted), for the given windows (all when none): nil when the model has
// no series. version, when not "", picks one version.
func (r *Registry) SlowCalls(model, version string, windows ...Window) []SlowReport {
	if len(windows) == 0 {
		windows = []Window{Window1m, Window5m, Window15m}
	}
	var ks []*slowKeeper
	for g, k := range r.state.Load().slow {
		if g.model == model && (version == "" || g.version == version) {
			ks = append(ks, k)
		}
	}
	slices.SortFunc(ks, func(a, b *slowKeeper) int { return strings.Compare(a.group.version, b.group.version) })
	out := make([]SlowReport, 0, len(ks))
	for _, k := range ks {
		rep := SlowReport{Model: k.group.model, Version: k.group.version}
		for _, w := range windows {
			st := k.window(w)
			rep.Windows = append(rep.Windows, slowWindowOf(w, st))
		}
		out = append(out, rep)
	}
	return out
}

func slowWindowOf(w Window, st *slowStep) SlowWindow {
	slices.SortFunc(st.calls, func(a, b slowCall) int {
		switch {
		case a.total > b.total:
			return -1
		case a.total < b.total:
			return 1
		}
		return 0
	})
	sw := SlowWindow{Window: w, Calls: make([]SlowCall, 0, len(st.calls))}
	for _, c := range st.calls {
		sc := SlowCall{
			At: time.Unix(0, c.at), Total: time.Duration(c.total), Upstream: time.Duration(c.upstreamUS) * time.Microsecond,
			Queue: time.Duration(c.queueUS) * time.Microsecond, Code: codeName(c.code), Attempts: int(c.attempts), BatchID: c.batchID(),
			BytesIn: int64(c.bytesIn), BytesOut: int64(c.bytesOut), Rows: int64(c.rows), Inputs: c.inputs(),
			NumInputs: int(c.numInputs), Partial: c.partial,
		}
		if c.key != nil {
			sc.Method, sc.UpstreamName, sc.Route = c.key.Method, c.key.Upstream, c.key.Route
			sc.CodeClass, sc.SizeClass = c.key.CodeClass, c.key.SizeClass
		}
		if tr := c.trace(); tr != ([16]byte{}) {
			sc.TraceID = hex.EncodeToString(tr[:])
		}
		sw.Calls = append(sw.Calls, sc)
	}
	sw.Differs = differs(st)
	return sw
}

// differs compares a window's slow calls with the baseline of all.
func differs(st *slowStep) SlowDiff {
	d := SlowDiff{Calls: st.base.n, SlowCalls: len(st.calls)}
	if len(st.calls) == 0 {
		d.Summary = "no calls in the window"
		return d
	}
	bytes := make([]int64, len(st.calls))
	rows := make([]int64, len(st.calls))
	byShape := map[uint64]int{}
	inputs := map[uint64]string{}
	for i, c := range st.calls {
		bytes[i], rows[i] = int64(c.bytesIn), int64(c.rows)
		if key := c.shapeKey(); key != 0 {
			byShape[key]++
			if in := c.inputs(); in != "" {
				inputs[key] = in
			}
		}
	}
	d.SlowMedianBytes, d.MedianBytes = medianOf(bytes), st.base.bytes.median(st.base.n)
	d.SlowMedianRows, d.MedianRows = medianOf(rows), st.base.rows.median(st.base.n)
	if d.MedianBytes > 0 {
		d.BytesRatio = d.SlowMedianBytes / d.MedianBytes
	}
	if d.MedianRows > 0 {
		d.RowsRatio = d.SlowMedianRows / d.MedianRows
	}
	var top uint64
	for k, n := range byShape {
		if n > byShape[top] || (n == byShape[top] && k < top) {
			top = k
		}
	}
	var parts []string
	switch {
	case d.BytesRatio == 0:
	case nearOne(d.BytesRatio):
		// All calls' median is read from a bucket (within 20%): a ratio
		// this close to 1 says no more than "the same".
		parts = append(parts, fmt.Sprintf("slow calls carried about the median request bytes (%s vs about %s)",
			byteSize(d.SlowMedianBytes), byteSize(d.MedianBytes)))
	default:
		parts = append(parts, fmt.Sprintf("slow calls carried %s the median request bytes (%s vs %s)",
			ratio(d.BytesRatio), byteSize(d.SlowMedianBytes), byteSize(d.MedianBytes)))
	}
	if top != 0 && st.base.n > 0 {
		d.Shape = inputs[top]
		d.ShapeSlowShare = float64(byShape[top]) / float64(len(st.calls))
		found := false
		low := uint32(0)
		for i, sc := range st.base.shapes {
			if sc.key == top {
				d.ShapeShare, found = float64(sc.n)/float64(st.base.n), true
			}
			if i == 0 || sc.n < low {
				low = sc.n
			}
		}
		if !found {
			d.ShapeShare, d.ShapeShareAtMost = float64(low)/float64(st.base.n), true
		}
		d.ShapeShare = min(d.ShapeShare, 1)
		shape := d.Shape
		if shape == "" {
			shape = "one input shape"
		}
		all := fmt.Sprintf("%.0f%% of all calls", 100*d.ShapeShare)
		if d.ShapeShareAtMost {
			all = "under " + all
		}
		parts = append(parts, fmt.Sprintf("%.0f%% had %s (%s)", 100*d.ShapeSlowShare, shape, all))
	}
	if d.RowsRatio > 0 && !nearOne(d.RowsRatio) {
		parts = append(parts, fmt.Sprintf("median rows %g vs %g", d.SlowMedianRows, d.MedianRows))
	}
	if len(parts) == 0 {
		d.Summary = "slow calls carried what all calls carried"
	} else {
		d.Summary = strings.Join(parts, "; ")
	}
	return d
}

// nearOne reports whether a ratio against a histogram's median is within
// the histogram's resolution of 1.
func nearOne(r float64) bool { return r >= 0.75 && r <= 1.34 }

// medianOf returns the median of vs (sorted in place).
func medianOf(vs []int64) float64 {
	if len(vs) == 0 {
		return 0
	}
	slices.Sort(vs)
	n := len(vs)
	if n%2 == 1 {
		return float64(vs[n/2])
	}
	return float64(vs[n/2-1]+vs[n/2]) / 2
}

func ratio(r float64) string {
	if r >= 10 {
		return fmt.Sprintf("%.0f×", r)
	}
	return fmt.Sprintf("%.1f×", r)
}

// byteSize formats a byte count with a binary unit.
func byteSize(b float64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", b/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}
