package batcher

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Mode says how a model's requests are batched.
type Mode uint8

const (
	// Off passes requests through unbatched.
	Off Mode = iota
	// Static follows Triton's dynamic batcher: max size, preferred sizes,
	// max queue delay.
	Static
	// Adaptive dispatches whenever an execution slot is free, up to a target
	// size chosen from the SLO and the measured latency and arrival rate.
	Adaptive
)

// String returns "off", "static" or "adaptive".
func (m Mode) String() string {
	switch m {
	case Off:
		return "off"
	case Static:
		return "static"
	case Adaptive:
		return "adaptive"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// ParseMode reads "off", "static" or "adaptive".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "off":
		return Off, nil
	case "static":
		return Static, nil
	case "adaptive":
		return Adaptive, nil
	}
	return Off, fmt.Errorf("batcher: mode must be off, static or adaptive, got %q", s)
}

// Defaults of Policy's zero fields.
const (
	DefaultMaxSize   = 32
	DefaultQueueSize = 1024
	DefaultSLO       = 50 * time.Millisecond
	DefaultSlots     = 1
	// MaxBatchSize bounds MaxSize and preferred sizes.
	MaxBatchSize = 4096
)

// Policy is how one model's requests are batched. Zero fields mean the
// documented defaults.
type Policy struct {
	// Mode is Static or Adaptive; Off leaves the model unbatched.
	Mode Mode
	// MaxSize is the largest batch, in rows (the batch dimension). Zero
	// means DefaultMaxSize. A single request with more rows is sent alone,
	// unbatched.
	MaxSize int
	// PreferredSizes (static) are batch sizes dispatched at once when they
	// can be formed, like Triton's preferred_batch_size. Empty: none.
	PreferredSizes []int
	// MaxDelay (static) is the longest the oldest request waits for a batch
	// to fill. Zero means no wait (Triton's default).
	MaxDelay time.Duration
	// QueueSize caps the requests waiting in one queue; beyond it a request
	// is rejected at once with RESOURCE_EXHAUSTED. Zero means
	// DefaultQueueSize.
	QueueSize int
	// SLO (adaptive) is the p99 latency target of a request. Zero means
	// DefaultSLO.
	SLO time.Duration
	// Slots is the number of batches sent to the upstream at once: its
	// execution slots for the model. Zero means DefaultSlots.
	Slots int
	// RetryUnbatched retries each request of a failed batch on its own
	// instead of giving every caller the batch's error.
	RetryUnbatched bool
	// Shed (adaptive) turns the SLO into admission control: a request
	// whose predicted answer (the batches ahead of it at the fitted
	// latency, then its own) comes later than the SLO is rejected at once
	// with RESOURCE_EXHAUSTED, and a queued request whose wait has used up
	// the SLO is answered the same instead of being sent late. Off: every
	// request is sent, the late ones after the fresh ones.
	Shed bool
}

// withDefaults returns p with its zero fields filled.
func (p Policy) withDefaults() Policy {
	if p.MaxSize == 0 {
		p.MaxSize = DefaultMaxSize
	}
	if p.QueueSize == 0 {
		p.QueueSize = DefaultQueueSize
	}
	if p.SLO == 0 {
		p.SLO = DefaultSLO
	}
	if p.Slots == 0 {
		p.Slots = DefaultSlots
	}
	return p
}

// Problem is one invalid field of a Policy, named as in the YAML file
// (max_size, preferred_sizes, ...).
type Problem struct {
	Field, Reason string
}

// WithDefaults returns p with its zero fields filled: DefaultMaxSize,
// DefaultQueueSize, DefaultSLO, DefaultSlots.
func (p Policy) WithDefaults() Policy { return p.withDefaults() }

// Problems returns every problem of a policy whose defaults are filled
// (WithDefaults). The batcher's rules live here alone: configuration
// front ends map their fields to a Policy and report these.
func (p Policy) Problems() []Problem {
	var out []Problem
	bad := func(field, format string, args ...any) {
		out = append(out, Problem{field, fmt.Sprintf(format, args...)})
	}
	if p.Mode > Adaptive {
		bad("mode", "must be off, static or adaptive, got %s", p.Mode)
	}
	if p.MaxSize < 1 || p.MaxSize > MaxBatchSize {
		bad("max_size", "must be between 1 and %d, got %d", MaxBatchSize, p.MaxSize)
	}
	for _, s := range p.PreferredSizes {
		if s < 1 || s > p.MaxSize {
			bad("preferred_sizes", "each must be between 1 and max_size %d, got %d", p.MaxSize, s)
			break
		}
	}
	if p.MaxDelay < 0 {
		bad("max_delay", "must not be negative, got %s", p.MaxDelay)
	}
	if p.QueueSize < 1 {
		bad("queue_size", "must be positive, got %d", p.QueueSize)
	}
	if p.SLO <= 0 {
		bad("slo", "must be positive, got %s", p.SLO)
	}
	if p.Slots < 1 || p.Slots > MaxSlots {
		bad("slots", "must be between 1 and %d, got %d", MaxSlots, p.Slots)
	}
	return out
}

