package proxy

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/metadata"

	"github.com/infergate/infergate/flow"
	"github.com/infergate/infergate/grpcwire"
	"github.com/infergate/infergate/proto/methods"
	"github.com/infergate/infergate/proto/wire"
	"github.com/infergate/infergate/proxy/flowstats"
)

// Flow control (package flow): when a model's replicas are full, who
// waits and who goes next is decided here, not by the model server's own
// queue. Each endpoint learns a concurrency limit per model from its
// answers' latency; each upstream has a gate per model whose capacity is
// the sum of its usable endpoints' limits. A unary inference call takes a
// turn from the gate before its endpoint is picked (at once while there
// is room), and gives it back when it ends. A call of a batched model
// takes it before the batcher's queue, and the gate's capacity is then
// the batcher's (batches in flight and forming, of its target size). The
// fast path relays a call only when it has room at once; one that must
// wait is served, and waits on the gRPC path.

// FlowSettings configure flow control; live (Proxy.SetFlowControl).
type FlowSettings struct {
	// Enabled turns it on.
	Enabled bool
	// TenantHeader names the request header saying whom a call is for
	// (lower case); a call without it is DefaultTenant's.
	TenantHeader  string
	DefaultTenant string
	// PriorityHeader names the request header carrying a call's band
	// (critical, standard, sheddable); without it, KServe's priority
	// parameter (1 critical, 2 standard, 3 and up sheddable) and then
	// DefaultBand decide ("" standard).
	PriorityHeader string
	DefaultBand    string
	// Weights are tenants' shares within a band against the others'
	// (default 1).
	Weights map[string]float64
	// MinShare is the least share of the calls sent that a band waiting
	// gets (flow.DefaultMinShare for zeros).
	MinShare [flow.NumBands]float64
	// MaxWaiting bounds the calls waiting per model and upstream.
	MaxWaiting int
}

// Defaults of FlowSettings.
const (
	DefaultTenantHeader   = grpcwire.HeaderTenant
	DefaultPriorityHeader = grpcwire.HeaderPriority
	DefaultTenant         = "default"
)

// maxGates bounds the gates of an upstream: model names are the
// clients'. Calls of models beyond it pass without flow control.
const maxGates = 1024

// maxTenantName bounds a tenant name kept (gates, metrics): a longer one
// counts as other.
const maxTenantName = 128

// flowState is the proxy's flow control: its settings and a generation
// that a reload bumps, so that upstreams make their gates anew.
type flowState struct {
	settings atomic.Pointer[flowConfig]
	// levels are the models' priority_levels, as their model configs
	// say (SetPriorityLevels): a call's band reaches the model server as
	// its priority parameter where it has them.
	levels atomic.Pointer[map[string]int]
}

// SetPriorityLevels takes the upstream's models' priority_levels (Triton's
// dynamic batcher; 0 or absent: none), read from their model configs.
// With flow control on, a ModelInfer call of such a model that carries
// no priority parameter is sent with its band's level: critical 1,
// standard 2, sheddable 3, at most the model's levels.
func (p *Proxy) SetPriorityLevels(levels map[string]int) { p.flow.levels.Store(&levels) }

// levelsOf is model's priority_levels; 0 none.
func (f *flowState) levelsOf(model string) int {
	if m := f.levels.Load(); m != nil {
		return (*m)[model]
	}
	return 0
}

// needsLevel says whether a call of method and model with request msg
// must reach the model server with its band's priority level added.
func (f *flowState) needsLevel(method, model string, msg []byte) bool {
	if method != methods.ModelInfer || f.levelsOf(model) == 0 {
		return false
	}
	_, has := wire.PriorityOf(msg)
	return !has
}

// flowConfig is one generation of settings.
type flowConfig struct {
	FlowSettings
	defaultBand flow.Band
	// batched is how many calls of a batched model an upstream takes
	// at once (the batcher's Capacity); nil without batching.
	batched func(upstream, model string) int
	// replaced: newer settings (or none) took over; its gates are gone
	// from /api/v1/flow.
	replaced atomic.Bool
}

