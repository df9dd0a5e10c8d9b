package gpu

import (
	"context"
	"maps"
	"slices"
	"sync"
)

// Where a model's GPU assignment came from (State.ModelGPU).
const (
	// FromConfig: the operator mapped the model to a UUID.
	FromConfig = "config"
	// FromSource: a source reported it (Triton's per-model gpu_uuid).
	FromSource = "source"
	// FromOnlyDevice: exactly one GPU is known, so every model runs on it.
	FromOnlyDevice = "only_device"
)

// Hub joins several samplers and a configured model map into one view.
// Its methods are safe for concurrent use.
type Hub struct {
	samplers []*Sampler
	models   map[string]string
}

// NewHub returns a hub over samplers. models maps a model name to a GPU
// UUID; it wins over what sources report. The hub keeps its own copy.
func NewHub(models map[string]string, samplers ...*Sampler) *Hub {
	return &Hub{samplers: samplers, models: maps.Clone(models)}
}

// Run runs every sampler until ctx ends and returns when all have stopped.
func (h *Hub) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, s := range h.samplers {
		wg.Go(func() { s.Run(ctx) })
	}
	wg.Wait()
}

// State is the hub's view at one instant: the devices of every source that
// is up, each source's status and the model map.
type State struct {
	// Devices are sorted by UUID; a UUID two sources report appears once,
	// from the first source in the hub's order.
	Devices []Device
	// Sources is one status per sampler, in the hub's order.
	Sources []Status
	// Models maps model to UUID: configured entries, then what sources
	// reported for the models not configured.
	Models map[string]string
	// fromConfig holds the configured model names.
	fromConfig map[string]string
}

// State returns the current view. Devices of a source whose last sample
// failed are left out: stale telemetry must not explain fresh latency.
func (h *Hub) State() State {
	st := State{Models: map[string]string{}, fromConfig: h.models}
	seen := map[string]bool{}
	for _, s := range h.samplers {
		ss := s.Status()
		st.Sources = append(st.Sources, ss)
		if !ss.Up || ss.Reading == nil {
			continue
		}
		for _, d := range ss.Reading.Devices {
			if d.UUID == "" || seen[d.UUID] {
				continue
			}
			seen[d.UUID] = true
			st.Devices = append(st.Devices, d)
		}
		for m, u := range ss.Reading.Models {
			if _, ok := st.Models[m]; !ok {
				st.Models[m] = u
			}
		}
	}
	maps.Copy(st.Models, h.models)
	slices.SortFunc(st.Devices, func(a, b Device) int {
		switch {
		case a.UUID < b.UUID:
			return -1
		case a.UUID > b.UUID:
			return 1
		}
		return 0
	})
	return st
}

// Device returns the device with uuid.
func (st State) Device(uuid string) (Device, bool) {
	i, ok := slices.BinarySearchFunc(st.Devices, uuid, func(d Device, u string) int {
		switch {
		case d.UUID < u:
			return -1
		case d.UUID > u:
			return 1
		}
		return 0
	})
	if !ok {
		return Device{}, false
	}
	return st.Devices[i], true
}

// ModelGPU returns the UUID model runs on and where that came from
// (FromConfig, FromSource, FromOnlyDevice); "" when unknown. A configured
// or reported UUID is returned even when no source reads that device now.
func (st State) ModelGPU(model string) (uuid, from string) {
	if u, ok := st.fromConfig[model]; ok {
		return u, FromConfig
	}
	if u, ok := st.Models[model]; ok {
		return u, FromSource
	}
	if len(st.Devices) == 1 {
		return st.Devices[0].UUID, FromOnlyDevice
	}
	return "", ""
}
