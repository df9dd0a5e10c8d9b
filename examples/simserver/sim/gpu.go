package sim

import (
	"math"
	"sync"
	"time"
)

// Simulated GPU: an H100-like card. The UUID is fixed so dashboards and
// tests can match it.
const (
	// GPUUUID is the gpu_uuid label of the one simulated GPU.
	GPUUUID = "GPU-5f1c0e42-sim0-4a6b-9c1d-5e1d0a7b3c21"
	// GPUMemoryTotalBytes is the simulated card's memory (80 GiB).
	GPUMemoryTotalBytes = 80 << 30
	// GPUPowerLimitWatts is the simulated card's power limit.
	GPUPowerLimitWatts = 700.0
	// GPUIdleWatts is the simulated card's power draw when idle.
	GPUIdleWatts = 60.0

	// gpuBaseMemoryBytes is held by loaded weights and the runtime.
	gpuBaseMemoryBytes = 2 << 30
	// gpuItemMemoryBytes is the activation memory of one batch item in
	// flight.
	gpuItemMemoryBytes = 64 << 20

	// GPUName is the simulated card's product name (DCGM's modelName).
	GPUName = "NVIDIA H100 80GB HBM3 (simulated)"
	// GPUMaxSMClockMHz is the simulated card's maximum SM clock; a busy,
	// unthrottled card runs at it.
	GPUMaxSMClockMHz = 1980.0
	// GPUIdleSMClockMHz is the SM clock of an idle card (clock event
	// reason gpu_idle).
	GPUIdleSMClockMHz = 345.0
	// GPUIdleCelsius and GPUFullLoadCelsius bound the temperature the card
	// settles at, linear in utilisation; GPUThrottleCelsius is where a
	// thermal throttle fault drives it.
	GPUIdleCelsius     = 35.0
	GPUFullLoadCelsius = 75.0
	GPUThrottleCelsius = 90.0
	// gpuThermalTau is the thermal time constant: the temperature closes
	// 63% of the gap to its target in this long.
	gpuThermalTau = 5 * time.Second
)

// Throttle kinds of the throttle fault.
const (
	// ThrottleThermal halves the SM clock (sw and hw thermal slowdown) and
	// drives the temperature to GPUThrottleCelsius.
	ThrottleThermal = "thermal"
	// ThrottlePower caps the SM clock at 60% (sw power cap) and the power
	// draw at the limit.
	ThrottlePower = "power"
)

// NVML clock event reason bits the simulation sets.
const (
	reasonGPUIdle           = 0x1
	reasonSWPowerCap        = 0x4
	reasonSWThermalSlowdown = 0x20
	reasonHWThermalSlowdown = 0x40
)

// throttleClock is the SM clock ratio under each throttle kind.
var throttleClock = map[string]float64{"": 1, ThrottleThermal: 0.5, ThrottlePower: 0.6}

// GPUStats is one telemetry sample of the simulated GPU, as exported under
// Triton's nv_gpu_* names.
type GPUStats struct {
	// Utilization is the fraction (0..1) of the last period during which
	// at least one execution was running (NVML's definition).
	Utilization float64
	// MemoryUsedBytes grows with the peak number of batch items in flight
	// during the last period.
	MemoryUsedBytes uint64
	// PowerWatts moves linearly from GPUIdleWatts to GPUPowerLimitWatts
	// with Utilization.
	PowerWatts float64
	// EnergyJoules is the energy used since the server started.
	EnergyJoules float64
	// TemperatureCelsius follows utilisation (GPUIdleCelsius to
	// GPUFullLoadCelsius) with thermal inertia.
	TemperatureCelsius float64
	// SMClockMHz is GPUMaxSMClockMHz while busy, scaled down under a
	// throttle fault, and GPUIdleSMClockMHz when idle.
	SMClockMHz float64
	// ClockEventReasons is NVML's clock event reasons bitmask: gpu_idle,
	// sw_power_cap, sw/hw_thermal_slowdown.
	ClockEventReasons uint64
}

// gpu accounts busy time (the union of execution intervals) and items in
// flight. Executions report begin/end; a sampler off the request path turns
// the accumulated busy time into a utilization per period.
type gpu struct {
	mu         sync.Mutex
	active     int       // executions running
	busySince  time.Time // start of the current busy stretch, when active > 0
	busy       time.Duration
	items      int // batch items in flight
	peakItems  int // most items in flight since the last sample
	lastSample time.Time
	last       GPUStats
	throttle   string // "", ThrottleThermal or ThrottlePower
	// use is the ground truth a cost attribution is checked against:
	// each model's share of the busy time, every instant split among the
	// executions running then (so overlapped time counts once), and of
	// the energy, each period's split by the models' busy time in it.
	use       map[string]*modelUse
	lastEvent time.Time // when use was last advanced
}

// modelUse is one model's accounted GPU use.
type modelUse struct {
	active            int     // executions of the model running
	periodBusy        float64 // seconds of the current period
	busyTotal, joules float64
}

// ModelUse is a model's accounted GPU use since the server started.
type ModelUse struct {
	BusySeconds  float64 `json:"busy_seconds"`
	EnergyJoules float64 `json:"energy_joules"`
}

