package gpu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func oneDevice(util float64) Reading {
	return Reading{Devices: []Device{{UUID: "GPU-1", Utilization: util, Known: FieldUtilization}}}
}

// TestSamplerTicks samples at once and then every interval, in fake time.
func TestSamplerTicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var n atomic.Int64
		src := SourceFunc(func(ctx context.Context) (Reading, error) {
			return oneDevice(float64(n.Add(1)) / 10), nil
		})
		s := NewSampler(src, SamplerOptions{Name: "fake", Interval: time.Second})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go s.Run(ctx)
		synctest.Wait()
		if n.Load() != 1 {
			t.Fatalf("samples after start = %d, want 1", n.Load())
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if n.Load() != 4 {
			t.Fatalf("samples after 3 intervals = %d, want 4", n.Load())
		}
		st := s.Status()
		if !st.Up || st.Reading == nil || st.Reading.Devices[0].Utilization != 0.4 || st.Reading.Devices[0].Source != "fake" {
			t.Errorf("status = %+v", st)
		}
	})
}

// TestSamplerTimesOutHungSource: a source that never returns is timed out,
// counted as an error, and not called again while it hangs.
func TestSamplerTimesOutHungSource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var calls atomic.Int64
		src := SourceFunc(func(ctx context.Context) (Reading, error) {
			calls.Add(1)
			<-release // ignores ctx, like a hung driver call
			return oneDevice(0.5), nil
		})
		s := NewSampler(src, SamplerOptions{Interval: time.Second, Timeout: 300 * time.Millisecond})
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go s.Run(ctx)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		st := s.Status()
		if st.Up || st.Errors < 2 || !strings.Contains(st.LastError, "still running") {
			t.Errorf("status = %+v, want down with errors", st)
		}
		if calls.Load() != 1 {
			t.Errorf("calls = %d, want 1 (no pile-up)", calls.Load())
		}
		close(release)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if st := s.Status(); !st.Up {
			t.Errorf("after the source recovered: %+v", st)
		}
	})
}

// TestSamplerStopsOnSourceOff: a source that switched itself off (NVML
// without a driver) is not sampled again.
func TestSamplerStopsOnSourceOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		src := SourceFunc(func(context.Context) (Reading, error) {
			calls.Add(1)
			return Reading{}, fmt.Errorf("%w: nvml init: ERROR_LIBRARY_NOT_FOUND", ErrSourceOff)
		})
		s := NewSampler(src, SamplerOptions{Name: "nvml"})
		done := make(chan struct{})
		go func() { s.Run(t.Context()); close(done) }()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("Run still sampling an off source")
		}
		if st := s.Status(); calls.Load() != 1 || st.Up || st.Errors != 1 || !strings.Contains(st.LastError, "ERROR_LIBRARY_NOT_FOUND") {
			t.Errorf("calls %d, status %+v", calls.Load(), st)
		}
	})
}

func TestHubStateAndMetrics(t *testing.T) {
	good := NewSampler(SourceFunc(func(context.Context) (Reading, error) {
		r := parseFileNoT("testdata/dcgm.prom")
		r.Models = map[string]string{"bert": "GPU-elsewhere"}
		return r, nil
	}), SamplerOptions{Name: "dcgm"})
	dead := NewSampler(SourceFunc(func(context.Context) (Reading, error) {
		return Reading{}, errors.New("connection refused")
	}), SamplerOptions{Name: "prometheus"})
	good.SampleOnce(context.Background())
	dead.SampleOnce(context.Background())
	dead.SampleOnce(context.Background())

	h := NewHub(map[string]string{"resnet50": "GPU-configured"}, good, dead)
	st := h.State()
	if len(st.Devices) != 1 || st.Devices[0].Source != "dcgm" {
		t.Fatalf("devices = %+v", st.Devices)
	}
	for model, want := range map[string][2]string{
		"resnet50": {"GPU-configured", FromConfig},
		"bert":     {"GPU-elsewhere", FromSource},
		"other":    {"GPU-7c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f", FromOnlyDevice},
	} {
		if u, from := st.ModelGPU(model); u != want[0] || from != want[1] {
			t.Errorf("ModelGPU(%s) = %s, %s; want %v", model, u, from, want)
		}
	}

	reg := prometheus.NewPedanticRegistry()
	if err := h.Register(reg); err != nil {
		t.Fatal(err)
	}
	text := exposition(t, reg)
	for _, line := range []string{
		`infergate_gpu_source_up{source="dcgm"} 1`,
		`infergate_gpu_source_up{source="prometheus"} 0`,
		`infergate_gpu_scrape_errors_total{source="dcgm"} 0`,
		`infergate_gpu_scrape_errors_total{source="prometheus"} 2`,
		`infergate_gpu_temperature_celsius{gpu_uuid="GPU-7c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f",name="NVIDIA H100 80GB HBM3",source="dcgm"} 87`,
		`infergate_gpu_throttled{gpu_uuid="GPU-7c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f",name="NVIDIA H100 80GB HBM3",reason="sw_thermal_slowdown",source="dcgm"} 1`,
		`infergate_gpu_throttled{gpu_uuid="GPU-7c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f",name="NVIDIA H100 80GB HBM3",reason="sw_power_cap",source="dcgm"} 0`,
		`infergate_gpu_sm_clock_hertz{gpu_uuid="GPU-7c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f",name="NVIDIA H100 80GB HBM3",source="dcgm"} 1.41e+09`,
	} {
		if !strings.Contains(text, line+"\n") {
			t.Errorf("missing %s", line)
		}
	}
	if n := strings.Count(text, "infergate_gpu_throttled{"); n != len(AllReasons) {
		t.Errorf("throttled series = %d, want one per reason", n)
	}
	if strings.Contains(text, "infergate_gpu_power_limit_watts{") {
		t.Error("a reading the source does not report must not be exported")
	}
	if t.Failed() {
		t.Log(text)
	}
	promtoolCheck(t, reg)
}

// promtoolCheck runs `promtool check metrics` on reg's exposition when
// promtool is installed.
func promtoolCheck(t *testing.T, reg *prometheus.Registry) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool not installed; skipping the lint")
		return
	}
	text := exposition(t, reg)
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s\n%s", err, out, text)
	}
}

func parseFileNoT(path string) Reading {
	f, err := os.Open(path)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	r, err := ParseExposition(f)
	if err != nil {
		panic(err)
	}
	return r
}
