package release

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrNoRelease is returned by the admin methods for a model without a
// release.
var ErrNoRelease = errors.New("release: no release for this model")

// ErrFinished is returned when an operator acts on a release that was
// already promoted or rolled back.
var ErrFinished = errors.New("release: the release is finished (promoted or rolled back)")

func errUnknown(what, name string) error { return fmt.Errorf("release: unknown %s %q", what, name) }

// Option configures a Set.
type Option interface{ apply(*Set) }

type optionFunc func(*Set)

func (f optionFunc) apply(s *Set) { f(s) }

// WithClock sets the clock of operators' actions and of reloads (default
// time.Now); Judge takes its time as an argument.
func WithClock(now func() time.Time) Option { return optionFunc(func(s *Set) { s.now = now }) }

// WithRollback sets a function called after every rollback, automatic or
// an operator's (Decision.Manual), outside the Set's lock: the proxy
// raises its version_regression alert there with the decision's words.
func WithRollback(f func(Decision)) Option { return optionFunc(func(s *Set) { s.onRollback = f }) }

// WithClassNames sets how the evidence names an input-size class (e.g.
// "1-2 rows"); default "size class N".
func WithClassNames(f func(class int) string) Option {
	return optionFunc(func(s *Set) { s.className = f })
}

// Set holds every model's release. The pick reads an immutable table
// (Choose, Route) without a lock; decisions, reloads, the admin API and
// the state file take the Set's lock, off the call path.
type Set struct {
	table atomic.Pointer[table]

	mu         sync.Mutex
	rels       map[string]*Release
	now        func() time.Time
	onRollback func(Decision)
	className  func(int) string
	scratch    counts2
}

// New returns a Set of the releases specs; a bad spec is an error naming
// its field (targets are not looked up: call Problems with a Lookup for
// that).
func New(specs []Spec, opts ...Option) (*Set, error) {
	s := &Set{rels: map[string]*Release{}, now: time.Now,
		className: func(c int) string { return "size class " + strconv.Itoa(c) }}
	for _, o := range opts {
		o.apply(s)
	}
	s.table.Store(&table{})
	if err := s.Apply(specs); err != nil {
		return nil, err
	}
	return s, nil
}