func newGPU(now time.Time) *gpu {
	return &gpu{lastSample: now, last: GPUStats{
		MemoryUsedBytes: gpuBaseMemoryBytes, PowerWatts: GPUIdleWatts, TemperatureCelsius: GPUIdleCelsius,
		SMClockMHz: GPUIdleSMClockMHz, ClockEventReasons: reasonGPUIdle,
	}}
}

// setThrottle sets the throttle the faults ask for ("" for none).
func (g *gpu) setThrottle(kind string) {
	g.mu.Lock()
	g.throttle = kind
	g.mu.Unlock()
}

// slowdown is how much longer an execution takes at the current clock:
// compute time scales with the inverse of the SM clock.
func (g *gpu) slowdown() float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return 1 / throttleClock[g.throttle]
}

// advance splits the time since the last event among the models running,
// in proportion to their executions. Called with mu held.
func (g *gpu) advance(now time.Time) {
	if g.active > 0 {
		dt := now.Sub(g.lastEvent).Seconds()
		for _, u := range g.use {
			if u.active > 0 && dt > 0 {
				u.periodBusy += dt * float64(u.active) / float64(g.active)
			}
		}
	}
	g.lastEvent = now
}

// begin records the start of an execution of items (of no model).
func (g *gpu) begin(items int, now time.Time) { g.beginAs("", items, now) }

// end records the end of an execution of items (of no model).
func (g *gpu) end(items int, now time.Time) { g.endAs("", items, now) }

// beginAs records the start of an execution of items of model.
func (g *gpu) beginAs(model string, items int, now time.Time) {
	g.mu.Lock()
	g.advance(now)
	if g.use == nil {
		g.use = map[string]*modelUse{}
	}
	u := g.use[model]
	if u == nil {
		u = &modelUse{}
		g.use[model] = u
	}
	u.active++
	if g.active == 0 {
		g.busySince = now
	}
	g.active++
	g.items += items
	g.peakItems = max(g.peakItems, g.items)
	g.mu.Unlock()
}

// endAs records the end of an execution of items of model.
func (g *gpu) endAs(model string, items int, now time.Time) {
	g.mu.Lock()
	g.advance(now)
	if u := g.use[model]; u != nil {
		u.active--
	}
	g.active--
	g.items -= items
	if g.active == 0 {
		g.busy += now.Sub(g.busySince)
	}
	g.mu.Unlock()
}

// sample closes the period ending at now and returns its telemetry.
func (g *gpu) sample(now time.Time) GPUStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	elapsed := now.Sub(g.lastSample)
	if elapsed <= 0 {
		return g.last
	}
	busy := g.busy
	if g.active > 0 {
		busy += now.Sub(g.busySince)
		g.busySince = now
	}
	g.advance(now)
	util := min(max(busy.Seconds()/elapsed.Seconds(), 0), 1)
	power := GPUIdleWatts + (GPUPowerLimitWatts-GPUIdleWatts)*util
	mem := uint64(gpuBaseMemoryBytes) + uint64(g.peakItems)*gpuItemMemoryBytes
	target := GPUIdleCelsius + (GPUFullLoadCelsius-GPUIdleCelsius)*util
	clock, reasons := GPUMaxSMClockMHz*throttleClock[g.throttle], uint64(0)
	switch g.throttle {
	case ThrottleThermal:
		target = GPUThrottleCelsius
		reasons |= reasonSWThermalSlowdown | reasonHWThermalSlowdown
	case ThrottlePower:
		power = GPUPowerLimitWatts
		reasons |= reasonSWPowerCap
	}
	if util == 0 && g.throttle == "" {
		clock, reasons = GPUIdleSMClockMHz, reasonGPUIdle
	}
	temp := g.last.TemperatureCelsius
	temp += (target - temp) * (1 - math.Exp(-elapsed.Seconds()/gpuThermalTau.Seconds()))
	g.last = GPUStats{
		Utilization:        util,
		MemoryUsedBytes:    min(mem, GPUMemoryTotalBytes),
		PowerWatts:         power,
		EnergyJoules:       g.last.EnergyJoules + power*elapsed.Seconds(),
		TemperatureCelsius: temp,
		SMClockMHz:         clock,
		ClockEventReasons:  reasons,
	}
	var periodBusy float64
	for _, u := range g.use {
		periodBusy += u.periodBusy
	}
	for _, u := range g.use {
		u.busyTotal += u.periodBusy
		if periodBusy > 0 {
			u.joules += power * elapsed.Seconds() * u.periodBusy / periodBusy
		}
		u.periodBusy = 0
	}
	g.busy = 0
	g.peakItems = g.items
	g.lastSample = now
	return g.last
}

// snapshot returns the last sample.
func (g *gpu) snapshot() GPUStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.last
}

// modelUse returns each model's accounted use up to the last sample.
func (g *gpu) modelUse() map[string]ModelUse {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]ModelUse, len(g.use))
	for m, u := range g.use {
		if m != "" {
			out[m] = ModelUse{BusySeconds: u.busyTotal, EnergyJoules: u.joules}
		}
	}
	return out
}
