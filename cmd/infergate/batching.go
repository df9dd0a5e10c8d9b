package main

import (
	"flag"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/infergate/infergate/batcher"
)

// BatchingConfig is the batching section: global values, and per-model
// values that override them for that model. Flags set the global values.
type BatchingConfig struct {
	// Mode is off, static or adaptive. Default off. A model's own mode
	// overrides it; the flag --batching off turns batching off for all.
	Mode string `yaml:"mode"`
	// MaxSize is the largest batch in rows. Default 32.
	MaxSize int `yaml:"max_size"`
	// PreferredSizes (static) are sizes sent as soon as they can be formed.
	PreferredSizes []int `yaml:"preferred_sizes"`
	// MaxDelay (static) is the longest the oldest request waits for a
	// batch to fill. Default 1ms.
	MaxDelay *time.Duration `yaml:"max_delay"`
	// QueueSize caps waiting requests per queue. Default 1024.
	QueueSize int `yaml:"queue_size"`
	// SLO (adaptive) is the p99 latency target. Default 50ms.
	SLO time.Duration `yaml:"slo"`
	// Slots is the upstream's execution slots per model. Default 1.
	Slots int `yaml:"slots"`
	// RetryUnbatched retries each request of a failed batch alone.
	RetryUnbatched bool `yaml:"retry_unbatched"`
	// Models lists the batchable models with their own settings; a model
	// named only by --batch-models uses the global values.
	Models map[string]ModelBatching `yaml:"models"`

	// off is set by an explicit --batching off.
	off bool
}

// ModelBatching overrides the global batching values for one model; unset
// fields inherit them.
type ModelBatching struct {
	Mode           string         `yaml:"mode"`
	MaxSize        *int           `yaml:"max_size"`
	PreferredSizes []int          `yaml:"preferred_sizes"`
	MaxDelay       *time.Duration `yaml:"max_delay"`
	QueueSize      *int           `yaml:"queue_size"`
	SLO            *time.Duration `yaml:"slo"`
	Slots          *int           `yaml:"slots"`
	RetryUnbatched *bool          `yaml:"retry_unbatched"`
}

const (
	defaultBatchMaxDelay = time.Millisecond
)

// validate fills the global defaults and returns every problem, each
// naming its field as the user wrote it. The rules are the batcher's
// (batcher.Policy.Problems); this only maps fields and names them: the
// global values as batching.<field>, and a model's as
// batching.models.<name>.<field> for the fields the model sets itself.
func (c *BatchingConfig) validate() []error {
	if c.Mode == "" {
		c.Mode = "off"
	}
	if c.MaxDelay == nil {
		d := defaultBatchMaxDelay
		c.MaxDelay = &d
	}
	global := batcher.Policy{
		MaxSize: c.MaxSize, PreferredSizes: c.PreferredSizes, MaxDelay: *c.MaxDelay,
		QueueSize: c.QueueSize, SLO: c.SLO, Slots: c.Slots,
	}.WithDefaults()
	c.MaxSize, c.QueueSize, c.SLO, c.Slots = global.MaxSize, global.QueueSize, global.SLO, global.Slots

	var errs []error
	report := func(prefix string, problems []batcher.Problem, keep func(field string) bool) {
		for _, pr := range problems {
			if keep(pr.Field) {
				errs = append(errs, fmt.Errorf("config: batching.%s%s: %s", prefix, pr.Field, pr.Reason))
			}
		}
	}
	checkMode := func(field, v string) {
		if _, err := batcher.ParseMode(v); err != nil {
			errs = append(errs, fmt.Errorf("config: batching.%s: must be off, static or adaptive, got %q", field, v))
		}
	}
	checkMode("mode", c.Mode)
	report("", global.Problems(), func(string) bool { return true })
	for _, name := range sortedKeys(c.Models) {
		m := c.Models[name]
		prefix := "models." + name + "."
		if m.Mode != "" {
			checkMode(prefix+"mode", m.Mode)
		}
		own := map[string]bool{
			"max_size": m.MaxSize != nil, "max_delay": m.MaxDelay != nil, "queue_size": m.QueueSize != nil,
			"slo": m.SLO != nil, "slots": m.Slots != nil,
			// The global preferred sizes are judged against the model's
			// own max size.
			"preferred_sizes": m.PreferredSizes != nil || m.MaxSize != nil,
		}
		report(prefix, c.policy(m).Problems(), func(field string) bool { return own[field] })
	}
	if len(errs) == 0 && c.Mode != "off" && !c.off && len(c.Models) == 0 {
		errs = append(errs, fmt.Errorf("config: batching.models: required when batching is on: name the batchable models with --batch-models or batching.models"))
	}
	return errs
}

// policy returns a model's policy: its own values, the global ones where
// it sets none.
func (c *BatchingConfig) policy(m ModelBatching) batcher.Policy {
	mode := c.Mode
	if m.Mode != "" {
		mode = m.Mode
	}
	p := batcher.Policy{
		MaxSize: c.MaxSize, PreferredSizes: c.PreferredSizes, MaxDelay: *c.MaxDelay,
		QueueSize: c.QueueSize, SLO: c.SLO, Slots: c.Slots, RetryUnbatched: c.RetryUnbatched,
	}
	p.Mode, _ = batcher.ParseMode(mode)
	if m.MaxSize != nil {
		p.MaxSize = *m.MaxSize
	}
	if m.PreferredSizes != nil {
		p.PreferredSizes = m.PreferredSizes
	}
	if m.MaxDelay != nil {
		p.MaxDelay = *m.MaxDelay
	}
	if m.QueueSize != nil {
		p.QueueSize = *m.QueueSize
	}
	if m.SLO != nil {
		p.SLO = *m.SLO
	}
	if m.Slots != nil {
		p.Slots = *m.Slots
	}
	if m.RetryUnbatched != nil {
		p.RetryUnbatched = *m.RetryUnbatched
	}
	return p
}

