package correlate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/gpu"
)

// How a GPU's busy time and energy were split among its models
// (CostModel.Method, CostGPU.Method).
const (
	// MethodCompute: by the server's per-model compute time (Triton's
	// nv_inference_compute_infer_duration_us).
	MethodCompute = "compute_time"
	// MethodUpstream: by the upstream time of the proxy's calls of each
	// model, when the server exports no compute time.
	MethodUpstream = "upstream_time"
)

// CostWindow is how many readings of a GPU are split together. A model's
// compute time shows the moment its call ends, the GPU's busy time and
// energy only at the device's next sample: split reading by reading, a
// call's time is paired with the wrong period's energy, and the error
// only averages out over many periods. Split over ten, it is at most one
// period in ten (and much less, as neighbours' errors cancel).
const CostWindow = 10

// DefaultMaxCostModels bounds the models the attributor keeps: the
// registry's series cap already bounds the models the proxy sees, this
// bounds the ones only a GPU source reports.
const DefaultMaxCostModels = 10000

// Prices turn GPU time and energy into money; the zero value prices
// nothing.
type Prices struct {
	// GPUHour is the price of an hour of a GPU, by product name (the
	// source's device name).
	GPUHour map[string]float64
	// KWh is the price of a kilowatt-hour.
	KWh float64
	// Currency names the unit of both ("USD").
	Currency string
}

func (p Prices) priced() bool { return len(p.GPUHour) > 0 || p.KWh > 0 }

// CallSums gives per-group calls and upstream time of the last slices and
// tells when a slice completes; *monitor.Registry is one.
type CallSums interface {
	RecentSums(n int, group func(monitor.SeriesKey) string) map[string]monitor.CallSums
	Rotations() <-chan time.Time
}

// CostOptions configures an Attributor.
type CostOptions struct {
	// Calls counts each model's calls and upstream time; required.
	Calls CallSums
	// Group keys a series by model ("" to leave it out); the correlator's
	// InferenceModel in infergate.
	Group func(monitor.SeriesKey) string
	// GPU returns the GPU state; nil means no GPU source.
	GPU func() gpu.State
	// Interval is the GPU sampling period; readings are taken at half of
	// it so that none is missed. 0 means DefaultInterval.
	Interval time.Duration
	Prices   Prices
	// MaxModels bounds the models kept; 0 means DefaultMaxCostModels.
	MaxModels int
	// Warn is told once of each GPU name without a price; nil: silent.
	Warn func(msg string)
}

// costModel is one model's running totals, a few words (a thousand
// models must stay cheap).
type costModel struct {
	calls      uint64
	upstream   float64 // seconds of upstream time since its GPU's last step
	gpuSeconds float64
	joules     float64
	uuid       string
	method     string
}

// costDevice is one GPU's last step and totals.
type costDevice struct {
	at          time.Time
	energy      float64
	hasEnergy   bool
	compute     map[string]float64 // model → cumulative compute seconds
	name        string
	method      string
	gpuSeconds  float64
	joules      float64
	unattrBusy  float64
	unattrJoule float64
	gaps        uint64
	// The window not yet split: readings, busy seconds, joules and the
	// models' compute time in it.
	pendSteps  int
	pendBusy   float64
	pendJoules float64
	pendShares map[string]float64
}

// Attributor splits each GPU's busy time (utilisation × time) and energy
// (the energy counter's difference, or power × time) among the models on
// it, by their share of its busy time, off the call path: it reads the
// GPU state and the registry's slice sums, never a call.
type Attributor struct {
	opts    CostOptions
	mu      sync.Mutex
	models  map[string]*costModel
	devices map[string]*costDevice
	lastAt  map[string]time.Time // source → last reading taken
	warned  map[string]bool
	dropped uint64
}

// NewAttributor returns an attributor; Run starts it.
func NewAttributor(o CostOptions) *Attributor {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.MaxModels <= 0 {
		o.MaxModels = DefaultMaxCostModels
	}
	return &Attributor{opts: o, models: map[string]*costModel{}, devices: map[string]*costDevice{},
		lastAt: map[string]time.Time{}, warned: map[string]bool{}}
}

