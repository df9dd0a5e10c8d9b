package main

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infergate/infergate/batcher"
)

// batchingProblems is the rule of the batching section that speaks of
// the command line: turning batching on names the models to batch.
func batchingProblems(s batcher.Settings) []error {
	if s.Mode != batcher.Off.String() && !s.AllOff && len(s.Models) == 0 && !s.Auto {
		return []error{errors.New("config: batching.models: required when batching is on: name the batchable models with --batch-models or batching.models, or say auto (--batch-models auto, batching.auto: true)")}
	}
	return nil
}

// setBatchingMode is --batching: the global mode; "off" turns off every
// model, whatever the file says.
func setBatchingMode(c *Config, v string) error {
	c.Batching.Mode = strings.ToLower(v)
	c.Batching.AllOff = c.Batching.Mode == batcher.Off.String()
	return nil
}

// addBatchModels is --batch-models: models batched with the global
// values, besides those of the file.
func addBatchModels(c *Config, v string) error {
	for _, m := range strings.Split(v, ",") {
		if m = strings.TrimSpace(m); m == "" {
			continue
		}
		if m == "auto" {
			// The models the upstream's own config says batch.
			c.Batching.Auto = true
			continue
		}
		if c.Batching.Models == nil {
			c.Batching.Models = map[string]batcher.ModelSettings{}
		}
		if _, ok := c.Batching.Models[m]; !ok {
			c.Batching.Models[m] = batcher.ModelSettings{}
		}
	}
	return nil
}

// setPreferredSizes is --batch-preferred-sizes, a comma list.
func setPreferredSizes(c *Config, v string) error {
	var sizes []int
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("%q is not a list of sizes", v)
		}
		sizes = append(sizes, n)
	}
	slices.Sort(sizes)
	c.Batching.PreferredSizes = sizes
	return nil
}

// newBatcher returns the batcher for c, or nil when no model is batched.
func newBatcher(s batcher.Settings, opts ...batcher.Option) (*batcher.Batcher, error) {
	cfg := s.Config()
	if len(cfg.Models) == 0 && cfg.Auto == nil {
		return nil, nil
	}
	return batcher.New(cfg, opts...)
}

// batchingJSON is the body of GET /api/v1/batching.
func batchingJSON(b *batcher.Batcher) any {
	type modelJSON struct {
		Model           string  `json:"model"`
		Mode            string  `json:"mode"`
		MaxSize         int     `json:"max_size"`
		PreferredSizes  []int   `json:"preferred_sizes,omitempty"`
		MaxDelaySeconds float64 `json:"max_delay_seconds"`
		QueueSize       int     `json:"queue_size"`
		SLOSeconds      float64 `json:"slo_seconds"`
		Slots           int     `json:"slots"`
		RetryUnbatched  bool    `json:"retry_unbatched"`
		Shed            bool    `json:"shed"`
		batcher.ModelSource
		Queues []batcher.QueueStats `json:"queues"`
	}
	out := struct {
		Models []modelJSON `json:"models"`
	}{Models: []modelJSON{}}
	if b == nil {
		return out
	}
	queues := b.Stats()
	pols := b.Policies()
	sources := b.Sources()
	for _, name := range sortedKeys(pols) {
		p := pols[name]
		m := modelJSON{
			Model: name, Mode: p.Mode.String(), MaxSize: p.MaxSize, PreferredSizes: p.PreferredSizes,
			MaxDelaySeconds: p.MaxDelay.Seconds(), QueueSize: p.QueueSize, SLOSeconds: p.SLO.Seconds(),
			Slots: p.Slots, RetryUnbatched: p.RetryUnbatched, Shed: p.Shed, ModelSource: sources[name], Queues: []batcher.QueueStats{},
		}
		for _, q := range queues {
			if q.Model == name {
				m.Queues = append(m.Queues, q)
			}
		}
		out.Models = append(out.Models, m)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// startBatcher returns the batcher for c with its metrics registered on
// reg, or nil when no model is batched. Closing a nil one is a no-op.
func startBatcher(c batcher.Settings, reg prometheus.Registerer, log *slog.Logger) (*batcher.Batcher, error) {
	b, err := newBatcher(c, batcher.WithLogger(log))
	if err != nil || b == nil {
		return nil, err
	}
	if err := b.Register(reg); err != nil {
		b.Close()
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return b, nil
}