// MaxSlots is the most execution slots a model's policy may have.
const MaxSlots = 1024

// Config lists the batchable models. A model that is not listed, or listed
// with Mode Off, is never batched.
type Config struct {
	// Models maps a model name to its policy.
	Models map[string]Policy
	// Auto, when set and not Off, is the policy of every model the
	// upstream says batches (SetLimits), besides Models.
	Auto *Policy
	// KeyHeaders are request metadata keys (lower case) whose values
	// split the queue: calls that differ in one (a tenant, a priority)
	// are never merged, and the merged call carries the value they share.
	// authorization always splits.
	KeyHeaders []string
	// NonIdempotent lists models whose calls must never reach the
	// upstream twice (a route's idempotent: false): for them a failed
	// batch's error goes to each caller (RetryUnbatched is off, and so is
	// the retry alone after INVALID_ARGUMENT), and an answer that cannot
	// be split fails each caller (INTERNAL) instead of being asked again.
	// It holds for configured and auto models alike.
	NonIdempotent map[string]bool
}

// Validate fills defaults in c and returns every problem, each naming the
// model and field ("batcher: model \"resnet50\": max_size: ...").
func (c *Config) Validate() error {
	var errs []error
	for name, p := range c.Models {
		p = p.withDefaults()
		c.Models[name] = p
		for _, pr := range p.Problems() {
			errs = append(errs, fmt.Errorf("batcher: model %q: %s: %s", name, pr.Field, pr.Reason))
		}
	}
	if c.Auto != nil {
		p := c.Auto.withDefaults()
		c.Auto = &p
		for _, pr := range p.Problems() {
			errs = append(errs, fmt.Errorf("batcher: auto models: %s: %s", pr.Field, pr.Reason))
		}
	}
	sortErrors(errs)
	return errors.Join(errs...)
}

// sortErrors orders errs by text, for stable messages over map iteration.
func sortErrors(errs []error) {
	for i := 1; i < len(errs); i++ {
		for j := i; j > 0 && errs[j].Error() < errs[j-1].Error(); j-- {
			errs[j], errs[j-1] = errs[j-1], errs[j]
		}
	}
}

// DefaultMaxDelay is the max_delay of Settings. A Policy's zero MaxDelay
// means no wait; a YAML file that says nothing gets this short wait, which
// lets a static batch fill at moderate load.
const DefaultMaxDelay = time.Millisecond

// Settings is the batching section of a YAML file: global values, and
// per-model values that override them for that model. Start from
// DefaultSettings and decode over it, so that an explicit 0 is seen (and
// refused by Problems where 0 is not valid); Config turns it into the
// batcher's Config.
type Settings struct {
	// Mode is off, static or adaptive. Default off. A model's own mode
	// overrides it.
	Mode string `yaml:"mode"`
	// MaxSize is the largest batch in rows. Default DefaultMaxSize.
	MaxSize int `yaml:"max_size"`
	// PreferredSizes (static) are sizes sent as soon as they can be formed.
	PreferredSizes []int `yaml:"preferred_sizes"`
	// MaxDelay (static) is the longest the oldest request waits for a
	// batch to fill. Default DefaultMaxDelay; 0 means no wait.
	MaxDelay time.Duration `yaml:"max_delay"`
	// QueueSize caps waiting requests per queue. Default DefaultQueueSize.
	QueueSize int `yaml:"queue_size"`
	// SLO (adaptive) is the p99 latency target. Default DefaultSLO.
	SLO time.Duration `yaml:"slo"`
	// Slots is the upstream's execution slots per model. Default
	// DefaultSlots.
	Slots int `yaml:"slots"`
	// RetryUnbatched retries each request of a failed batch alone.
	RetryUnbatched bool `yaml:"retry_unbatched"`
	// Shed (adaptive) rejects with RESOURCE_EXHAUSTED the requests that
	// cannot be answered within the SLO (Policy.Shed). Default false.
	Shed bool `yaml:"shed"`
	// Models lists the batchable models with their own settings; a model
	// with no settings of its own uses the global values.
	Models map[string]ModelSettings `yaml:"models"`
	// Auto batches, with the global values, every model the upstream says
	// batches (Triton's model config: max_batch_size above 0), besides
	// Models. Default false.
	Auto bool `yaml:"auto"`
	// KeyHeaders are request headers whose values split batches (tenant,
	// priority): calls that differ in one are never merged. authorization
	// always splits. Default none.
	KeyHeaders []string `yaml:"key_headers"`
	// AllOff leaves every model unbatched, whatever its own mode: a front
	// end's explicit "off" for all (infergate's --batching off). It has no
	// YAML key.
	AllOff bool `yaml:"-"`
}