// SetFlowControl applies s from the next call on. Calls waiting stay in
// the gates they wait in; new gates are made with the new settings.
func (p *Proxy) SetFlowControl(s FlowSettings) {
	if s.TenantHeader == "" {
		s.TenantHeader = DefaultTenantHeader
	}
	if s.PriorityHeader == "" {
		s.PriorityHeader = DefaultPriorityHeader
	}
	if s.DefaultTenant == "" {
		s.DefaultTenant = DefaultTenant
	}
	if !s.Enabled {
		p.flow.replace(nil)
		return
	}
	b, ok := flow.ParseBand(s.DefaultBand)
	if !ok {
		b = flow.Standard // checked by the configuration: "" only
	}
	cfg := &flowConfig{FlowSettings: s, defaultBand: b}
	if b, ok := p.batcher.(interface {
		Capacity(upstream, model string) int
	}); ok {
		cfg.batched = b.Capacity // *batcher.Batcher's: flow control in front of its queues
	}
	p.flow.replace(cfg)
}

// replace makes cfg the settings (nil: off); the gates of the ones it
// replaces are no longer shown (their calls finish in them).
func (f *flowState) replace(cfg *flowConfig) {
	if old := f.settings.Swap(cfg); old != nil {
		old.replaced.Store(true)
	}
}

// on is the current settings, nil when flow control is off.
func (f *flowState) on() *flowConfig { return f.settings.Load() }

// flowGates is an upstream's gates, by model, for one generation of
// settings.
type flowGates struct {
	cfg   *flowConfig
	gates map[string]*flow.Gate
}

// gate is u's gate for model under cfg; nil when u has maxGates already.
func (u *Upstream) gate(cfg *flowConfig, model string) *flow.Gate {
	if fg := u.gates.Load(); fg != nil && fg.cfg == cfg {
		if g := fg.gates[model]; g != nil {
			return g
		}
	}
	if !u.ModelHeld(model, time.Now().UnixNano()) {
		// No replica holds it (their model lists say so): its calls
		// get NOT_FOUND, and a made-up name must not take a gate.
		return nil
	}
	u.gatesMu.Lock()
	defer u.gatesMu.Unlock()
	old := u.gates.Load()
	next := &flowGates{cfg: cfg, gates: map[string]*flow.Gate{}}
	if old != nil && old.cfg == cfg {
		if g := old.gates[model]; g != nil {
			return g
		}
		if len(old.gates) >= maxGates {
			return nil
		}
		for k, v := range old.gates {
			next.gates[k] = v
		}
	}
	g := flow.NewGate(flow.GateOptions{
		Capacity:   func() int { return u.flowCapacity(cfg, model) },
		MaxWaiting: cfg.MaxWaiting,
		MinShare:   cfg.MinShare,
	})
	next.gates[model] = g
	u.gates.Store(next)
	u.CountPerModel()
	return g
}

// flowCapacity is how many calls of model u's endpoints may have in
// flight now: the batcher's capacity for a model it batches, else the
// sum of the usable endpoints' limits for it.
func (u *Upstream) flowCapacity(cfg *flowConfig, model string) int {
	if cfg.batched != nil {
		if n := cfg.batched(u.Name(), model); n > 0 {
			return n
		}
	}
	t := time.Now().UnixNano()
	list := u.Endpoints()
	held := model
	if len(list) > 1 && !u.ModelHeld(model, t) {
		held = ""
	}
	n := 0
	for _, e := range list {
		if len(list) > 1 && !e.UsableFor(held, t) {
			continue
		}
		n += e.FlowLimit(model)
	}
	return max(n, flow.MinLimit)
}

// flowCall is who call c is for, read from its metadata (md, the gRPC
// path) or its header fields (hdr, the fast path), and its request msg
// (KServe's priority parameter).
func (cfg *flowConfig) flowCall(md metadata.MD, hdr []hpack.HeaderField, msg []byte, deadline time.Time) flow.Call {
	c := flow.Call{Tenant: cfg.DefaultTenant, Band: cfg.defaultBand, Deadline: deadline}
	tenant, band := "", ""
	if md != nil {
		if v := md.Get(cfg.TenantHeader); len(v) > 0 {
			tenant = v[0]
		}
		if v := md.Get(cfg.PriorityHeader); len(v) > 0 {
			band = v[0]
		}
	}
	for _, f := range hdr {
		switch f.Name {
		case cfg.TenantHeader:
			tenant = f.Value
		case cfg.PriorityHeader:
			band = f.Value
		}
	}
	if tenant != "" && len(tenant) <= maxTenantName {
		c.Tenant = tenant
	} else if tenant != "" {
		c.Tenant = flowstats.OtherTenant // a name that long is no tenant's: it must not be kept
	}
	if b, ok := flow.ParseBand(band); ok {
		c.Band = b
	} else if p, ok := wire.PriorityOf(msg); ok && p > 0 {
		c.Band = flow.Band(min(p-1, uint64(flow.Sheddable)))
	}
	c.Weight = cfg.Weights[c.Tenant]
	return c
}

