package gpu

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// maxExpositionBytes bounds one scraped body; DCGM on an 8-GPU node with
// profiling fields is well under a megabyte.
const maxExpositionBytes = 16 << 20

// Scrape is a Source that fetches a Prometheus text exposition (Triton's
// :8002/metrics, DCGM exporter's :9400/metrics, or simserver's admin
// /metrics) and parses it with ParseExposition.
type Scrape struct {
	url    string
	client *http.Client
}

// NewScrape returns a scrape source of url; client nil means a client of
// its own (the sampler's timeout bounds each request through its context).
func NewScrape(url string, client *http.Client) *Scrape {
	if client == nil {
		client = &http.Client{Transport: &http.Transport{MaxIdleConns: 2, DisableCompression: false}}
	}
	return &Scrape{url: url, client: client}
}

// Sample fetches and parses the endpoint once.
func (s *Scrape) Sample(ctx context.Context) (Reading, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return Reading{}, fmt.Errorf("gpu: scrape %s: %w", s.url, err)
	}
	// Ask for the classic text format: the parser reads no other.
	req.Header.Set("Accept", "text/plain;version=0.0.4;q=1,*/*;q=0.1")
	resp, err := s.client.Do(req)
	if err != nil {
		return Reading{}, fmt.Errorf("gpu: scrape %s: %w", s.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return Reading{}, fmt.Errorf("gpu: scrape %s: status %s", s.url, resp.Status)
	}
	r, err := ParseExposition(io.LimitReader(resp.Body, maxExpositionBytes))
	if err != nil {
		return Reading{}, fmt.Errorf("gpu: scrape %s: %w", s.url, err)
	}
	return r, nil
}

// Close releases idle connections.
func (s *Scrape) Close() error {
	s.client.CloseIdleConnections()
	return nil
}

// deviceField sets one reading of a device from one sample value.
type deviceField struct {
	field Field
	set   func(d *Device, v float64)
}

const mib = 1 << 20

// tritonFields are Triton's GPU gauges (label gpu_uuid).
var tritonFields = map[string]deviceField{
	"nv_gpu_utilization":        {FieldUtilization, func(d *Device, v float64) { d.Utilization = v }},
	"nv_gpu_memory_used_bytes":  {FieldMemoryUsed, func(d *Device, v float64) { d.MemoryUsedBytes = v }},
	"nv_gpu_memory_total_bytes": {FieldMemoryTotal, func(d *Device, v float64) { d.MemoryTotalBytes = v }},
	"nv_gpu_power_usage":        {FieldPower, func(d *Device, v float64) { d.PowerWatts = v }},
	"nv_gpu_power_limit":        {FieldPowerLimit, func(d *Device, v float64) { d.PowerLimitWatts = v }},
	"nv_energy_consumption":     {FieldEnergy, func(d *Device, v float64) { d.EnergyJoules = v }},
}

// dcgmFields are DCGM exporter's fields (label UUID). FB_FREE is handled
// apart: total = used + free.
var dcgmFields = map[string]deviceField{
	"DCGM_FI_DEV_GPU_UTIL":                 {FieldUtilization, func(d *Device, v float64) { d.Utilization = v / 100 }},
	"DCGM_FI_PROF_GR_ENGINE_ACTIVE":        {FieldUtilization, func(d *Device, v float64) { d.Utilization = v }},
	"DCGM_FI_DEV_MEM_COPY_UTIL":            {FieldMemoryUtilization, func(d *Device, v float64) { d.MemoryUtilization = v / 100 }},
	"DCGM_FI_DEV_FB_USED":                  {FieldMemoryUsed, func(d *Device, v float64) { d.MemoryUsedBytes = v * mib }},
	"DCGM_FI_DEV_FB_TOTAL":                 {FieldMemoryTotal, func(d *Device, v float64) { d.MemoryTotalBytes = v * mib }},
	"DCGM_FI_DEV_GPU_TEMP":                 {FieldTemperature, func(d *Device, v float64) { d.TemperatureCelsius = v }},
	"DCGM_FI_DEV_POWER_USAGE":              {FieldPower, func(d *Device, v float64) { d.PowerWatts = v }},
	"DCGM_FI_DEV_POWER_MGMT_LIMIT":         {FieldPowerLimit, func(d *Device, v float64) { d.PowerLimitWatts = v }},
	"DCGM_FI_DEV_ENFORCED_POWER_LIMIT":     {FieldPowerLimit, func(d *Device, v float64) { d.PowerLimitWatts = v }},
	"DCGM_FI_DEV_SM_CLOCK":                 {FieldSMClock, func(d *Device, v float64) { d.SMClockHz = v * 1e6 }},
	"DCGM_FI_DEV_MAX_SM_CLOCK":             {FieldSMClockMax, func(d *Device, v float64) { d.SMClockMaxHz = v * 1e6 }},
	"DCGM_FI_DEV_CLOCKS_EVENT_REASONS":     {FieldClockEventReasons, func(d *Device, v float64) { d.ClockEventReasons = uint64(v) }},
	"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": {FieldEnergy, func(d *Device, v float64) { d.EnergyJoules = v / 1000 }},
	"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS":   {FieldClockEventReasons, func(d *Device, v float64) { d.ClockEventReasons = uint64(v) }},
	"DCGM_FI_DEV_FB_FREE":                  {0, nil}, // see ParseExposition
}

