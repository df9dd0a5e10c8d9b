package admin

import (
	"math"
	"sort"
	"time"

	"github.com/infergate/infergate/alert"
	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/baseline"
	"github.com/infergate/infergate/monitor/business"
	"github.com/infergate/infergate/monitor/correlate"
	"github.com/infergate/infergate/monitor/gpu"
)

// gpuDoc is one GPU in /api/v1/gpus and /api/v1/models. Readings the
// source does not report are left out.
type gpuDoc struct {
	UUID               string   `json:"gpu_uuid"`
	Name               string   `json:"name,omitempty"`
	Source             string   `json:"source"`
	Utilization        *float64 `json:"utilization,omitempty"`
	MemoryUtilization  *float64 `json:"memory_utilization,omitempty"`
	MemoryUsedBytes    *float64 `json:"memory_used_bytes,omitempty"`
	MemoryTotalBytes   *float64 `json:"memory_total_bytes,omitempty"`
	TemperatureCelsius *float64 `json:"temperature_celsius,omitempty"`
	PowerWatts         *float64 `json:"power_watts,omitempty"`
	PowerLimitWatts    *float64 `json:"power_limit_watts,omitempty"`
	SMClockHz          *float64 `json:"sm_clock_hertz,omitempty"`
	SMClockMaxHz       *float64 `json:"sm_clock_max_hertz,omitempty"`
	// ClockEventReasons are the active clock event reasons by name.
	ClockEventReasons []string `json:"clock_event_reasons,omitempty"`
	// Throttled is true under a power, thermal or hardware slowdown with
	// the SM clock below its maximum.
	Throttled bool `json:"throttled"`
}

func newGPUDoc(d gpu.Device) *gpuDoc {
	opt := func(f gpu.Field, v float64) *float64 {
		if !d.Has(f) {
			return nil
		}
		return &v
	}
	return &gpuDoc{
		UUID: d.UUID, Name: d.Name, Source: d.Source,
		Utilization:        opt(gpu.FieldUtilization, d.Utilization),
		MemoryUtilization:  opt(gpu.FieldMemoryUtilization, d.MemoryUtilization),
		MemoryUsedBytes:    opt(gpu.FieldMemoryUsed, d.MemoryUsedBytes),
		MemoryTotalBytes:   opt(gpu.FieldMemoryTotal, d.MemoryTotalBytes),
		TemperatureCelsius: opt(gpu.FieldTemperature, d.TemperatureCelsius),
		PowerWatts:         opt(gpu.FieldPower, d.PowerWatts),
		PowerLimitWatts:    opt(gpu.FieldPowerLimit, d.PowerLimitWatts),
		SMClockHz:          opt(gpu.FieldSMClock, d.SMClockHz),
		SMClockMaxHz:       opt(gpu.FieldSMClockMax, d.SMClockMaxHz),
		ClockEventReasons:  d.ActiveReasons(),
		Throttled:          d.Throttled(),
	}
}

// sourceDoc is one GPU source in /api/v1/gpus.
type sourceDoc struct {
	Name      string `json:"source"`
	Up        bool   `json:"up"`
	Errors    uint64 `json:"errors"`
	LastError string `json:"last_error,omitempty"`
}

// gpusDoc is the body of /api/v1/gpus.
type gpusDoc struct {
	Sources []sourceDoc `json:"sources"`
	GPUs    []*gpuDoc   `json:"gpus"`
	// Models maps model to GPU UUID (configured, then reported).
	Models map[string]string `json:"models"`
}

func gpusJSON(st gpu.State) any {
	doc := gpusDoc{Sources: []sourceDoc{}, GPUs: []*gpuDoc{}, Models: st.Models}
	for _, s := range st.Sources {
		doc.Sources = append(doc.Sources, sourceDoc{Name: s.Name, Up: s.Up, Errors: s.Errors, LastError: s.LastError})
	}
	for _, d := range st.Devices {
		doc.GPUs = append(doc.GPUs, newGPUDoc(d))
	}
	return doc
}

