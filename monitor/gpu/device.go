package gpu

import (
	"math/bits"
	"time"
)

// Field is a bit set naming the readings of a Device that its source
// reported; sources differ (Triton exports no temperature, DCGM no memory
// total unless asked), and a missing reading is not a zero one.
type Field uint32

// The readings a Device may carry.
const (
	FieldUtilization Field = 1 << iota
	FieldMemoryUtilization
	FieldMemoryUsed
	FieldMemoryTotal
	FieldTemperature
	FieldPower
	FieldPowerLimit
	FieldSMClock
	FieldSMClockMax
	FieldClockEventReasons
	FieldEnergy
)

// Device is one GPU's state at one instant. Readings are in base units
// (ratios 0..1, bytes, degrees Celsius, watts, hertz); Known says which
// were reported.
type Device struct {
	// UUID is the device's NVML UUID ("GPU-..."), the key every source
	// shares.
	UUID string
	// Name is the product name, when the source reports it.
	Name string
	// Source is the name of the sampler that read the device.
	Source string
	// Utilization is the fraction of the last sample period during which a
	// kernel ran (NVML's definition).
	Utilization float64
	// MemoryUtilization is the fraction of the period the memory
	// controller was busy.
	MemoryUtilization float64
	// MemoryUsedBytes and MemoryTotalBytes are frame-buffer bytes.
	MemoryUsedBytes, MemoryTotalBytes float64
	// TemperatureCelsius is the GPU core temperature.
	TemperatureCelsius float64
	// PowerWatts is the draw; PowerLimitWatts the enforced limit.
	PowerWatts, PowerLimitWatts float64
	// SMClockHz is the current SM clock; SMClockMaxHz its maximum.
	SMClockHz, SMClockMaxHz float64
	// ClockEventReasons is NVML's clock event (throttle) reasons bitmask;
	// see Reason.
	ClockEventReasons uint64
	// EnergyJoules is the device's energy counter (since the server or
	// driver started): cost attribution takes its differences, which are
	// exact where power × time is sampled.
	EnergyJoules float64
	// Known holds a bit for every reading above that the source reported.
	Known Field
}

// Has reports whether every reading in f was reported.
func (d Device) Has(f Field) bool { return d.Known&f == f }

// MemoryRatio returns used/total memory, and false when either is unknown.
func (d Device) MemoryRatio() (float64, bool) {
	if !d.Has(FieldMemoryUsed|FieldMemoryTotal) || d.MemoryTotalBytes <= 0 {
		return 0, false
	}
	return d.MemoryUsedBytes / d.MemoryTotalBytes, true
}

// Throttled reports whether a thermal, power or hardware slowdown reason is
// active (ThrottleReasons) while the SM clock runs below its maximum (when
// both clocks are known; a reason alone counts when they are not).
func (d Device) Throttled() bool {
	if !d.Has(FieldClockEventReasons) || d.ClockEventReasons&ThrottleReasons == 0 {
		return false
	}
	if d.Has(FieldSMClock|FieldSMClockMax) && d.SMClockMaxHz > 0 {
		return d.SMClockHz < d.SMClockMaxHz
	}
	return true
}

// ActiveReasons returns the names of the reasons set in the device's
// clock event bitmask, in bit order; nil when none or unknown.
func (d Device) ActiveReasons() []string {
	if !d.Has(FieldClockEventReasons) {
		return nil
	}
	return ReasonNames(d.ClockEventReasons)
}

// Reading is what one Source returned from one sample.
type Reading struct {
	// At is when the sample was taken (the sampler's clock).
	At time.Time
	// Devices are sorted by UUID.
	Devices []Device
	// Models maps a model name to the UUID of the GPU it runs on, where
	// the source knows (Triton's per-model gpu_uuid labels); may be nil.
	Models map[string]string
	// Compute is each model's cumulative compute time on each GPU, in
	// seconds (Triton's nv_inference_compute_infer_duration_us, summed
	// over versions); nil when the source does not export it. Cost
	// attribution splits a GPU's busy time by its differences.
	Compute map[ModelOnGPU]float64
}

// ModelOnGPU keys a model's reading on one GPU.
type ModelOnGPU struct{ Model, UUID string }

// Reason is one bit of NVML's clock event reasons mask
// (nvmlClocksEventReason*, DCGM_FI_DEV_CLOCKS_EVENT_REASONS).
type Reason uint64

// The clock event reasons, NVML's bit values.
const (
	ReasonGPUIdle                   Reason = 0x1
	ReasonApplicationsClocksSetting Reason = 0x2
	ReasonSWPowerCap                Reason = 0x4
	ReasonHWSlowdown                Reason = 0x8
	ReasonSyncBoost                 Reason = 0x10
	ReasonSWThermalSlowdown         Reason = 0x20
	ReasonHWThermalSlowdown         Reason = 0x40
	ReasonHWPowerBrakeSlowdown      Reason = 0x80
	ReasonDisplayClockSetting       Reason = 0x100
)

// ThrottleReasons are the reasons that slow a busy GPU against its will:
// power capping and thermal or hardware slowdowns. Idle, application and
// display clock settings and sync boost are not throttling.
const ThrottleReasons = uint64(ReasonSWPowerCap | ReasonHWSlowdown | ReasonSWThermalSlowdown |
	ReasonHWThermalSlowdown | ReasonHWPowerBrakeSlowdown)

// reasonNames are indexed by bit position.
var reasonNames = [...]string{
	"gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
	"sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "display_clock_setting",
}

// AllReasons lists every named reason, in bit order; the throttled gauge
// exports one series per entry.
var AllReasons = []Reason{
	ReasonGPUIdle, ReasonApplicationsClocksSetting, ReasonSWPowerCap, ReasonHWSlowdown, ReasonSyncBoost,
	ReasonSWThermalSlowdown, ReasonHWThermalSlowdown, ReasonHWPowerBrakeSlowdown, ReasonDisplayClockSetting,
}

// String returns the reason's snake_case name ("sw_thermal_slowdown"), or
// "unknown" for a bit without one.
func (r Reason) String() string {
	if bits.OnesCount64(uint64(r)) != 1 {
		return "unknown"
	}
	i := bits.TrailingZeros64(uint64(r))
	if i >= len(reasonNames) {
		return "unknown"
	}
	return reasonNames[i]
}

// ReasonNames decodes a clock event reasons bitmask into names, in bit
// order. Bits without a name (newer drivers add some) come out as
// "unknown" once.
func ReasonNames(mask uint64) []string {
	var out []string
	unknown := false
	for mask != 0 {
		bit := mask & -mask
		mask &^= bit
		name := Reason(bit).String()
		if name == "unknown" {
			if unknown {
				continue
			}
			unknown = true
		}
		out = append(out, name)
	}
	return out
}