// Apply replaces the releases with specs (a reload). A release whose
// model, targets, split and shadow are unchanged keeps its state and
// evidence and takes the new judgement settings; a changed one starts
// afresh, and its Status says why; a release no longer listed is gone.
// Nothing changes when a spec is bad.
func (s *Set) Apply(specs []Spec) error {
	if errs := Problems(specs, Lookup{}); len(errs) > 0 {
		return fmt.Errorf("release: %w", errors.Join(errs...))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now().Round(0) // saved in the state file: no monotonic reading
	rels := make(map[string]*Release, len(specs))
	for _, sp := range specs {
		sp = sp.WithDefaults()
		old := s.rels[sp.Model]
		if old != nil && sameRelease(old.spec, sp) {
			old.spec = sp
			rels[sp.Model] = old
			continue
		}
		r := newRelease(sp, now)
		if old != nil {
			r.reset = "the release changed at a reload (" + specChange(old.spec, sp) + "): started afresh"
		}
		rels[sp.Model] = r
	}
	s.rels = rels
	s.publish()
	return nil
}

// newRelease returns a release at its first step.
func newRelease(sp Spec, now time.Time) *Release {
	r := &Release{spec: sp, step: -1, j: newJudge(sp)}
	w := sp.Weight
	if len(sp.Steps) > 0 {
		r.step, w = 0, sp.Steps[0]
	}
	r.newStep(w, now)
	if w >= 100 {
		r.state = Promoted
	}
	return r
}

// sameRelease reports whether two specs split the same calls between the
// same targets, so that one's evidence holds for the other.
func sameRelease(a, b Spec) bool { return specChange(a, b) == "" }

// specChange names what differs between two releases' splits: "" if
// nothing that their evidence depends on.
func specChange(a, b Spec) string {
	var d []string
	if a.Stable != b.Stable {
		d = append(d, fmt.Sprintf("stable %s, now %s", a.Stable, b.Stable))
	}
	if a.Candidate != b.Candidate {
		d = append(d, fmt.Sprintf("candidate %s, now %s", a.Candidate, b.Candidate))
	}
	if a.Weight != b.Weight || !slices.Equal(a.Steps, b.Steps) {
		d = append(d, fmt.Sprintf("weight %g steps %v, now weight %g steps %v", a.Weight, a.Steps, b.Weight, b.Steps))
	}
	if a.Sticky != b.Sticky {
		d = append(d, fmt.Sprintf("sticky %q, now %q", a.Sticky, b.Sticky))
	}
	sa, sb := a.Shadow, b.Shadow
	if (sa == nil) != (sb == nil) || sa != nil && (sa.Target != sb.Target || sa.Fraction != sb.Fraction) {
		d = append(d, "the shadow changed")
	}
	if a.Judgement.TailQuantile != b.Judgement.TailQuantile {
		d = append(d, "tail_quantile changed")
	}
	return strings.Join(d, "; ")
}

// publish builds the table the pick reads from the releases' weights
// (called with s.mu held).
func (s *Set) publish() {
	t := &table{routes: make(map[string]*Route, len(s.rels))}
	for m, r := range s.rels {
		stable, cand := r.spec.Stable, r.spec.Candidate
		rt := &Route{rel: r, stable: &stable, cand: &cand, sticky: r.spec.Sticky}
		rt.threshold, rt.all = cut(r.weight / 100)
		if sh := r.spec.Shadow; sh != nil && r.state != RolledBack && !rt.all {
			target := sh.Target
			rt.shadow = &target
			rt.shadowAt, rt.shadowAll = cut(sh.Fraction)
		}
		t.routes[m] = rt
	}
	s.table.Store(t)
}

// Route returns a model's split, or nil when it has none. It reads the
// current table without a lock and allocates nothing.
func (s *Set) Route(model string) *Route { return s.table.Load().routes[model] }

// Choose splits one call of model (see Route.Choose): the zero Choice for
// a model without a release.
func (s *Set) Choose(model string, key []byte, named bool) Choice {
	rt := s.Route(model)
	if rt == nil {
		return Choice{}
	}
	return rt.Choose(key, named)
}

// Judge runs one judgement of every release at now (call it about once
// a second, off the call path) and returns the decisions that changed
// something: promotions, rollbacks, and holds at a step's time limit.
// A changed weight is in the table before Judge returns; the rollback
// hook runs after.
func (s *Set) Judge(now time.Time) []Decision {
	s.mu.Lock()
	var out []Decision
	for _, m := range slices.Sorted(maps.Keys(s.rels)) {
		if d := s.judgeOne(s.rels[m], now); d != nil {
			out = append(out, *d)
		}
	}
	if len(out) > 0 {
		s.publish()
	}
	hook := s.onRollback
	s.mu.Unlock()
	for _, d := range out {
		if d.Kind == Rollback && hook != nil {
			hook(d)
		}
	}
	return out
}

// act runs an operator's action on model's release under the lock.
func (s *Set) act(model string, f func(r *Release, now time.Time) (*Decision, error)) (Decision, error) {
	s.mu.Lock()
	r := s.rels[model]
	if r == nil {
		s.mu.Unlock()
		return Decision{}, fmt.Errorf("%w: %q", ErrNoRelease, model)
	}
	d, err := f(r, s.now().Round(0))
	if d != nil {
		s.publish()
	}
	hook := s.onRollback
	s.mu.Unlock()
	if err != nil || d == nil {
		return Decision{}, err
	}
	if d.Kind == Rollback && hook != nil {
		hook(*d)
	}
	return *d, nil
}

func running(r *Release) error {
	if r.state == RolledBack || r.state == Promoted {
		return fmt.Errorf("%w: %s is %s", ErrFinished, r.spec.Model, r.state)
	}
	return nil
}

// Pause stops the judgement of model's release from deciding anything;
// its evidence keeps growing.
func (s *Set) Pause(model string) error {
	_, err := s.act(model, func(r *Release, _ time.Time) (*Decision, error) {
		if err := running(r); err != nil {
			return nil, err
		}
		r.state = Paused
		return nil, nil
	})
	return err
}

// Resume lets a paused or held release be judged again; its step's time
// limit starts over.
func (s *Set) Resume(model string) error {
	_, err := s.act(model, func(r *Release, now time.Time) (*Decision, error) {
		if err := running(r); err != nil {
			return nil, err
		}
		r.state = Running
		r.stepStart = now
		return nil, nil
	})
	return err
}

// Promote moves model's release to its next step (or to 100%) now,
// whatever the evidence says.
func (s *Set) Promote(model string) (Decision, error) {
	return s.act(model, func(r *Release, now time.Time) (*Decision, error) {
		if err := running(r); err != nil {
			return nil, err
		}
		return r.promote(now, "", true), nil
	})
}

// Rollback sends the candidate of model's release nothing from now on;
// why (may be "") goes into the decision's words.
func (s *Set) Rollback(model, why string) (Decision, error) {
	return s.act(model, func(r *Release, now time.Time) (*Decision, error) {
		if err := running(r); err != nil {
			return nil, err
		}
		return r.rollback(now, why, true), nil
	})
}

// Status is one release as /api/v1/releases shows it.
type Status struct {
	Spec  Spec  `json:"spec"`
	State State `json:"state"`
	// Weight is the candidate's share now, in percent; Step its index
	// in Spec.Steps (-1 without steps).
	Weight      float64   `json:"weight"`
	Step        int       `json:"step"`
	StepStarted time.Time `json:"step_started"`
	// Evidence is the step's, as of the last judgement.
	Evidence Evidence `json:"evidence"`
	// Current is the latest judgement (a hold says what it needs).
	Current Decision `json:"current"`
	// History holds the decisions that changed the release, oldest first
	// (the last 100).
	History []Decision `json:"history"`
	// Reset says why the release started afresh at a reload or restore.
	Reset string `json:"reset,omitempty"`
}

// Status returns every release, by model.
func (s *Set) Status() []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Status
	for _, m := range slices.Sorted(maps.Keys(s.rels)) {
		r := s.rels[m]
		out = append(out, Status{Spec: r.spec, State: r.state, Weight: r.weight, Step: r.step, StepStarted: r.stepStart,
			Evidence: r.evidence, Current: r.current, History: slices.Clone(r.history), Reset: r.reset})
	}
	return out
}