// ModelSettings overrides the global Settings for one model; nil fields
// inherit them.
type ModelSettings struct {
	Mode           string         `yaml:"mode"`
	MaxSize        *int           `yaml:"max_size"`
	PreferredSizes []int          `yaml:"preferred_sizes"`
	MaxDelay       *time.Duration `yaml:"max_delay"`
	QueueSize      *int           `yaml:"queue_size"`
	SLO            *time.Duration `yaml:"slo"`
	Slots          *int           `yaml:"slots"`
	RetryUnbatched *bool          `yaml:"retry_unbatched"`
	Shed           *bool          `yaml:"shed"`
}

// DefaultSettings returns the Settings of the documented defaults:
// batching off.
func DefaultSettings() Settings {
	return Settings{Mode: Off.String(), MaxSize: DefaultMaxSize, MaxDelay: DefaultMaxDelay,
		QueueSize: DefaultQueueSize, SLO: DefaultSLO, Slots: DefaultSlots}
}

// Problems returns one error per bad field, each starting with the field's
// YAML name: the global values as "max_size: ...", a model's as
// "models.<name>.max_size: ..." for the fields the model sets itself. The
// rules are Policy.Problems.
func (s Settings) Problems() []error {
	var errs []error
	report := func(prefix string, problems []Problem, keep func(field string) bool) {
		for _, pr := range problems {
			if keep(pr.Field) {
				errs = append(errs, fmt.Errorf("%s%s: %s", prefix, pr.Field, pr.Reason))
			}
		}
	}
	checkMode := func(field, v string) {
		if _, err := ParseMode(v); err != nil {
			errs = append(errs, fmt.Errorf("%s: must be off, static or adaptive, got %q", field, v))
		}
	}
	checkMode("mode", s.Mode)
	for i, k := range s.KeyHeaders {
		if k == "" || strings.ContainsAny(k, " \t:") {
			errs = append(errs, fmt.Errorf("key_headers[%d]: %q is not a header name", i, k))
		}
	}
	report("", s.policy(ModelSettings{}).Problems(), func(string) bool { return true })
	for _, name := range slices.Sorted(maps.Keys(s.Models)) {
		m := s.Models[name]
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
		report(prefix, s.policy(m).Problems(), func(field string) bool { return own[field] })
	}
	return errs
}

// policy returns a model's policy: its own values, the global ones where
// it sets none.
func (s Settings) policy(m ModelSettings) Policy {
	mode := s.Mode
	if m.Mode != "" {
		mode = m.Mode
	}
	p := Policy{
		MaxSize: s.MaxSize, PreferredSizes: s.PreferredSizes, MaxDelay: s.MaxDelay,
		QueueSize: s.QueueSize, SLO: s.SLO, Slots: s.Slots, RetryUnbatched: s.RetryUnbatched,
		Shed: s.Shed,
	}
	p.Mode, _ = ParseMode(mode)
	set(&p.MaxSize, m.MaxSize)
	set(&p.MaxDelay, m.MaxDelay)
	set(&p.QueueSize, m.QueueSize)
	set(&p.SLO, m.SLO)
	set(&p.Slots, m.Slots)
	set(&p.RetryUnbatched, m.RetryUnbatched)
	set(&p.Shed, m.Shed)
	if m.PreferredSizes != nil {
		p.PreferredSizes = m.PreferredSizes
	}
	return p
}

// set overrides *dst with *v when v is set.
func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// Config returns the batcher's Config: one policy per batched model,
// global values where the model sets none. Call it on Settings without
// Problems.
func (s Settings) Config() Config {
	cfg := Config{Models: map[string]Policy{}, KeyHeaders: s.KeyHeaders}
	if s.AllOff {
		return cfg
	}
	for name, m := range s.Models {
		if p := s.policy(m); p.Mode != Off {
			cfg.Models[name] = p
		}
	}
	if p := s.policy(ModelSettings{}); s.Auto && p.Mode != Off {
		cfg.Auto = &p
	}
	return cfg
}
