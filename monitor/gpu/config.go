package gpu

import (
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"
)

// Source kinds of SourceConfig.
const (
	// KindNVML reads the local driver (needs a cgo build).
	KindNVML = "nvml"
	// KindPrometheus scrapes a Triton, DCGM exporter or simserver metrics URL.
	KindPrometheus = "prometheus"
)

// Config is the gpu section of a YAML file: where GPU telemetry comes
// from, which model runs on which GPU, and the sampling period. Start from
// DefaultConfig and decode over it.
type Config struct {
	// Sources to sample; none means no GPU telemetry (cause hints are then
	// "unknown").
	Sources []SourceConfig `yaml:"sources"`
	// Models maps a model name to the UUID of the GPU it runs on; it wins
	// over what sources report (Triton's per-model gpu_uuid labels).
	Models map[string]string `yaml:"models"`
	// Interval is the correlation's sampling period and every source's
	// default. Default DefaultInterval; 0 is refused.
	Interval time.Duration `yaml:"interval"`
}

// SourceConfig is one GPU telemetry source.
type SourceConfig struct {
	// Kind is KindNVML or KindPrometheus, in any case.
	Kind string `yaml:"kind"`
	// Name labels the source in metrics (source="..."); empty means the
	// kind, with "_2", "_3" ... appended when kinds repeat.
	Name string `yaml:"name"`
	// URL is the metrics endpoint of a prometheus source.
	URL string `yaml:"url"`
	// Interval is the sampling period; 0 means Config.Interval.
	Interval time.Duration `yaml:"interval"`
	// Timeout bounds one sample; 0 means SamplerOptions' default (2s or
	// the interval, whichever is shorter, but at least 250ms).
	Timeout time.Duration `yaml:"timeout"`
}

// DefaultConfig returns the Config of the documented defaults: no sources,
// DefaultInterval.
func DefaultConfig() Config {
	return Config{Interval: DefaultInterval}
}

// Resolved returns c with the defaults that depend on other fields filled
// in every source: the kind in lower case, the interval, the name.
func (c Config) Resolved() Config {
	srcs := make([]SourceConfig, len(c.Sources))
	used := map[string]int{}
	for i, s := range c.Sources {
		s.Kind = strings.ToLower(s.Kind)
		if s.Interval == 0 {
			s.Interval = c.Interval
		}
		if s.Name == "" {
			s.Name = s.Kind
			if n := used[s.Kind]; n > 0 {
				s.Name = fmt.Sprintf("%s_%d", s.Kind, n+1)
			}
		}
		used[s.Kind]++
		srcs[i] = s
	}
	if c.Sources == nil {
		srcs = nil
	}
	c.Sources = srcs
	return c
}

// Problems returns one error per bad field, each starting with the field's
// YAML name ("sources[1].kind: must be nvml or prometheus, got ...").
func (c Config) Problems() []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	if c.Interval <= 0 {
		bad("interval", "must be positive, got %s", c.Interval)
	}
	names := map[string]bool{}
	for i, s := range c.Resolved().Sources {
		field := fmt.Sprintf("sources[%d]", i)
		switch s.Kind {
		case KindNVML:
			if s.URL != "" {
				bad(field+".url", "only for kind prometheus")
			}
		case KindPrometheus:
			if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				bad(field+".url", "must be an http(s) URL of a metrics endpoint, got %q", s.URL)
			}
		default:
			bad(field+".kind", "must be nvml or prometheus, got %q", s.Kind)
		}
		if s.Interval < 0 {
			bad(field+".interval", "must be positive, got %s", s.Interval)
		}
		if s.Timeout < 0 {
			bad(field+".timeout", "must be positive, got %s", s.Timeout)
		}
		if names[s.Name] {
			bad(field+".name", "duplicate source name %q", s.Name)
		}
		names[s.Name] = true
	}
	for m, u := range c.Models {
		if m == "" || u == "" {
			bad("models", "model names and GPU UUIDs must be set, got %q: %q", m, u)
		}
	}
	return errs
}

// Samplers returns a sampler of every source of c (which Problems found
// valid); log receives their state changes.
func (c Config) Samplers(log *slog.Logger) []*Sampler {
	var out []*Sampler
	for _, s := range c.Resolved().Sources {
		var src Source
		switch s.Kind {
		case KindNVML:
			src = NewNVML(log)
		case KindPrometheus:
			src = NewScrape(s.URL, nil)
		}
		out = append(out, NewSampler(src, SamplerOptions{Name: s.Name, Interval: s.Interval, Timeout: s.Timeout, Logger: log}))
	}
	return out
}
