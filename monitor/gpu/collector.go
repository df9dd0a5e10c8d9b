package gpu

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	deviceLabels = []string{"gpu_uuid", "name", "source"}

	utilDesc = prometheus.NewDesc("infergate_gpu_utilization_ratio",
		"Fraction of the last sample period during which a kernel ran on the GPU.", deviceLabels, nil)
	memUtilDesc = prometheus.NewDesc("infergate_gpu_memory_utilization_ratio",
		"Fraction of the last sample period during which the GPU memory controller was busy.", deviceLabels, nil)
	memUsedDesc = prometheus.NewDesc("infergate_gpu_memory_used_bytes",
		"GPU frame-buffer memory in use.", deviceLabels, nil)
	memTotalDesc = prometheus.NewDesc("infergate_gpu_memory_total_bytes",
		"GPU frame-buffer memory in total.", deviceLabels, nil)
	tempDesc = prometheus.NewDesc("infergate_gpu_temperature_celsius",
		"GPU core temperature.", deviceLabels, nil)
	powerDesc = prometheus.NewDesc("infergate_gpu_power_watts",
		"GPU power draw.", deviceLabels, nil)
	powerLimitDesc = prometheus.NewDesc("infergate_gpu_power_limit_watts",
		"GPU enforced power limit.", deviceLabels, nil)
	smClockDesc = prometheus.NewDesc("infergate_gpu_sm_clock_hertz",
		"Current GPU SM clock.", deviceLabels, nil)
	smClockMaxDesc = prometheus.NewDesc("infergate_gpu_sm_clock_max_hertz",
		"Maximum GPU SM clock.", deviceLabels, nil)
	throttledDesc = prometheus.NewDesc("infergate_gpu_throttled",
		"1 while the clock event (throttle) reason is active on the GPU, else 0.",
		append(append([]string{}, deviceLabels...), "reason"), nil)
	sourceUpDesc = prometheus.NewDesc("infergate_gpu_source_up",
		"1 when the GPU source's last sample succeeded, else 0.", []string{"source"}, nil)
	scrapeErrorsDesc = prometheus.NewDesc("infergate_gpu_scrape_errors_total",
		"GPU samples that failed or timed out, per source.", []string{"source"}, nil)
)

// Register registers the hub's metrics on reg: one collector that reads
// State once per scrape.
func (h *Hub) Register(reg prometheus.Registerer) error {
	if err := reg.Register(hubCollector{h}); err != nil {
		return fmt.Errorf("gpu: register collector: %w", err)
	}
	return nil
}

// hubCollector turns a Hub's State into const metrics at scrape time. A
// reading the source did not report is left out rather than exported as 0.
type hubCollector struct{ h *Hub }

func (c hubCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{utilDesc, memUtilDesc, memUsedDesc, memTotalDesc, tempDesc, powerDesc,
		powerLimitDesc, smClockDesc, smClockMaxDesc, throttledDesc, sourceUpDesc, scrapeErrorsDesc} {
		ch <- d
	}
}

func (c hubCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.h.State()
	for _, s := range st.Sources {
		up := 0.0
		if s.Up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(sourceUpDesc, prometheus.GaugeValue, up, s.Name)
		ch <- prometheus.MustNewConstMetric(scrapeErrorsDesc, prometheus.CounterValue, float64(s.Errors), s.Name)
	}
	for _, d := range st.Devices {
		lv := []string{d.UUID, d.Name, d.Source}
		gauge := func(desc *prometheus.Desc, f Field, v float64) {
			if d.Has(f) {
				ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, lv...)
			}
		}
		gauge(utilDesc, FieldUtilization, d.Utilization)
		gauge(memUtilDesc, FieldMemoryUtilization, d.MemoryUtilization)
		gauge(memUsedDesc, FieldMemoryUsed, d.MemoryUsedBytes)
		gauge(memTotalDesc, FieldMemoryTotal, d.MemoryTotalBytes)
		gauge(tempDesc, FieldTemperature, d.TemperatureCelsius)
		gauge(powerDesc, FieldPower, d.PowerWatts)
		gauge(powerLimitDesc, FieldPowerLimit, d.PowerLimitWatts)
		gauge(smClockDesc, FieldSMClock, d.SMClockHz)
		gauge(smClockMaxDesc, FieldSMClockMax, d.SMClockMaxHz)
		if d.Has(FieldClockEventReasons) {
			for _, r := range AllReasons {
				v := 0.0
				if d.ClockEventReasons&uint64(r) != 0 {
					v = 1
				}
				ch <- prometheus.MustNewConstMetric(throttledDesc, prometheus.GaugeValue, v, append(lv, r.String())...)
			}
		}
	}
}