// ParseExposition reads a Prometheus text exposition into a Reading. It
// understands Triton's nv_gpu_* gauges keyed by gpu_uuid and DCGM
// exporter's DCGM_FI_* fields keyed by UUID (modelName gives the device
// name); when both name the same UUID, Triton's value wins for a reading
// both report. Per-model nv_inference_* series with model and gpu_uuid
// labels fill Reading.Models; a model on several GPUs maps to the one with
// the most inferences (nv_inference_count). Other metrics are ignored.
func ParseExposition(r io.Reader) (Reading, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return Reading{}, fmt.Errorf("parse exposition: %w", err)
	}
	devs := map[string]*Device{}
	get := func(uuid string) *Device {
		d := devs[uuid]
		if d == nil {
			d = &Device{UUID: uuid}
			devs[uuid] = d
		}
		return d
	}
	apply := func(fields map[string]deviceField, uuidLabel string) {
		for _, name := range sortedKeys(fields) {
			f := fields[name]
			if f.set == nil {
				continue
			}
			for _, m := range fams[name].GetMetric() {
				uuid := label(m, uuidLabel)
				v, ok := value(m)
				if uuid == "" || !ok {
					continue
				}
				d := get(uuid)
				if d.Has(f.field) {
					continue
				}
				f.set(d, v)
				d.Known |= f.field
			}
		}
	}
	apply(tritonFields, "gpu_uuid")
	apply(dcgmFields, "UUID")
	for name := range dcgmFields {
		for _, m := range fams[name].GetMetric() {
			if uuid := label(m, "UUID"); uuid != "" {
				if n := label(m, "modelName"); n != "" && get(uuid).Name == "" {
					get(uuid).Name = n
				}
			}
		}
	}
	// DCGM reports free, not total, frame buffer by default.
	for _, m := range fams["DCGM_FI_DEV_FB_FREE"].GetMetric() {
		uuid := label(m, "UUID")
		v, ok := value(m)
		if uuid == "" || !ok {
			continue
		}
		d := get(uuid)
		if !d.Has(FieldMemoryTotal) && d.Has(FieldMemoryUsed) {
			d.MemoryTotalBytes = d.MemoryUsedBytes + v*mib
			d.Known |= FieldMemoryTotal
		}
	}

	out := Reading{Models: modelMap(fams), Compute: modelCompute(fams)}
	for _, uuid := range sortedKeys(devs) {
		out.Devices = append(out.Devices, *devs[uuid])
	}
	return out, nil
}

// modelCompute reads each model's cumulative compute time per GPU from
// Triton's nv_inference_compute_infer_duration_us (microseconds).
func modelCompute(fams map[string]*dto.MetricFamily) map[ModelOnGPU]float64 {
	var out map[ModelOnGPU]float64
	for _, m := range fams["nv_inference_compute_infer_duration_us"].GetMetric() {
		mdl, uuid := label(m, "model"), label(m, "gpu_uuid")
		v, ok := value(m)
		if mdl == "" || uuid == "" || !ok {
			continue
		}
		if out == nil {
			out = map[ModelOnGPU]float64{}
		}
		out[ModelOnGPU{mdl, uuid}] += v / 1e6
	}
	return out
}

// modelMap reads the model → GPU map from Triton's per-model metrics.
func modelMap(fams map[string]*dto.MetricFamily) map[string]string {
	count := map[string]map[string]float64{}
	for name, fam := range fams {
		if !strings.HasPrefix(name, "nv_inference_") {
			continue
		}
		for _, m := range fam.GetMetric() {
			mdl, uuid := label(m, "model"), label(m, "gpu_uuid")
			if mdl == "" || uuid == "" {
				continue
			}
			if count[mdl] == nil {
				count[mdl] = map[string]float64{}
			}
			c := count[mdl][uuid]
			if v, ok := value(m); ok && name == "nv_inference_count" {
				c += v
			}
			count[mdl][uuid] = c
		}
	}
	if len(count) == 0 {
		return nil
	}
	out := make(map[string]string, len(count))
	for mdl, byGPU := range count {
		best, bestN := "", -1.0
		for _, uuid := range sortedKeys(byGPU) {
			if byGPU[uuid] > bestN {
				best, bestN = uuid, byGPU[uuid]
			}
		}
		out[mdl] = best
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

// value returns a gauge's, counter's or untyped sample's value; NaN and
// other types are not readings.
func value(m *dto.Metric) (float64, bool) {
	var v float64
	switch {
	case m.Gauge != nil:
		v = m.GetGauge().GetValue()
	case m.Counter != nil:
		v = m.GetCounter().GetValue()
	case m.Untyped != nil:
		v = m.GetUntyped().GetValue()
	default:
		return 0, false
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
