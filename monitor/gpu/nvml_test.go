package gpu

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// fakeNVML records every call and fails the ones a test asks it to. It
// fails the test outright when anything but Init runs before a successful
// Init: real go-nvml kills the process then.
type fakeNVML struct {
	t       *testing.T
	initErr error
	inited  bool
	calls   []string
	devs    []*fakeDevice
}

func (f *fakeNVML) call(name string) {
	f.calls = append(f.calls, name)
	if name != "Init" && !f.inited {
		f.t.Fatalf("NVML %s called without a successful Init", name)
	}
}

func (f *fakeNVML) Init() error {
	f.call("Init")
	if f.initErr != nil {
		return f.initErr
	}
	f.inited = true
	return nil
}

func (f *fakeNVML) Shutdown() error { f.call("Shutdown"); f.inited = false; return nil }

func (f *fakeNVML) Count() (int, error) { f.call("Count"); return len(f.devs), nil }

func (f *fakeNVML) Device(i int) (nvmlDevice, error) {
	f.call("Device")
	if f.devs[i] == nil {
		return nil, errors.New("ERROR_GPU_IS_LOST")
	}
	return f.devs[i], nil
}

type fakeDevice struct {
	uuid        string
	noTemp      bool // the device does not support the temperature reading
	util, mem   uint32
	used, total uint64
	temp        uint32
	mw, limitMW uint32
	sm, smMax   uint32
	reasons     uint64
}

var errNotSupported = errors.New("ERROR_NOT_SUPPORTED")

func (d *fakeDevice) UUID() (string, error)                { return d.uuid, nil }
func (d *fakeDevice) Name() (string, error)                { return "NVIDIA H100 80GB HBM3", nil }
func (d *fakeDevice) Utilization() (uint32, uint32, error) { return d.util, d.mem, nil }
func (d *fakeDevice) Memory() (uint64, uint64, error)      { return d.used, d.total, nil }
func (d *fakeDevice) PowerUsage() (uint32, error)          { return d.mw, nil }
func (d *fakeDevice) PowerLimit() (uint32, error)          { return d.limitMW, nil }
func (d *fakeDevice) SMClock() (uint32, error)             { return d.sm, nil }
func (d *fakeDevice) SMClockMax() (uint32, error)          { return d.smMax, nil }
func (d *fakeDevice) ClockEventReasons() (uint64, error)   { return d.reasons, nil }
func (d *fakeDevice) Temperature() (uint32, error) {
	if d.noTemp {
		return 0, errNotSupported
	}
	return d.temp, nil
}

func TestNVMLReadsDevices(t *testing.T) {
	lib := &fakeNVML{t: t, devs: []*fakeDevice{
		{uuid: "GPU-b", util: 97, mem: 40, used: 70 << 30, total: 80 << 30, temp: 88, mw: 650_000, limitMW: 700_000,
			sm: 990, smMax: 1980, reasons: uint64(ReasonSWThermalSlowdown | ReasonHWThermalSlowdown)},
		nil, // a lost GPU is skipped
		{uuid: "GPU-a", noTemp: true, util: 3, used: 1 << 30, total: 16 << 30, mw: 30_000, limitMW: 70_000, sm: 300, smMax: 1590,
			reasons: uint64(ReasonGPUIdle)},
	}}
	n := newNVMLWith(lib, nil)
	r, err := n.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Devices) != 2 || r.Devices[0].UUID != "GPU-a" || r.Devices[1].UUID != "GPU-b" {
		t.Fatalf("devices = %+v, want GPU-a, GPU-b sorted", r.Devices)
	}
	a, b := r.Devices[0], r.Devices[1]
	if a.Has(FieldTemperature) {
		t.Error("GPU-a does not support temperature: want it unknown, not 0")
	}
	if a.Throttled() {
		t.Error("an idle GPU at low clocks is not throttled")
	}
	if b.Utilization != 0.97 || b.MemoryUtilization != 0.40 || b.MemoryUsedBytes != 70<<30 || b.TemperatureCelsius != 88 ||
		b.PowerWatts != 650 || b.PowerLimitWatts != 700 || b.SMClockHz != 990e6 || b.SMClockMaxHz != 1980e6 || b.Name == "" {
		t.Errorf("GPU-b = %+v", b)
	}
	if !b.Throttled() {
		t.Error("GPU-b: thermal slowdown at half clock: want throttled")
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if lib.calls[len(lib.calls)-1] != "Shutdown" {
		t.Errorf("Close must shut NVML down; calls %v", lib.calls)
	}
}

// TestNVMLInitFailure: without a driver Init fails; the failure is logged
// once, every later sample reports the source off, and no NVML function is
// called again (go-nvml would kill the process).
func TestNVMLInitFailure(t *testing.T) {
	lib := &fakeNVML{t: t, initErr: errors.New("ERROR_LIBRARY_NOT_FOUND")}
	var logBuf bytes.Buffer
	n := newNVMLWith(lib, slog.New(slog.NewTextHandler(&logBuf, nil)))
	for range 5 {
		if _, err := n.Sample(context.Background()); !errors.Is(err, ErrSourceOff) {
			t.Fatalf("err = %v, want ErrSourceOff", err)
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if len(lib.calls) != 1 || lib.calls[0] != "Init" {
		t.Errorf("NVML calls = %v, want exactly one Init", lib.calls)
	}
	if c := strings.Count(logBuf.String(), "NVML unavailable"); c != 1 {
		t.Errorf("logged %d times, want once:\n%s", c, logBuf.String())
	}
}

// TestNVMLRealWithoutDriver runs the real binding (or the stub in a build
// without cgo) on this machine: with no libnvidia-ml it must fail cleanly.
func TestNVMLRealWithoutDriver(t *testing.T) {
	n := NewNVML(nil)
	defer n.Close()
	r, err := n.Sample(context.Background())
	if err == nil {
		t.Skipf("an NVML driver is present: %d devices", len(r.Devices))
	}
	if !errors.Is(err, ErrSourceOff) {
		t.Fatalf("err = %v, want ErrSourceOff", err)
	}
	if _, err := n.Sample(context.Background()); !errors.Is(err, ErrSourceOff) {
		t.Fatalf("second sample: err = %v", err)
	}
}