// modelDoc is one model in /api/v1/models: its recent latency, its GPU and
// the cause hint, as the correlator saw them at its last sample.
type modelDoc struct {
	Model string `json:"model"`
	// BusinessMetrics is the model's p99 set against each business
	// metric with enough samples (business_metrics:); absent otherwise.
	BusinessMetrics []businessDoc `json:"business_metrics,omitempty"`
	// Calls, P50 and P99 cover the model's successful inference calls of
	// the last LatencyWindowSeconds.
	Calls                uint64   `json:"calls"`
	LatencyWindowSeconds float64  `json:"latency_window_seconds"`
	P50                  float64  `json:"p50_seconds"`
	P99                  float64  `json:"p99_seconds"`
	QueueP99             *float64 `json:"queue_p99_seconds,omitempty"`
	// BaselineP99 and BaselineP50 are the baseline levels; null until
	// known; BaselineSource is learning, recent or seasonal. LatencyUp: the
	// recent calls are, with confidence, above the baseline band or over
	// the SLO (UpReason "baseline" or "slo"); TooFewCalls: they could not
	// tell.
	BaselineP99    *float64 `json:"baseline_p99_seconds"`
	BaselineP50    *float64 `json:"baseline_p50_seconds"`
	BaselineSource string   `json:"baseline_source"`
	// Recurring are the model's recurring rises (monitor/baseline):
	// "every day at 10:00 for about 4 minutes, 3 days running: a
	// scheduled job?"; a rise inside one alerts as a warning.
	Recurring   []baseline.Pattern `json:"recurring,omitempty"`
	LatencyUp   bool               `json:"latency_up"`
	UpReason    string             `json:"up_reason,omitempty"`
	TooFewCalls bool               `json:"too_few_calls"`
	// GPUUUID is the GPU the model runs on (null when unknown) and GPUFrom
	// where that came from: config, source or only_device.
	GPUUUID        *string  `json:"gpu_uuid"`
	GPUFrom        string   `json:"gpu_from,omitempty"`
	GPUUtilization *float64 `json:"gpu_utilization"`
	// Correlation is Pearson's r between p99 and GPU utilisation over the
	// 1m window (null when it cannot be computed); CorrelationWindows has
	// 1m and 5m, QueueCorrelation the same for queue time.
	Correlation        *float64            `json:"correlation"`
	CorrelationWindows map[string]*float64 `json:"correlation_windows"`
	QueueCorrelation   map[string]*float64 `json:"queue_correlation,omitempty"`
	GPU                *gpuDoc             `json:"gpu"`
	CauseHint          string              `json:"cause_hint"`
	// SlowEndpoint is the replica of the model's pool much slower than
	// the others for it, when one is.
	SlowEndpoint *correlate.SlowEndpoint `json:"slow_endpoint,omitempty"`
	// Inputs is what the recent calls carried against the model's usual
	// inputs (request bytes and rows p90, tops of power-of-two buckets);
	// absent until the correlator has learned them.
	Inputs *inputsDoc `json:"inputs,omitempty"`
	// Versions compares the model's versions when two or more took
	// calls in the window (versions.go); absent otherwise.
	Versions *versionsDoc `json:"versions,omitempty"`
	// Anomaly is the model's anomaly score of its last second, its
	// explanation and whether its detector still learns; absent without
	// an alert engine or before the model's first scored second.
	Anomaly *anomalyDoc `json:"anomaly,omitempty"`
}

// anomalyDoc is a model's anomaly score in /api/v1/models.
type anomalyDoc struct {
	Score       float64                `json:"score"`
	Learning    bool                   `json:"learning"`
	Explanation string                 `json:"explanation,omitempty"`
	Pattern     string                 `json:"pattern,omitempty"`
	Top         []alert.AnomalyFeature `json:"top,omitempty"`
	At          time.Time              `json:"at"`
}

// addAnomalies adds each model's anomaly score to its document.
func addAnomalies(docs []modelDoc, views []alert.AnomalyView) {
	byModel := make(map[string]*alert.AnomalyView, len(views))
	for i := range views {
		byModel[views[i].Model] = &views[i]
	}
	for i := range docs {
		if v := byModel[docs[i].Model]; v != nil {
			docs[i].Anomaly = &anomalyDoc{Score: v.Score, Learning: v.Learning, Explanation: v.Explanation,
				Pattern: v.Pattern, Top: v.Top, At: v.At}
		}
	}
}

// inputsDoc is a model's inputs in /api/v1/models.
type inputsDoc struct {
	Calls                   uint64 `json:"calls"`
	RequestBytesP90         int64  `json:"request_bytes_p90"`
	BaselineRequestBytesP90 int64  `json:"baseline_request_bytes_p90"`
	RowsP90                 int64  `json:"rows_p90,omitempty"`
	BaselineRowsP90         int64  `json:"baseline_rows_p90,omitempty"`
	// Moved is inputs_grew or input_shape_changed when the inputs moved
	// with confidence, whether latency is up or not.
	Moved string `json:"moved,omitempty"`
}