// Run counts calls at every registry rotation and steps the GPUs at every
// new reading until ctx ends.
func (a *Attributor) Run(ctx context.Context) {
	if a.opts.GPU == nil {
		// Nothing to attribute: no work at all, Report says why.
		return
	}
	rot := a.opts.Calls.Rotations()
	t := time.NewTicker(a.opts.Interval / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-rot:
			a.countCalls()
		case <-t.C:
			a.step(a.opts.GPU())
		}
	}
}

// model returns the model's totals, nil past the bound. Called with mu.
func (a *Attributor) model(name string) *costModel {
	m := a.models[name]
	if m == nil {
		if len(a.models) >= a.opts.MaxModels {
			a.dropped++
			return nil
		}
		m = &costModel{}
		a.models[name] = m
	}
	return m
}

// countCalls adds the last completed slice's calls and upstream time.
func (a *Attributor) countCalls() {
	sums := a.opts.Calls.RecentSums(1, a.opts.Group)
	a.mu.Lock()
	defer a.mu.Unlock()
	for name, s := range sums {
		if m := a.model(name); m != nil {
			m.calls += s.Calls
			m.upstream += s.Upstream.Seconds()
		}
	}
}

// step attributes what every device did since its previous reading.
// A device whose previous reading is older than three intervals (its
// source was down, or it left the reading) starts again from this one:
// the time between is a gap, not a guess.
func (a *Attributor) step(st gpu.State) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, src := range st.Sources {
		r := src.Reading
		if !src.Up || r == nil || r.At.Equal(a.lastAt[src.Name]) {
			continue
		}
		a.lastAt[src.Name] = r.At
		for _, d := range r.Devices {
			// A GPU two sources read is stepped by the one the hub
			// shows, not twice.
			if shown, ok := st.Device(d.UUID); ok && shown.Source != "" && shown.Source != src.Name {
				continue
			}
			a.stepDevice(st, r, d)
		}
	}
}

func (a *Attributor) stepDevice(st gpu.State, r *gpu.Reading, d gpu.Device) {
	dev := a.devices[d.UUID]
	if dev == nil {
		dev = &costDevice{}
		a.devices[d.UUID] = dev
	}
	// Logged once per GPU name, when first read, not at the first look
	// at /api/v1/cost.
	if _, ok := a.opts.Prices.GPUHour[d.Name]; !ok && len(a.opts.Prices.GPUHour) > 0 && !a.warned[d.Name] {
		a.warned[d.Name] = true
		if a.opts.Warn != nil {
			a.opts.Warn(unpriced(d.Name, d.UUID))
		}
	}
	prevAt, prevEnergy, prevHas, prevCompute := dev.at, dev.energy, dev.hasEnergy, dev.compute
	dev.at, dev.energy, dev.hasEnergy, dev.name = r.At, d.EnergyJoules, d.Has(gpu.FieldEnergy), d.Name
	dev.compute = map[string]float64{}
	for k, v := range r.Compute {
		if k.UUID == d.UUID {
			dev.compute[k.Model] = v
		}
	}
	dt := r.At.Sub(prevAt).Seconds()
	if prevAt.IsZero() || dt <= 0 || dt > 3*a.opts.Interval.Seconds() {
		if !prevAt.IsZero() {
			dev.gaps++
		}
		a.flush(st, d.UUID, dev)
		return
	}
	if d.Has(gpu.FieldUtilization) {
		dev.pendBusy += d.Utilization * dt
	}
	switch {
	case dev.hasEnergy && prevHas && d.EnergyJoules >= prevEnergy:
		dev.pendJoules += d.EnergyJoules - prevEnergy
	case d.Has(gpu.FieldPower):
		dev.pendJoules += d.PowerWatts * dt
	}
	dev.method = MethodUpstream
	if len(dev.compute) > 0 {
		dev.method = MethodCompute
	}
	for m, v := range dev.compute {
		if p, ok := prevCompute[m]; ok && v > p {
			if dev.pendShares == nil {
				dev.pendShares = map[string]float64{}
			}
			dev.pendShares[m] += v - p
		}
	}
	if dev.pendSteps++; dev.pendSteps >= CostWindow {
		a.flush(st, d.UUID, dev)
	}
}

