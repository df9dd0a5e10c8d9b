package sim

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Triton's metric names and help texts. They keep Triton's spelling
// (counters without _total, microsecond units) so dashboards and GPU
// sources written for Triton read simserver unchanged.
var (
	// Per-model metrics carry the GPU the model ran on, as Triton's do;
	// infergate's GPU source reads the model-to-GPU map from it. The
	// pending count is per model only, as in Triton.
	modelLabels   = []string{"model", "version", "gpu_uuid"}
	pendingLabels = []string{"model", "version"}
	failureLabels = []string{"model", "version", "gpu_uuid", "reason"}
	gpuLabels     = []string{"gpu_uuid"}
	// dcgmLabels are DCGM exporter's device labels.
	dcgmLabels = []string{"gpu", "UUID", "device", "modelName"}

	descSuccess   = prometheus.NewDesc("nv_inference_request_success", "Number of successful inference requests, all batch sizes", modelLabels, nil)
	descFailure   = prometheus.NewDesc("nv_inference_request_failure", "Number of failed inference requests, all batch sizes", failureLabels, nil)
	descCount     = prometheus.NewDesc("nv_inference_count", "Number of inferences performed (does not include cached requests)", modelLabels, nil)
	descExecCount = prometheus.NewDesc("nv_inference_exec_count", "Number of model executions performed (does not include cached requests)", modelLabels, nil)
	descPending   = prometheus.NewDesc("nv_inference_pending_request_count", "Instantaneous number of pending requests awaiting execution per-model.", pendingLabels, nil)
	descRequestUS = prometheus.NewDesc("nv_inference_request_duration_us", "Cumulative inference request duration in microseconds (includes cached requests)", modelLabels, nil)
	descQueueUS   = prometheus.NewDesc("nv_inference_queue_duration_us", "Cumulative inference queuing duration in microseconds (includes cached requests)", modelLabels, nil)
	descComputeUS = prometheus.NewDesc("nv_inference_compute_infer_duration_us", "Cumulative compute inference duration in microseconds (does not include cached requests)", modelLabels, nil)
	descPriority  = prometheus.NewDesc("simserver_requests_by_priority_total", "Inference requests by their priority parameter (\"0\": none; \"9+\": 9 or more).", []string{"model", "priority"}, nil)
	descCancelled = prometheus.NewDesc("simserver_cancelled_total", "Requests that ended because the client cancelled or its deadline passed while hung, queued, executing or delayed.", []string{"model"}, nil)

	// The ground truth of cost attribution (not Triton's: Triton does not
	// know it either).
	descModelBusy   = prometheus.NewDesc("simserver_model_gpu_busy_seconds_total", "The model's share of the simulated GPU's busy time: every instant split among the executions running then; up to the last GPU sample.", []string{"model"}, nil)
	descModelEnergy = prometheus.NewDesc("simserver_model_gpu_energy_joules_total", "The model's share of the simulated GPU's energy: each sample period's split by the models' busy time in it.", []string{"model"}, nil)

	descGPUUtil     = prometheus.NewDesc("nv_gpu_utilization", "GPU utilization rate [0.0 - 1.0)", gpuLabels, nil)
	descGPUMemTotal = prometheus.NewDesc("nv_gpu_memory_total_bytes", "GPU total memory, in bytes", gpuLabels, nil)
	descGPUMemUsed  = prometheus.NewDesc("nv_gpu_memory_used_bytes", "GPU used memory, in bytes", gpuLabels, nil)
	descGPUPower    = prometheus.NewDesc("nv_gpu_power_usage", "GPU power usage in watts", gpuLabels, nil)
	descGPULimit    = prometheus.NewDesc("nv_gpu_power_limit", "GPU power management limit in watts", gpuLabels, nil)
	descGPUEnergy   = prometheus.NewDesc("nv_energy_consumption", "GPU energy consumption in joules since the Triton Server started", gpuLabels, nil)

	// Triton exports no temperature, clocks or throttle reasons; a real
	// deployment runs DCGM exporter beside it, so simserver exports those
	// under DCGM's field names on the same endpoint.
	descDCGMTemp    = prometheus.NewDesc("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", dcgmLabels, nil)
	descDCGMSMClock = prometheus.NewDesc("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", dcgmLabels, nil)
	descDCGMSMMax   = prometheus.NewDesc("DCGM_FI_DEV_MAX_SM_CLOCK", "Maximum SM clock frequency (in MHz).", dcgmLabels, nil)
	descDCGMReasons = prometheus.NewDesc("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "Current clock event reasons (bitmask of NVML nvmlClocksEventReason*).", dcgmLabels, nil)
)

// collector turns the server's atomics and last GPU sample into const
// metrics at scrape time; nothing is computed on the request path.
type collector struct{ s *Server }

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descSuccess, descFailure, descCount, descExecCount, descPending,
		descRequestUS, descQueueUS, descComputeUS, descCancelled, descPriority, descModelBusy, descModelEnergy,
		descGPUUtil, descGPUMemTotal, descGPUMemUsed, descGPUPower, descGPULimit, descGPUEnergy,
		descDCGMTemp, descDCGMSMClock, descDCGMSMMax, descDCGMReasons} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, m := range c.s.order {
		st := &m.stats
		name := m.cfg.Name
		counter(descSuccess, float64(st.success.count.Load()), name, "1", GPUUUID)
		for i, reason := range failureReasons {
			counter(descFailure, float64(st.failures[i].Load()), name, "1", GPUUUID, reason)
		}
		counter(descCount, float64(st.inferenceCount.Load()), name, "1", GPUUUID)
		counter(descExecCount, float64(st.execCount.Load()), name, "1", GPUUUID)
		gauge(descPending, float64(st.pending.Load()), name, "1")
		counter(descRequestUS, float64(st.success.ns.Load()/1000), name, "1", GPUUUID)
		counter(descQueueUS, float64(st.queue.ns.Load()/1000), name, "1", GPUUUID)
		counter(descComputeUS, float64(st.computeInfer.ns.Load()/1000), name, "1", GPUUUID)
		counter(descCancelled, float64(st.cancelled.Load()), name)
		for p := range st.byPriority {
			if v := st.byPriority[p].Load(); v > 0 {
				label := strconv.Itoa(p)
				if p > maxPriorityCounted {
					label = strconv.Itoa(p) + "+"
				}
				counter(descPriority, float64(v), name, label)
			}
		}
	}
	for name, u := range c.s.gpu.modelUse() {
		counter(descModelBusy, u.BusySeconds, name)
		counter(descModelEnergy, u.EnergyJoules, name)
	}
	g := c.s.gpu.snapshot()
	gauge(descGPUUtil, g.Utilization, GPUUUID)
	gauge(descGPUMemTotal, GPUMemoryTotalBytes, GPUUUID)
	gauge(descGPUMemUsed, float64(g.MemoryUsedBytes), GPUUUID)
	gauge(descGPUPower, g.PowerWatts, GPUUUID)
	gauge(descGPULimit, GPUPowerLimitWatts, GPUUUID)
	counter(descGPUEnergy, g.EnergyJoules, GPUUUID)
	dcgm := []string{"0", GPUUUID, "nvidia0", GPUName}
	gauge(descDCGMTemp, g.TemperatureCelsius, dcgm...)
	gauge(descDCGMSMClock, g.SMClockMHz, dcgm...)
	gauge(descDCGMSMMax, GPUMaxSMClockMHz, dcgm...)
	gauge(descDCGMReasons, float64(g.ClockEventReasons), dcgm...)
}
