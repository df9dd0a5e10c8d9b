package alert

import (
	"context"

	"github.com/infergate/infergate/monitor/gpu"
)

// gpuState builds a gpu.State holding devs through a real sampler and hub.
func gpuState(devs ...gpu.Device) gpu.State {
	s := gpu.NewSampler(gpu.SourceFunc(func(context.Context) (gpu.Reading, error) {
		return gpu.Reading{Devices: devs}, nil
	}), gpu.SamplerOptions{Name: "fake"})
	s.SampleOnce(context.Background())
	return gpu.NewHub(nil, s).State()
}