// flush splits the device's pending window among its models by their
// share of its busy time: the compute time's differences where the
// server exports them, otherwise the proxy's upstream time of the models
// on the GPU since the last flush. Called with mu held.
func (a *Attributor) flush(st gpu.State, uuid string, dev *costDevice) {
	shares, total := dev.pendShares, 0.0
	if dev.method == MethodUpstream {
		shares = map[string]float64{}
		for name, m := range a.models {
			if u, _ := st.ModelGPU(name); u == uuid && m.upstream > 0 {
				shares[name] = m.upstream
			}
		}
	}
	for _, v := range shares {
		total += v
	}
	a.resetUpstream(st, uuid)
	busy, joules := dev.pendBusy, dev.pendJoules
	dev.pendSteps, dev.pendBusy, dev.pendJoules, dev.pendShares = 0, 0, 0, nil
	dev.gpuSeconds += busy
	dev.joules += joules
	if total <= 0 {
		dev.unattrBusy += busy
		dev.unattrJoule += joules
		return
	}
	for name, v := range shares {
		m := a.model(name)
		if m == nil {
			continue
		}
		m.gpuSeconds += busy * v / total
		m.joules += joules * v / total
		m.uuid, m.method = uuid, dev.method
	}
}

// resetUpstream starts the upstream time of the models on uuid again.
func (a *Attributor) resetUpstream(st gpu.State, uuid string) {
	for name, m := range a.models {
		if u, _ := st.ModelGPU(name); u == uuid {
			m.upstream = 0
		}
	}
}

// unpriced is the warning for a GPU whose name has no price.
func unpriced(name, uuid string) string {
	return fmt.Sprintf("cost.gpu_hour has no price for GPU %q (%s): its models are reported in GPU-seconds only", name, uuid)
}

// CostModel is one model in a CostReport.
type CostModel struct {
	Model  string `json:"model"`
	GPU    string `json:"gpu_uuid,omitempty"`
	Method string `json:"method,omitempty"`
	// Calls are the successful inference calls counted since the start.
	Calls        uint64  `json:"calls"`
	GPUSeconds   float64 `json:"gpu_seconds"`
	EnergyJoules float64 `json:"energy_joules"`
	// The per-1,000-call figures are nil without calls.
	GPUSecondsPer1K *float64 `json:"gpu_seconds_per_1k_calls"`
	JoulesPer1K     *float64 `json:"joules_per_1k_calls"`
	// CostPer1K is money per 1,000 calls; nil when unpriced.
	CostPer1K *float64 `json:"cost_per_1k_calls,omitempty"`
}

// CostGPU is one GPU in a CostReport.
type CostGPU struct {
	UUID         string  `json:"gpu_uuid"`
	Name         string  `json:"name,omitempty"`
	Method       string  `json:"method,omitempty"`
	GPUSeconds   float64 `json:"gpu_seconds"`
	EnergyJoules float64 `json:"energy_joules"`
	// Unattributed* is what ran while no model's share was known (no
	// calls, no compute time).
	UnattributedGPUSeconds float64 `json:"unattributed_gpu_seconds"`
	UnattributedJoules     float64 `json:"unattributed_joules"`
	// Gaps counts the times the GPU stopped reporting and the time
	// between was left out.
	Gaps uint64 `json:"gaps"`
	// GPUHourPrice is the configured price; nil when none.
	GPUHourPrice *float64 `json:"gpu_hour_price,omitempty"`
}

// CostReport is what /api/v1/cost serves.
type CostReport struct {
	// Available is false when nothing can be attributed; Reason says why.
	Available bool        `json:"available"`
	Reason    string      `json:"reason,omitempty"`
	Currency  string      `json:"currency,omitempty"`
	Models    []CostModel `json:"models"`
	GPUs      []CostGPU   `json:"gpus"`
	// Warnings name GPUs without a price and models left out past the
	// bound.
	Warnings []string `json:"warnings,omitempty"`
}

func per1K(v float64, calls uint64) *float64 {
	if calls == 0 {
		return nil
	}
	x := v / float64(calls) * 1000
	return &x
}

