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
	"github.com/infergate/infergate/proxy/route"
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

// newBatcher returns the batcher for c; with no model batched, one that
// batches nothing until a reload turns batching on (batchingStep): users
// tune batching first, and a restart for its first switch would drop
// every client connection. Such a batcher costs a call one atomic load
// and a lookup in an empty map (Handles); nothing is allocated.
// nonIdempotent are the models whose routes say idempotent: false: the
// batcher never sends their calls twice.
func newBatcher(s batcher.Settings, nonIdempotent map[string]bool, opts ...batcher.Option) (*batcher.Batcher, error) {
	cfg := s.Config()
	cfg.NonIdempotent = nonIdempotent
	return batcher.New(cfg, opts...)
}

// batchingOn reports whether s batches some model: models named, or the
// upstream's (auto).
func batchingOn(s batcher.Settings) bool {
	cfg := s.Config()
	return len(cfg.Models) > 0 || cfg.Auto != nil
}

// nonIdempotentModels are the models whose routes say idempotent: false.
func nonIdempotentModels(r route.RoutingConfig) map[string]bool {
	out := map[string]bool{}
	for _, rs := range r.Routes {
		if rs.Idempotent != nil && !*rs.Idempotent {
			out[rs.Model] = true
		}
	}
	return out
}

// idempotencyProblems refuses retry_unbatched for a batched model whose
// route says idempotent: false: the two settings contradict each other
// (a failed batch would send its calls a second time), and the batcher
// would have to ignore one. A model batched by batching.auto is not
// known until the upstream is asked; the batcher does not re-send its
// calls either, and idempotencyWarnings says so at start.
func idempotencyProblems(s batcher.Settings, r route.RoutingConfig) []error {
	var errs []error
	models := s.Config().Models
	for _, name := range sortedKeys(nonIdempotentModels(r)) {
		if p, ok := models[name]; ok && p.RetryUnbatched {
			errs = append(errs, fmt.Errorf("config: batching.models.%s.retry_unbatched: true, but routes[%s].idempotent: false: a failed batch would send the model's calls a second time; set retry_unbatched: false for it", name, name))
		}
	}
	return errs
}

// idempotencyWarnings logs, at start, the models batching.auto may batch
// with retry_unbatched whose routes say idempotent: false: for them
// retry_unbatched does not apply.
func idempotencyWarnings(s batcher.Settings, r route.RoutingConfig, log *slog.Logger) {
	cfg := s.Config()
	if cfg.Auto == nil || !cfg.Auto.RetryUnbatched {
		return
	}
	for _, name := range sortedKeys(nonIdempotentModels(r)) {
		if _, listed := cfg.Models[name]; !listed {
			log.Warn("batching: retry_unbatched does not apply to a model whose route says idempotent: false; if batching.auto batches it, a failed batch fails its callers", "model", name)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// startBatcher returns the batcher for c (newBatcher: built even when no
// model is batched) with its metrics registered on reg.
//
// replicas counts the endpoints of a pool holding a model (the router's):
// a queue runs its slots once per replica.
func startBatcher(c batcher.Settings, nonIdempotent map[string]bool, replicas func(upstream, model string) int,
	reg prometheus.Registerer, log *slog.Logger) (*batcher.Batcher, error) {
	b, err := newBatcher(c, nonIdempotent, batcher.WithLogger(log), batcher.WithReplicas(replicas))
	if err != nil {
		return nil, err
	}
	if err := b.Register(reg); err != nil {
		b.Close()
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return b, nil
}
