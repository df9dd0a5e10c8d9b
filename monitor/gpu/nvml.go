package gpu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
)

// ErrNVMLNotCompiled is Init's error in a build without NVML (CGO_ENABLED=0
// or the nonvml build tag).
var ErrNVMLNotCompiled = errors.New("gpu: NVML not compiled in (build with cgo and without the nonvml tag)")

// nvmlLib is the slice of NVML the source uses, so tests can fake it. The
// real one (nvml_cgo.go) wraps go-nvml; Init must succeed before any other
// method is called, which NVML enforces here.
type nvmlLib interface {
	Init() error
	Shutdown() error
	Count() (int, error)
	Device(i int) (nvmlDevice, error)
}

// nvmlDevice is one device handle. Units are NVML's: percent, bytes,
// degrees Celsius, milliwatts, MHz.
type nvmlDevice interface {
	UUID() (string, error)
	Name() (string, error)
	Utilization() (gpu, memory uint32, err error)
	Memory() (used, total uint64, err error)
	Temperature() (uint32, error)
	PowerUsage() (uint32, error)
	PowerLimit() (uint32, error)
	SMClock() (uint32, error)
	SMClockMax() (uint32, error)
	ClockEventReasons() (uint64, error)
}

// NVML is a Source reading the local driver through NVML. It initialises
// NVML on the first sample; if that fails (no driver, no cgo) it logs once
// and stays off, returning ErrSourceOff, and never calls NVML again. Its
// methods are safe for concurrent use.
type NVML struct {
	mu     sync.Mutex
	lib    nvmlLib
	log    *slog.Logger
	inited bool
	off    error // why the source is off, once Init failed
	closed bool
}

// NewNVML returns an NVML source; log receives the one Init failure (nil
// discards).
func NewNVML(log *slog.Logger) *NVML { return newNVMLWith(newNVMLLib(), log) }

func newNVMLWith(lib nvmlLib, log *slog.Logger) *NVML {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &NVML{lib: lib, log: log}
}

// Sample reads every device. A reading a device does not support (an
// NVML error) is left unknown; a device whose UUID cannot be read is
// skipped. NVML calls cannot be cancelled: ctx is checked between devices.
func (n *NVML) Sample(ctx context.Context) (Reading, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.off != nil || n.closed {
		return Reading{}, fmt.Errorf("%w: %v", ErrSourceOff, n.off)
	}
	if !n.inited {
		if err := n.lib.Init(); err != nil {
			n.off = err
			n.log.Warn("gpu: NVML unavailable; the nvml source is off and the proxy runs without it", "err", err)
			return Reading{}, fmt.Errorf("%w: nvml init: %v", ErrSourceOff, err)
		}
		n.inited = true
	}
	count, err := n.lib.Count()
	if err != nil {
		return Reading{}, fmt.Errorf("gpu: nvml: device count: %w", err)
	}
	var r Reading
	for i := range count {
		if err := ctx.Err(); err != nil {
			return Reading{}, fmt.Errorf("gpu: nvml: %w", err)
		}
		h, err := n.lib.Device(i)
		if err != nil {
			continue
		}
		if d, ok := readNVMLDevice(h); ok {
			r.Devices = append(r.Devices, d)
		}
	}
	sortDevices(r.Devices)
	return r, nil
}

// readNVMLDevice converts one handle's readings to base units.
func readNVMLDevice(h nvmlDevice) (Device, bool) {
	uuid, err := h.UUID()
	if err != nil || uuid == "" {
		return Device{}, false
	}
	d := Device{UUID: uuid}
	if name, err := h.Name(); err == nil {
		d.Name = name
	}
	if g, m, err := h.Utilization(); err == nil {
		d.Utilization, d.MemoryUtilization = float64(g)/100, float64(m)/100
		d.Known |= FieldUtilization | FieldMemoryUtilization
	}
	if used, total, err := h.Memory(); err == nil {
		d.MemoryUsedBytes, d.MemoryTotalBytes = float64(used), float64(total)
		d.Known |= FieldMemoryUsed | FieldMemoryTotal
	}
	if t, err := h.Temperature(); err == nil {
		d.TemperatureCelsius = float64(t)
		d.Known |= FieldTemperature
	}
	if p, err := h.PowerUsage(); err == nil {
		d.PowerWatts = float64(p) / 1000
		d.Known |= FieldPower
	}
	if p, err := h.PowerLimit(); err == nil {
		d.PowerLimitWatts = float64(p) / 1000
		d.Known |= FieldPowerLimit
	}
	if c, err := h.SMClock(); err == nil {
		d.SMClockHz = float64(c) * 1e6
		d.Known |= FieldSMClock
	}
	if c, err := h.SMClockMax(); err == nil {
		d.SMClockMaxHz = float64(c) * 1e6
		d.Known |= FieldSMClockMax
	}
	if m, err := h.ClockEventReasons(); err == nil {
		d.ClockEventReasons = m
		d.Known |= FieldClockEventReasons
	}
	return d, true
}

// Close shuts NVML down if it was initialised; later samples report the
// source off.
func (n *NVML) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	if n.inited {
		if err := n.lib.Shutdown(); err != nil {
			return fmt.Errorf("gpu: nvml shutdown: %w", err)
		}
	}
	return nil
}

func sortDevices(ds []Device) {
	for i := 1; i < len(ds); i++ {
		for j := i; j > 0 && ds[j].UUID < ds[j-1].UUID; j-- {
			ds[j], ds[j-1] = ds[j-1], ds[j]
		}
	}
}
