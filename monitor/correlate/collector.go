package correlate

import (
	"fmt"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	corrDesc = prometheus.NewDesc("infergate_model_gpu_correlation",
		"Pearson correlation between the model's recent p99 latency and its GPU's utilisation, over a rolling window of samples; absent while unknown (no GPU, too few samples).",
		[]string{"model", "window"}, nil)
	queueCorrDesc = prometheus.NewDesc("infergate_model_gpu_queue_correlation",
		"Pearson correlation between the model's recent p99 queue time and its GPU's utilisation; absent while unknown.",
		[]string{"model", "window"}, nil)
	baselineDesc = prometheus.NewDesc("infergate_model_latency_baseline_seconds",
		"The p50 and p99 (label stat) latency a rise is measured against: the seasonal baseline level (recent calm level until an hour of the week has history); NaN until known.",
		[]string{"model", "stat"}, nil)
	hintDesc = prometheus.NewDesc("infergate_model_cause_hint",
		"Always 1, one series per model: its label hint is the model's current cause hint (none, gpu_saturated, gpu_throttled, gpu_memory_pressure, not_gpu, unknown, inputs_grew, input_shape_changed, one_endpoint_slow).",
		[]string{"model", "hint"}, nil)
	modelGPUDesc = prometheus.NewDesc("infergate_model_gpu_info",
		"1 for the GPU a model runs on; from is config, source or only_device.",
		[]string{"model", "gpu_uuid", "from"}, nil)
)

// Register registers the correlator's metrics on reg.
func (c *Correlator) Register(reg prometheus.Registerer) error {
	if err := reg.Register(collector{c}); err != nil {
		return fmt.Errorf("correlate: register collector: %w", err)
	}
	return nil
}

// collector exports the last published states; nothing is computed per
// scrape.
type collector struct{ c *Correlator }

func (col collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{corrDesc, queueCorrDesc, baselineDesc, hintDesc, modelGPUDesc} {
		ch <- d
	}
}

func (col collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	for _, s := range col.c.Models() {
		for w, name := range WindowNames {
			if !math.IsNaN(s.Correlation[w]) {
				gauge(corrDesc, s.Correlation[w], s.Model, name)
			}
			if s.QueueSeen && !math.IsNaN(s.QueueCorrelation[w]) {
				gauge(queueCorrDesc, s.QueueCorrelation[w], s.Model, name)
			}
		}
		for q, d := range map[string]time.Duration{"p50": s.BaselineP50, "p99": s.Baseline} {
			v := nan
			if d > 0 {
				v = d.Seconds()
			}
			gauge(baselineDesc, v, s.Model, q)
		}
		// One series, the hint a label value: a series per hint, all
		// but one 0, cost a scrape eight lines a model for nothing.
		gauge(hintDesc, 1, s.Model, s.Hint)
		if s.GPUUUID != "" {
			gauge(modelGPUDesc, 1, s.Model, s.GPUUUID, s.GPUFrom)
		}
	}
}