// Report returns the totals since the start.
func (a *Attributor) Report() CostReport {
	rep := CostReport{Models: []CostModel{}, GPUs: []CostGPU{}}
	if a.opts.GPU == nil {
		rep.Reason = "no GPU source: configure gpu.sources (nvml, or a Triton or DCGM metrics URL)"
		return rep
	}
	st := a.opts.GPU()
	p := a.opts.Prices
	if p.priced() {
		rep.Currency = p.Currency
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	money := map[string]*float64{} // uuid → price of a GPU-second
	for uuid, d := range a.devices {
		g := CostGPU{UUID: uuid, Name: d.name, Method: d.method, GPUSeconds: d.gpuSeconds, EnergyJoules: d.joules,
			UnattributedGPUSeconds: d.unattrBusy, UnattributedJoules: d.unattrJoule, Gaps: d.gaps}
		if price, ok := p.GPUHour[d.name]; ok {
			g.GPUHourPrice = &price
			perSec := price / 3600
			money[uuid] = &perSec
		} else if len(p.GPUHour) > 0 {
			rep.Warnings = append(rep.Warnings, unpriced(d.name, uuid))
		} else if p.KWh > 0 {
			zero := 0.0
			money[uuid] = &zero
		}
		rep.GPUs = append(rep.GPUs, g)
	}
	for name, m := range a.models {
		cm := CostModel{Model: name, GPU: m.uuid, Method: m.method, Calls: m.calls, GPUSeconds: m.gpuSeconds,
			EnergyJoules: m.joules, GPUSecondsPer1K: per1K(m.gpuSeconds, m.calls), JoulesPer1K: per1K(m.joules, m.calls)}
		if perSec := money[m.uuid]; perSec != nil && m.calls > 0 {
			cm.CostPer1K = per1K(m.gpuSeconds**perSec+m.joules/3.6e6*p.KWh, m.calls)
		}
		rep.Models = append(rep.Models, cm)
	}
	if a.dropped > 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%d model updates left out past the bound of %d models", a.dropped, a.opts.MaxModels))
	}
	slices.SortFunc(rep.Models, func(x, y CostModel) int { return strings.Compare(x.Model, y.Model) })
	slices.SortFunc(rep.GPUs, func(x, y CostGPU) int { return strings.Compare(x.UUID, y.UUID) })
	slices.Sort(rep.Warnings)
	rep.Available = len(rep.GPUs) > 0
	if !rep.Available {
		rep.Reason = "no GPU reading yet"
		for _, s := range st.Sources {
			if !s.Up && s.LastError != "" {
				rep.Reason = fmt.Sprintf("GPU source %s is down: %s", s.Name, s.LastError)
			}
		}
	}
	return rep
}

var (
	gpuSecondsDesc = prometheus.NewDesc("infergate_model_gpu_seconds_total",
		"GPU busy time (utilisation × time) attributed to the model by its share of its GPU's busy time (see /api/v1/cost for the method).",
		[]string{"model"}, nil)
	energyDesc = prometheus.NewDesc("infergate_model_energy_joules_total",
		"GPU energy attributed to the model by its share of its GPU's busy time.",
		[]string{"model"}, nil)
)

// Register registers the attributor's counters on reg.
func (a *Attributor) Register(reg prometheus.Registerer) error {
	if err := reg.Register(costCollector{a}); err != nil {
		return fmt.Errorf("correlate: register cost collector: %w", err)
	}
	return nil
}

type costCollector struct{ a *Attributor }

func (c costCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- gpuSecondsDesc
	ch <- energyDesc
}

// Collect exports the models with attributed use; a model the GPU never
// ran for has no series.
func (c costCollector) Collect(ch chan<- prometheus.Metric) {
	c.a.mu.Lock()
	defer c.a.mu.Unlock()
	for name, m := range c.a.models {
		if m.method == "" {
			continue
		}
		ch <- prometheus.MustNewConstMetric(gpuSecondsDesc, prometheus.CounterValue, m.gpuSeconds, name)
		ch <- prometheus.MustNewConstMetric(energyDesc, prometheus.CounterValue, m.joules, name)
	}
}
