package gpu

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"
)

func parseFile(t *testing.T, path string) Reading {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := ParseExposition(f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestParseTriton(t *testing.T) {
	r := parseFile(t, "testdata/triton.prom")
	const a, b = "GPU-0a1b2c3d-0000-1111-2222-333344445555", "GPU-9f8e7d6c-aaaa-bbbb-cccc-ddddeeeeffff"
	want := []Device{
		{UUID: a, Utilization: 0.93, MemoryUsedBytes: 40 << 30, MemoryTotalBytes: 80 << 30, PowerWatts: 612.5, PowerLimitWatts: 700,
			EnergyJoules: 1.5e6, Known: FieldUtilization | FieldMemoryUsed | FieldMemoryTotal | FieldPower | FieldPowerLimit | FieldEnergy},
		{UUID: b, Utilization: 0.12, MemoryUsedBytes: 23 << 30, MemoryTotalBytes: 24 << 30, PowerWatts: 71, PowerLimitWatts: 300,
			Known: FieldUtilization | FieldMemoryUsed | FieldMemoryTotal | FieldPower | FieldPowerLimit},
	}
	if !reflect.DeepEqual(r.Devices, want) {
		t.Errorf("devices:\n got %+v\nwant %+v", r.Devices, want)
	}
	// bert runs on both GPUs; most of its inferences are on b. cpu_only
	// has no gpu_uuid and stays unmapped.
	wantModels := map[string]string{"resnet50": a, "bert": b}
	if !reflect.DeepEqual(r.Models, wantModels) {
		t.Errorf("models = %v, want %v", r.Models, wantModels)
	}
	if r.Devices[0].Throttled() {
		t.Error("Triton exports no clock reasons: not throttled")
	}
	if ratio, ok := r.Devices[1].MemoryRatio(); !ok || ratio < 0.95 {
		t.Errorf("memory ratio of b = %v, %v; want >= 0.95", ratio, ok)
	}
}

func TestParseDCGM(t *testing.T) {
	r := parseFile(t, "testdata/dcgm.prom")
	want := []Device{{
		UUID: "GPU-7c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f", Name: "NVIDIA H100 80GB HBM3",
		Utilization: 0.97, MemoryUtilization: 0.41,
		MemoryUsedBytes: 80896 * mib, MemoryTotalBytes: 81920 * mib,
		TemperatureCelsius: 87, PowerWatts: 698.512,
		SMClockHz: 1410e6, SMClockMaxHz: 1980e6, ClockEventReasons: 0x60,
		Known: FieldUtilization | FieldMemoryUtilization | FieldMemoryUsed | FieldMemoryTotal | FieldTemperature |
			FieldPower | FieldSMClock | FieldSMClockMax | FieldClockEventReasons,
	}}
	if !reflect.DeepEqual(r.Devices, want) {
		t.Errorf("devices:\n got %+v\nwant %+v", r.Devices, want)
	}
	if r.Models != nil {
		t.Errorf("DCGM has no model map, got %v", r.Models)
	}
	d := r.Devices[0]
	if !d.Throttled() {
		t.Error("thermal reasons with the clock below max: want throttled")
	}
	if got, want := d.ActiveReasons(), []string{"sw_thermal_slowdown", "hw_thermal_slowdown"}; !reflect.DeepEqual(got, want) {
		t.Errorf("reasons = %v, want %v", got, want)
	}
}

// TestParseMerged reads Triton and DCGM names for the same UUID on one
// endpoint, as simserver (or Triton with DCGM exporter beside it) serves.
func TestParseMerged(t *testing.T) {
	const text = `# TYPE nv_gpu_utilization gauge
nv_gpu_utilization{gpu_uuid="GPU-x"} 0.5
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-x"} 99
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-x"} 61
`
	r, err := ParseExposition(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Devices) != 1 {
		t.Fatalf("devices = %+v", r.Devices)
	}
	d := r.Devices[0]
	if d.Utilization != 0.5 || d.TemperatureCelsius != 61 || !d.Has(FieldUtilization|FieldTemperature) {
		t.Errorf("merged device = %+v (Triton's utilisation must win)", d)
	}
}

func TestParseBad(t *testing.T) {
	if _, err := ParseExposition(strings.NewReader("nv_gpu_utilization{ 1\n")); err == nil {
		t.Error("want an error for a broken exposition")
	}
}

func TestScrapeSource(t *testing.T) {
	body, err := os.ReadFile("testdata/triton.prom")
	if err != nil {
		t.Fatal(err)
	}
	fail := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		if !strings.Contains(r.Header.Get("Accept"), "text/plain") {
			t.Errorf("Accept = %q, want the text format", r.Header.Get("Accept"))
		}
		w.Write(body)
	}))
	defer srv.Close()
	s := NewScrape(srv.URL, nil)
	defer s.Close()
	r, err := s.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Devices) != 2 || len(r.Models) != 2 {
		t.Errorf("reading = %+v", r)
	}
	fail = true
	if _, err := s.Sample(context.Background()); err == nil || !strings.Contains(err.Error(), "500") {
		t.Errorf("err = %v, want the status", err)
	}
}
