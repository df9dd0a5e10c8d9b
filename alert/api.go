package alert

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// AlertView is one active alert on the admin API.
type AlertView struct {
	Name        string            `json:"name"`
	Fingerprint string            `json:"fingerprint"`
	State       State             `json:"state"`
	Severity    string            `json:"severity"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations,omitempty"`
	ActiveSince time.Time         `json:"active_since"`
	FiringSince time.Time         `json:"firing_since,omitzero"`
	// Value is the value that fired (the worst while the condition
	// held), at ValueAt; Threshold its bound; Current the same
	// condition's value now.
	Value     string    `json:"value,omitempty"`
	ValueAt   time.Time `json:"value_at,omitzero"`
	Threshold string    `json:"threshold,omitempty"`
	Current   string    `json:"current,omitempty"`
	// ResolvesAt is when a firing alert whose condition no longer
	// holds resolves if it stays so (keep_firing_for after its last
	// bad evaluation).
	ResolvesAt time.Time `json:"resolves_at,omitzero"`
	Evidence   Evidence  `json:"evidence"`
	Muted      string    `json:"muted,omitempty"`
}

// Alerts returns the active (pending and firing) alerts, sorted by name
// and fingerprint.
func (e *Engine) Alerts() []AlertView {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]AlertView, 0, len(e.alerts))
	for _, a := range e.alerts {
		if a.state == StateResolved {
			continue
		}
		out = append(out, AlertView{
			Name: a.rule.Name, Fingerprint: a.fp, State: a.state, Severity: a.labels["severity"],
			Labels: a.labels, Annotations: a.annotations, ActiveSince: a.activeSince, FiringSince: a.firedAt,
			Value: a.value, ValueAt: a.valueAt, Threshold: a.threshold, Current: a.current, ResolvesAt: a.resolvesAt(),
			Evidence: a.evidence, Muted: e.muted[a.fp],
		})
	}
	slices.SortFunc(out, func(x, y AlertView) int {
		if c := strings.Compare(x.Name, y.Name); c != 0 {
			return c
		}
		return strings.Compare(x.Fingerprint, y.Fingerprint)
	})
	return out
}

// RuleView is one rule on the admin API.
type RuleView struct {
	RuleConfig `json:",inline"`
	Builtin    bool `json:"builtin"`
	PerGPU     bool `json:"per_gpu"`
	Active     int  `json:"active"`
}

// Rules returns the rules in file order.
func (e *Engine) Rules() []RuleView {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []RuleView
	for _, r := range e.cfg.rules {
		v := RuleView{RuleConfig: r.Config, Builtin: e.cfg.builtin, PerGPU: r.PerGPU}
		for _, a := range e.alerts {
			if a.rule == r && a.state != StateResolved {
				v.Active++
			}
		}
		out = append(out, v)
	}
	return out
}

// Silences returns the silences.
func (e *Engine) Silences() []Silence { return e.silences.all() }

// AddSilence validates and stores a silence, returning its ID.
func (e *Engine) AddSilence(s Silence) (string, error) {
	if err := s.Validate(e.opts.Now()); err != nil {
		return "", err
	}
	id, err := e.silences.add(s)
	if err == nil {
		e.mu.Lock()
		e.persist.dirty = true
		e.mu.Unlock()
	}
	return id, err
}

// ErrNotFiring is what Ack returns for an alert that is not firing.
var ErrNotFiring = errors.New("only a firing alert can be acknowledged")

// Ack acknowledges a firing alert: a silence of it until it resolves. A
// second ack of the same alert returns the first one's silence. A pending
// alert cannot be acknowledged: its silence would end at once (it lasts
// while the alert fires), and the alert would page when it fires.
func (e *Engine) Ack(fp, by, comment string) (string, error) {
	e.mu.Lock()
	a := e.alerts[fp]
	var labels map[string]string
	var state State
	if a != nil {
		labels, state = a.labels, a.state
	}
	e.mu.Unlock()
	if a == nil {
		return "", fmt.Errorf("no active alert %q", fp)
	}
	if state != StateFiring {
		return "", fmt.Errorf("alert %q is %s: %w (add a silence for it instead)", fp, state, ErrNotFiring)
	}
	for _, s := range e.silences.all() {
		if s.UntilResolved == fp {
			return s.ID, nil
		}
	}
	var ms []Matcher
	for _, k := range []string{"alertname", "model", "gpu"} {
		if v, ok := labels[k]; ok {
			ms = append(ms, Matcher{Name: k, Value: v})
		}
	}
	return e.AddSilence(Silence{Matchers: ms, UntilResolved: fp, CreatedBy: by, Comment: comment})
}

// RemoveSilence removes silence id and reports whether there was one.
func (e *Engine) RemoveSilence(id string) bool {
	if !e.silences.remove(id) {
		return false
	}
	e.mu.Lock()
	e.persist.dirty = true
	e.mu.Unlock()
	return true
}

// Baselines are the per-model baselines, their bands and history.
func (e *Engine) Baselines() any { return e.opts.Baselines.Infos() }
