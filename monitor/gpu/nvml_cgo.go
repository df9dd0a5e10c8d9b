//go:build cgo && !nonvml

package gpu

import (
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// goNVML adapts go-nvml to nvmlLib. go-nvml dlopens libnvidia-ml.so.1 in
// Init, so a binary built with it still starts on a host without a driver.
type goNVML struct{ lib nvml.Interface }

func newNVMLLib() nvmlLib { return goNVML{lib: nvml.New()} }

// nvmlErr turns a non-success Return into an error.
func nvmlErr(what string, r nvml.Return) error {
	if r == nvml.SUCCESS {
		return nil
	}
	return fmt.Errorf("%s: %w", what, r)
}

func (g goNVML) Init() error     { return nvmlErr("init", g.lib.Init()) }
func (g goNVML) Shutdown() error { return nvmlErr("shutdown", g.lib.Shutdown()) }

func (g goNVML) Count() (int, error) {
	n, r := g.lib.DeviceGetCount()
	return n, nvmlErr("device count", r)
}

func (g goNVML) Device(i int) (nvmlDevice, error) {
	d, r := g.lib.DeviceGetHandleByIndex(i)
	if err := nvmlErr("device handle", r); err != nil {
		return nil, err
	}
	return goDevice{d}, nil
}

type goDevice struct{ d nvml.Device }

func (g goDevice) UUID() (string, error) {
	v, r := g.d.GetUUID()
	return v, nvmlErr("uuid", r)
}

func (g goDevice) Name() (string, error) {
	v, r := g.d.GetName()
	return v, nvmlErr("name", r)
}

func (g goDevice) Utilization() (uint32, uint32, error) {
	u, r := g.d.GetUtilizationRates()
	return u.Gpu, u.Memory, nvmlErr("utilization", r)
}

func (g goDevice) Memory() (uint64, uint64, error) {
	m, r := g.d.GetMemoryInfo()
	return m.Used, m.Total, nvmlErr("memory", r)
}

func (g goDevice) Temperature() (uint32, error) {
	v, r := g.d.GetTemperature(nvml.TEMPERATURE_GPU)
	return v, nvmlErr("temperature", r)
}

func (g goDevice) PowerUsage() (uint32, error) {
	v, r := g.d.GetPowerUsage()
	return v, nvmlErr("power", r)
}

func (g goDevice) PowerLimit() (uint32, error) {
	v, r := g.d.GetEnforcedPowerLimit()
	return v, nvmlErr("power limit", r)
}

func (g goDevice) SMClock() (uint32, error) {
	v, r := g.d.GetClockInfo(nvml.CLOCK_SM)
	return v, nvmlErr("sm clock", r)
}

func (g goDevice) SMClockMax() (uint32, error) {
	v, r := g.d.GetMaxClockInfo(nvml.CLOCK_SM)
	return v, nvmlErr("sm clock max", r)
}

func (g goDevice) ClockEventReasons() (uint64, error) {
	v, r := g.d.GetCurrentClocksEventReasons()
	return v, nvmlErr("clock event reasons", r)
}
