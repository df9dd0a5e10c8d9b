package admin

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/infergate/infergate/monitor"
)

// slowSource is what GET /api/v1/slow reads: *monitor.Registry.
type slowSource interface {
	SlowCalls(model, version string, windows ...monitor.Window) []monitor.SlowReport
	SlowModels() []string
}

// slowCallDoc is one slow call in /api/v1/slow, in seconds like the
// metrics.
type slowCallDoc struct {
	At        time.Time `json:"at"`
	Latency   float64   `json:"latency_seconds"`
	Upstream  float64   `json:"upstream_seconds"`
	Queue     float64   `json:"queue_seconds"`
	Method    string    `json:"method"`
	Target    string    `json:"upstream"`
	Route     string    `json:"route"`
	Code      string    `json:"code"`
	CodeClass string    `json:"code_class"`
	SizeClass string    `json:"size_class"`
	Attempts  int       `json:"attempts"`
	BatchID   uint64    `json:"batch_id,omitempty"`
	TraceID   string    `json:"trace_id,omitempty"`
	BytesIn   int64     `json:"request_bytes"`
	BytesOut  int64     `json:"response_bytes"`
	Rows      int64     `json:"rows"`
	// Inputs is "INPUT0:FP32[8,3,224,224]", space-separated for several.
	Inputs    string `json:"inputs"`
	NumInputs int    `json:"num_inputs"`
	Partial   bool   `json:"inputs_partial,omitempty"`
}

// slowDiffDoc says how a window's slow calls differ from all its calls.
type slowDiffDoc struct {
	Calls            int64   `json:"calls"`
	SlowCalls        int     `json:"slow_calls"`
	SlowMedianBytes  float64 `json:"slow_median_request_bytes"`
	MedianBytes      float64 `json:"median_request_bytes"`
	BytesRatio       float64 `json:"request_bytes_ratio"`
	SlowMedianRows   float64 `json:"slow_median_rows"`
	MedianRows       float64 `json:"median_rows"`
	RowsRatio        float64 `json:"rows_ratio"`
	Shape            string  `json:"shape,omitempty"`
	ShapeSlowShare   float64 `json:"shape_slow_share"`
	ShapeShare       float64 `json:"shape_share"`
	ShapeShareAtMost bool    `json:"shape_share_at_most,omitempty"`
	Summary          string  `json:"summary"`
}

type slowWindowDoc struct {
	Window  string        `json:"window"`
	Calls   []slowCallDoc `json:"calls"`
	Differs slowDiffDoc   `json:"differs"`
}

// slowDoc is one version of a model in /api/v1/slow.
type slowDoc struct {
	Model   string          `json:"model"`
	Version string          `json:"version"`
	Windows []slowWindowDoc `json:"windows"`
}

// slowAPI serves GET /api/v1/slow?model=M[&version=V][&window=1m|5m|15m]:
// the model's slowest calls, newest window first, and how they differ
// from all its calls. A missing model or a bad window is a 400 naming the
// parameter; a model (or version) without calls is a 404.
func slowAPI(src slowSource) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		model := q.Get("model")
		if model == "" {
			WriteJSON(w, http.StatusBadRequest, map[string]string{"error": "model: required (GET /api/v1/slow?model=NAME)"})
			return
		}
		var windows []monitor.Window
		if s := q.Get("window"); s != "" {
			win, ok := monitor.ParseWindow(s)
			if !ok {
				WriteJSON(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("window: must be 1m, 5m or 15m, got %q", s)})
				return
			}
			windows = append(windows, win)
		}
		version := q.Get("version")
		reps := src.SlowCalls(model, version, windows...)
		if len(reps) == 0 {
			msg := fmt.Sprintf("model %q has no recorded calls", model)
			if version != "" {
				msg = fmt.Sprintf("model %q version %q has no recorded calls", model, version)
			}
			if known := src.SlowModels(); len(known) > 0 {
				msg += " (models with calls: " + strings.Join(known, ", ") + ")"
			}
			WriteJSON(w, http.StatusNotFound, map[string]string{"error": msg})
			return
		}
		WriteJSON(w, http.StatusOK, slowJSON(reps))
	}
}

func slowJSON(reps []monitor.SlowReport) []slowDoc {
	out := make([]slowDoc, 0, len(reps))
	for _, rep := range reps {
		d := slowDoc{Model: rep.Model, Version: rep.Version}
		for _, sw := range rep.Windows {
			wd := slowWindowDoc{Window: sw.Window.String(), Calls: make([]slowCallDoc, 0, len(sw.Calls))}
			for _, c := range sw.Calls {
				wd.Calls = append(wd.Calls, slowCallDoc{
					At: c.At.UTC(), Latency: c.Total.Seconds(), Upstream: c.Upstream.Seconds(), Queue: c.Queue.Seconds(),
					Method: c.Method, Target: c.UpstreamName, Route: c.Route, Code: c.Code, CodeClass: c.CodeClass,
					SizeClass: c.SizeClass, Attempts: c.Attempts, BatchID: c.BatchID, TraceID: c.TraceID,
					BytesIn: c.BytesIn, BytesOut: c.BytesOut, Rows: c.Rows, Inputs: c.Inputs,
					NumInputs: c.NumInputs, Partial: c.Partial,
				})
			}
			df := sw.Differs
			wd.Differs = slowDiffDoc{
				Calls: df.Calls, SlowCalls: df.SlowCalls, SlowMedianBytes: df.SlowMedianBytes, MedianBytes: df.MedianBytes,
				BytesRatio: df.BytesRatio, SlowMedianRows: df.SlowMedianRows, MedianRows: df.MedianRows,
				RowsRatio: df.RowsRatio, Shape: df.Shape, ShapeSlowShare: df.ShapeSlowShare, ShapeShare: df.ShapeShare,
				ShapeShareAtMost: df.ShapeShareAtMost, Summary: df.Summary,
			}
			d.Windows = append(d.Windows, wd)
		}
		out = append(out, d)
	}
	return out
}