// flowError is a call flow control refused: RESOURCE_EXHAUSTED naming
// why, and no evidence against the upstream.
type flowError struct {
	model string
	err   error
	// timeout, when set, is the proxy's upstream timeout that stood
	// for the deadline of a call that carried none.
	timeout time.Duration
}

func (e *flowError) Error() string {
	if e.timeout > 0 && errors.Is(e.err, flow.ErrDeadline) {
		return fmt.Sprintf("flow control: model %s: %v (the call carried no deadline: the proxy's upstream timeout of %s is its deadline)",
			e.model, e.err, e.timeout)
	}
	return fmt.Sprintf("flow control: model %s: %v", e.model, e.err)
}

// pushbackKey is gRPC's retry pushback trailer (gRFC A6): a client whose
// retry policy covers the status waits this many milliseconds before
// its next attempt.
const pushbackKey = "grpc-retry-pushback-ms"

// pushback is the trailer for err, flow control's refusal, that tells
// the client when to try again (the retry pushback): about when the calls
// waiting now have gone. nil for any other error.
func pushback(err error) metadata.MD {
	var r *flow.Refusal
	if !errors.As(err, &r) {
		return nil
	}
	return metadata.Pairs(pushbackKey, strconv.FormatInt(max(r.RetryAfter.Milliseconds(), 1), 10))
}

func (e *flowError) Unwrap() error { return e.err }

// refusedByFlow says whether err is flow control's refusal (a function of
// its own: the target errors.As takes escapes, and so is allocated only
// when a call failed).
func refusedByFlow(err error) bool {
	var fe *flowError
	return errors.As(err, &fe)
}

// gatesOf returns a snapshot of u's gates by model, under the current
// settings (none once flow control is off or its settings changed,
// until calls make new ones).
func (u *Upstream) gatesOf() map[string]*flow.Gate {
	if fg := u.gates.Load(); fg != nil && !fg.cfg.replaced.Load() {
		return fg.gates
	}
	return nil
}

// FlowTenants returns the tenants' state, other last.
func (p *Proxy) FlowTenants() []flowstats.TenantStatus { return p.flowStats.Status() }

// FlowCollector returns flow control's metrics, to register once.
func (p *Proxy) FlowCollector() prometheus.Collector {
	return flowstats.NewCollector(&p.flowStats, func(yield func(upstream, model string, g *flow.Gate)) {
		for _, up := range p.flowUpstreams() {
			for model, g := range up.gatesOf() {
				yield(up.Name(), model, g)
			}
		}
	})
}

// Flow returns every gate's state, by upstream in the order configured
// (the router's upstreams, or the director's one), then by model.
func (p *Proxy) Flow() []flowstats.GateStatus {
	out := []flowstats.GateStatus{}
	for _, up := range p.flowUpstreams() {
		gates := up.gatesOf()
		for _, model := range slices.Sorted(maps.Keys(gates)) {
			out = append(out, flowstats.StatusOf(up.Name(), model, gates[model], up.Endpoints()))
		}
	}
	return out
}

// flowUpstreams are the upstreams that may have gates: the router's, or
// the director's one.
func (p *Proxy) flowUpstreams() []*Upstream {
	if p.router != nil {
		var ups []*Upstream
		for _, up := range p.router.Upstreams() {
			if u, ok := up.(*Upstream); ok {
				ups = append(ups, u)
			}
		}
		return ups
	}
	if fd, ok := p.director.(fixedDirector); ok {
		return []*Upstream{fd.fixed()}
	}
	return nil
}