// num turns NaN into null.
func num(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// modelsJSON is /api/v1/models: each model's recent latency from the
// monitor (views), and what the correlator adds to it (states: the
// baseline and whether latency is up, the GPU, the correlations, the
// inputs and the cause hint). A model the correlator still tracks after
// its calls stopped is shown with no calls.
func modelsJSON(views []monitor.ModelView, states []correlate.ModelState, versions map[string]*versionsDoc, bs *baseline.Store) []modelDoc {
	byModel := make(map[string]*modelDoc, len(views)+len(states))
	doc := func(model string) *modelDoc {
		d := byModel[model]
		if d == nil {
			d = &modelDoc{Model: model, CauseHint: correlate.HintNone, CorrelationWindows: map[string]*float64{}, Versions: versions[model]}
			for _, name := range correlate.WindowNames {
				d.CorrelationWindows[name] = nil
			}
			byModel[model] = d
		}
		return d
	}
	for _, v := range views {
		d := doc(v.Model)
		d.Calls, d.LatencyWindowSeconds = v.Calls, v.Window.Seconds()
		d.P50, d.P99 = v.P50.Seconds(), v.P99.Seconds()
		if v.QueueSeen {
			d.QueueP99 = num(v.QueueP99.Seconds())
		}
	}
	for _, s := range states {
		d := doc(s.Model)
		if d.LatencyWindowSeconds == 0 {
			d.LatencyWindowSeconds = s.LatencyWindow.Seconds()
		}
		d.LatencyUp, d.BaselineSource, d.UpReason, d.TooFewCalls = s.LatencyUp, s.BaselineSource, s.UpReason, s.TooFewCalls
		d.GPUFrom, d.CauseHint, d.SlowEndpoint = s.GPUFrom, s.Hint, s.SlowEndpoint
		d.Correlation = num(s.Correlation[correlate.Window1m])
		if in := s.Inputs; in.Known {
			d.Inputs = &inputsDoc{Calls: in.Bytes.Calls, RequestBytesP90: in.Bytes.P90, BaselineRequestBytesP90: in.Bytes.BaselineP90,
				RowsP90: in.Rows.P90, BaselineRowsP90: in.Rows.BaselineP90, Moved: in.Moved()}
		}
		if s.QueueSeen {
			d.QueueCorrelation = map[string]*float64{}
		}
		for w, name := range correlate.WindowNames {
			d.CorrelationWindows[name] = num(s.Correlation[w])
			if s.QueueSeen {
				d.QueueCorrelation[name] = num(s.QueueCorrelation[w])
			}
		}
		if bs != nil {
			d.Recurring = bs.Patterns(s.Model)
		}
		if s.Baseline > 0 {
			d.BaselineP99 = num(s.Baseline.Seconds())
		}
		if s.BaselineP50 > 0 {
			d.BaselineP50 = num(s.BaselineP50.Seconds())
		}
		if s.GPUUUID != "" {
			u := s.GPUUUID
			d.GPUUUID = &u
		}
		if s.GPU != nil {
			d.GPU = newGPUDoc(*s.GPU)
			d.GPUUtilization = d.GPU.Utilization
		}
	}
	out := make([]modelDoc, 0, len(byModel))
	for _, d := range byModel {
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out
}

// modelsJSON reads the monitor's per-model view over the correlator's
// window, grouped as the correlator groups a model's inference calls, and
// adds the correlator's states to it.
func (a *Server) modelsJSON() any {
	var views []monitor.ModelView
	var versions map[string]*versionsDoc
	if a.Monitor != nil {
		views = a.Monitor.Models(a.Correlator.RecentSlices(), a.Correlator.InferenceModel)
		versions = compareVersions(a.Monitor, a.Correlator.InferenceModel)
	}
	docs := modelsJSON(views, a.Correlator.Models(), versions, a.Correlator.Baselines())
	if a.Alerts != nil {
		addAnomalies(docs, a.Alerts.Anomalies())
	}
	if a.Business != nil {
		addBusiness(docs, a.Business.Estimates())
	}
	return docs
}

// businessDoc is one business metric against a model's p99: Pearson's r
// at the lag (seconds, positive when the metric follows latency) where
// it is strongest, over Samples reads.
type businessDoc struct {
	Name        string  `json:"name"`
	Correlation float64 `json:"correlation"`
	LagSeconds  float64 `json:"lag_seconds"`
	Samples     int     `json:"samples"`
}

// addBusiness adds the estimates to the models shown; a model with
// estimates but no recent calls is left out, as /api/v1/models shows
// the models with calls.
func addBusiness(docs []modelDoc, est map[string][]business.ModelEstimate) {
	for i := range docs {
		for _, e := range est[docs[i].Model] {
			docs[i].BusinessMetrics = append(docs[i].BusinessMetrics,
				businessDoc{Name: e.Metric, Correlation: e.Correlation, LagSeconds: e.LagSeconds, Samples: e.Samples})
		}
	}
}
