package main

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/infergate/infergate/flow"
	"github.com/infergate/infergate/grpcwire"
	"github.com/infergate/infergate/proxy"
)

// FlowControlConfig is the flow_control section: who waits when a
// model's replicas are full (docs/flow-control.md). Live: a reload
// applies it to the next calls.
type FlowControlConfig struct {
	// Enabled turns it on (--flow-control).
	Enabled bool `yaml:"enabled"`
	// TenantHeader names the request header saying whom a call is for;
	// a call without it is DefaultTenant's.
	TenantHeader  string `yaml:"tenant_header"`
	DefaultTenant string `yaml:"default_tenant"`
	// PriorityHeader names the request header carrying a call's
	// criticality (critical, standard, sheddable); without it, KServe's
	// priority parameter, then DefaultPriority.
	PriorityHeader  string `yaml:"priority_header"`
	DefaultPriority string `yaml:"default_priority"`
	// MinShare is the least share of the calls sent that a lower band
	// gets while it waits: standard and sheddable.
	MinShare map[string]float64 `yaml:"min_share"`
	// MaxWaiting bounds the calls waiting per model and upstream.
	MaxWaiting int `yaml:"max_waiting"`
	// Tenants are tenants' settings by name: weight, their share within
	// a band against the others' (default 1).
	Tenants map[string]TenantConfig `yaml:"tenants"`
}

// TenantConfig is one tenant's settings.
type TenantConfig struct {
	Weight float64 `yaml:"weight"`
}

// defaultFlowControl is the section's defaults.
func defaultFlowControl() FlowControlConfig {
	return FlowControlConfig{TenantHeader: proxy.DefaultTenantHeader, DefaultTenant: proxy.DefaultTenant,
		PriorityHeader: proxy.DefaultPriorityHeader, DefaultPriority: flow.Standard.String(), MaxWaiting: flow.DefaultMaxWaiting}
}

// Problems names each field that is wrong.
func (c FlowControlConfig) Problems() []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", field, fmt.Sprintf(format, args...)))
	}
	header := func(field, v string) {
		if v == "" {
			bad(field, "must not be empty")
		} else if err := grpcwire.CheckClientHeader(v); err != nil {
			bad(field, "%v", err)
		}
	}
	header("tenant_header", c.TenantHeader)
	header("priority_header", c.PriorityHeader)
	if c.DefaultTenant == "" {
		bad("default_tenant", "must not be empty")
	}
	if _, ok := flow.ParseBand(c.DefaultPriority); !ok {
		bad("default_priority", "must be critical, standard or sheddable, got %q", c.DefaultPriority)
	}
	for _, name := range slices.Sorted(maps.Keys(c.MinShare)) {
		b, ok := flow.ParseBand(name)
		switch v := c.MinShare[name]; {
		case !ok || b == flow.Critical:
			bad("min_share."+name, "only standard and sheddable have a minimum share")
		case !(v >= 0 && v <= 0.5):
			bad("min_share."+name, "must be between 0 and 0.5, got %g", v)
		}
	}
	if c.MaxWaiting < 1 || c.MaxWaiting > 1<<20 {
		bad("max_waiting", "must be between 1 and %d, got %d", 1<<20, c.MaxWaiting)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Tenants)) {
		if w := c.Tenants[name].Weight; !(w > 0 && w <= 1000) || math.IsInf(w, 0) {
			bad("tenants."+name+".weight", "must be above 0 and at most 1000, got %g", w)
		}
	}
	return errs
}

// settings is c as the proxy takes it.
func (c FlowControlConfig) settings() proxy.FlowSettings {
	s := proxy.FlowSettings{Enabled: c.Enabled, TenantHeader: strings.ToLower(c.TenantHeader), DefaultTenant: c.DefaultTenant,
		PriorityHeader: strings.ToLower(c.PriorityHeader), DefaultBand: strings.ToLower(c.DefaultPriority), MaxWaiting: c.MaxWaiting}
	for name, v := range c.MinShare {
		if b, ok := flow.ParseBand(name); ok {
			s.MinShare[b] = v
			if v == 0 {
				s.MinShare[b] = math.SmallestNonzeroFloat64 // 0 written: none (a zero means the default)
			}
		}
	}
	if len(c.Tenants) > 0 {
		s.Weights = map[string]float64{}
		for name, t := range c.Tenants {
			s.Weights[name] = t.Weight
		}
	}
	return s
}

// flowControlStep applies a changed flow_control section to the next
// calls; turned on, it starts reading the models' priority levels
// (discover, the batching discovery's: once).
func flowControlStep(p *proxy.Proxy, discover func()) reloadStep {
	return reloadStep{name: "flow control", prepare: func(old, next *Config) (func() string, func(), error) {
		if reflect.DeepEqual(old.FlowControl, next.FlowControl) {
			return nil, nil, nil
		}
		n := next.FlowControl
		return func() string {
			p.SetFlowControl(n.settings())
			if n.Enabled && discover != nil {
				discover()
			}
			if !n.Enabled {
				return "flow control off"
			}
			return fmt.Sprintf("flow control on: tenant header %s, priority header %s, default %s", n.TenantHeader, n.PriorityHeader, n.DefaultPriority)
		}, nil, nil
	}}
}