// policies returns the batcher's config: one policy per model, global
// values where the model sets none. Call after validate.
func (c *BatchingConfig) policies() batcher.Config {
	cfg := batcher.Config{Models: map[string]batcher.Policy{}}
	if c.off {
		return cfg
	}
	for name, m := range c.Models {
		if p := c.policy(m); p.Mode != batcher.Off {
			cfg.Models[name] = p
		}
	}
	return cfg
}

// newBatcher returns the batcher for c, or nil when no model is batched.
func newBatcher(c BatchingConfig, opts ...batcher.Option) (*batcher.Batcher, error) {
	cfg := c.policies()
	if len(cfg.Models) == 0 {
		return nil, nil
	}
	return batcher.New(cfg, opts...)
}

// batchingJSON is the body of GET /api/v1/batching.
func batchingJSON(b *batcher.Batcher) any {
	type modelJSON struct {
		Model           string               `json:"model"`
		Mode            string               `json:"mode"`
		MaxSize         int                  `json:"max_size"`
		PreferredSizes  []int                `json:"preferred_sizes,omitempty"`
		MaxDelaySeconds float64              `json:"max_delay_seconds"`
		QueueSize       int                  `json:"queue_size"`
		SLOSeconds      float64              `json:"slo_seconds"`
		Slots           int                  `json:"slots"`
		RetryUnbatched  bool                 `json:"retry_unbatched"`
		Queues          []batcher.QueueStats `json:"queues"`
	}
	out := struct {
		Models []modelJSON `json:"models"`
	}{Models: []modelJSON{}}
	if b == nil {
		return out
	}
	queues := b.Stats()
	pols := b.Policies()
	for _, name := range sortedKeys(pols) {
		p := pols[name]
		m := modelJSON{
			Model: name, Mode: p.Mode.String(), MaxSize: p.MaxSize, PreferredSizes: p.PreferredSizes,
			MaxDelaySeconds: p.MaxDelay.Seconds(), QueueSize: p.QueueSize, SLOSeconds: p.SLO.Seconds(),
			Slots: p.Slots, RetryUnbatched: p.RetryUnbatched, Queues: []batcher.QueueStats{},
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

// batchingFlags are the --batch* flags.
type batchingFlags struct {
	mode, models, preferred *string
	maxSize, queueSize      *int
	slots                   *int
	maxDelay, slo           *time.Duration
}

func addBatchingFlags(fs *flag.FlagSet) *batchingFlags {
	return &batchingFlags{
		mode:      fs.String("batching", "off", "batch ModelInfer/Predict calls: off, static or adaptive"),
		models:    fs.String("batch-models", "", "comma-separated batchable models (batch dimension 0)"),
		maxSize:   fs.Int("batch-max-size", batcher.DefaultMaxSize, "largest batch, in rows"),
		preferred: fs.String("batch-preferred-sizes", "", "static: comma-separated batch sizes sent as soon as they can be formed"),
		maxDelay:  fs.Duration("batch-max-delay", defaultBatchMaxDelay, "static: longest the oldest request waits for a batch to fill"),
		queueSize: fs.Int("batch-queue-size", batcher.DefaultQueueSize, "waiting requests per model before RESOURCE_EXHAUSTED"),
		slo:       fs.Duration("batch-slo", batcher.DefaultSLO, "adaptive: p99 latency target per request"),
		slots:     fs.Int("batch-slots", batcher.DefaultSlots, "batches in flight per model (the upstream's execution slots)"),
	}
}

// apply sets the batching value of the flag named name, if it is one.
func (bf *batchingFlags) apply(name string, c *BatchingConfig, errs *[]error) {
	bad := func(format string, args ...any) {
		*errs = append(*errs, fmt.Errorf("config: --%s: %s", name, fmt.Sprintf(format, args...)))
	}
	switch name {
	case "batching":
		c.Mode = strings.ToLower(*bf.mode)
		c.off = c.Mode == "off"
	case "batch-models":
		for _, m := range strings.Split(*bf.models, ",") {
			if m = strings.TrimSpace(m); m == "" {
				continue
			}
			if c.Models == nil {
				c.Models = map[string]ModelBatching{}
			}
			if _, ok := c.Models[m]; !ok {
				c.Models[m] = ModelBatching{}
			}
		}
	case "batch-max-size":
		c.MaxSize = *bf.maxSize
	case "batch-preferred-sizes":
		c.PreferredSizes = nil
		for _, s := range strings.Split(*bf.preferred, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			n, err := strconv.Atoi(s)
			if err != nil {
				bad("%q is not a list of sizes", *bf.preferred)
				return
			}
			c.PreferredSizes = append(c.PreferredSizes, n)
		}
		slices.Sort(c.PreferredSizes)
	case "batch-max-delay":
		d := *bf.maxDelay
		c.MaxDelay = &d
	case "batch-queue-size":
		c.QueueSize = *bf.queueSize
	case "batch-slo":
		c.SLO = *bf.slo
	case "batch-slots":
		c.Slots = *bf.slots
	}
}

// startBatcher returns the batcher for c with its metrics registered on
// reg, or nil when no model is batched. Closing a nil one is a no-op.
func startBatcher(c BatchingConfig, reg prometheus.Registerer, log *slog.Logger) (*batcher.Batcher, error) {
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
