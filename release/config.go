package release

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Defaults of a Spec's zero fields.
const (
	DefaultTailQuantile = 0.99
	DefaultAlpha        = 0.01
	// DefaultMinTail is the smallest rise of a latency quantile that
	// matters, in percent: the candidate's p50 or tail 10% above the
	// stable version's.
	DefaultMinTail = 10.0
	// DefaultMinErrors is the smallest rise of the error rate that
	// matters, in percentage points.
	DefaultMinErrors = 0.5
	// DefaultMinAgreement is the smallest drop of the shadow's agreement
	// with the stable answers that matters, in percentage points.
	DefaultMinAgreement = 1.0
	// DefaultMinCalls is the least number of candidate calls a step
	// takes before it may be promoted.
	DefaultMinCalls = 200
	// DefaultPower is the chance with which the regression tests must
	// have been able to catch the smallest change that matters before a
	// step is promoted on their silence.
	DefaultPower = 0.9
	// DefaultStepTimeLimit is how long a step waits for the evidence to
	// promote it before the release is held for an operator.
	DefaultStepTimeLimit = time.Hour
)

// StickySequence in Spec.Sticky keeps one Triton sequence (its
// sequence_id) on one version.
const StickySequence = "sequence_id"

// Spec is one release as written under releases: in the YAML file: a
// model's calls split between a stable target and a candidate. Zero
// fields mean the documented defaults (WithDefaults).
type Spec struct {
	// Model is the model whose calls the release splits.
	Model string `yaml:"model" json:"model"`
	// Stable is where calls go today; Candidate is the new target.
	Stable    Target `yaml:"stable" json:"stable"`
	Candidate Target `yaml:"candidate" json:"candidate"`
	// Weight is the candidate's share of the calls in percent (decimals
	// allowed), 0 to 100. Without steps it stays there: the judgement
	// may roll it back but never raises it.
	Weight float64 `yaml:"weight" json:"weight,omitempty"`
	// Steps are the weights the judgement advances through, strictly
	// increasing, each above 0 and at most 100 (e.g. [1, 5, 25, 50,
	// 100]); the release starts at the first. Passing the last one
	// promotes the candidate to 100%.
	Steps []float64 `yaml:"steps" json:"steps,omitempty"`
	// Sticky keeps one caller on one version: a request header's name
	// (lowercase, e.g. x-user) or "sequence_id". Empty: each call is
	// split on its own.
	Sticky string `yaml:"sticky" json:"sticky,omitempty"`
	// Shadow sends a copy of a fraction of the stable calls to a target
	// whose answers are compared, never returned.
	Shadow *Shadow `yaml:"shadow" json:"shadow,omitempty"`
	// Judgement says what matters and how sure a decision must be.
	Judgement Judgement `yaml:"judgement" json:"judgement"`
	// Idempotent (default true) lets a candidate call that fails before
	// answering be sent again to the stable version from the retry
	// budget; false means a failed call is the client's failure.
	Idempotent *bool `yaml:"idempotent" json:"idempotent,omitempty"`
}

// Target is where a share of the calls goes: exactly one of a version of
// the release's model, another model, or another upstream (a pool name
// the proxy resolves).
type Target struct {
	Version  string `yaml:"version" json:"version,omitempty"`
	Model    string `yaml:"model" json:"model,omitempty"`
	Upstream string `yaml:"upstream" json:"upstream,omitempty"`
}

// String names the target as the evidence does: "version 2", "model
// resnet50-trt" or "upstream gpu-b".
func (t Target) String() string {
	switch {
	case t.Version != "":
		return "version " + t.Version
	case t.Model != "":
		return "model " + t.Model
	case t.Upstream != "":
		return "upstream " + t.Upstream
	}
	return "nothing"
}

// Shadow is a copy of the calls sent to a target besides the client's.
type Shadow struct {
	// Target receives the copies; empty means the candidate.
	Target Target `yaml:"target" json:"target"`
	// Fraction of the stable calls copied, above 0 and at most 1.
	Fraction float64 `yaml:"fraction" json:"fraction"`
	// Compare is how answers are compared: "values" (default: the
	// largest absolute and relative difference of every output against
	// Tolerance) or "top1" (a classifier: the top class of each row).
	Compare string `yaml:"compare" json:"compare,omitempty"`
	// Tolerance is how far apart two values may be and still agree.
	Tolerance Tolerance `yaml:"tolerance" json:"tolerance"`
}

// Judgement holds the settings of the sequential test. Zero fields mean
// the defaults.
type Judgement struct {
	// TailQuantile is the tail compared besides the median, between 0.9
	// and 0.9999; default 0.99.
	TailQuantile float64 `yaml:"tail_quantile" json:"tail_quantile"`
	// MinChange is the smallest change that matters.
	MinChange MinChange `yaml:"min_change" json:"min_change"`
	// Alpha bounds the chance of rolling back a candidate that is no
	// worse (the false-rollback rate), over the whole release however
	// often it is judged; default 0.01.
	Alpha float64 `yaml:"alpha" json:"alpha"`
	// MinCalls is the least number of candidate calls a step takes
	// before it may be promoted; default DefaultMinCalls.
	MinCalls int `yaml:"min_calls" json:"min_calls"`
	// Power: a step whose estimates are on the right side of MinChange
	// is promoted once it has seen the candidate calls with which the
	// regression tests would have caught the smallest change that
	// matters with this probability, between 0 and 1; default 0.9.
	Power float64 `yaml:"power" json:"power"`
	// StepTimeLimit: a step still short of evidence after this long is
	// held (not promoted) until an operator acts; default one hour.
	StepTimeLimit time.Duration `yaml:"step_time_limit" json:"step_time_limit"`
}

// MinChange is the smallest change that matters, each above 0.
type MinChange struct {
	// Tail is a rise of the candidate's median or tail quantile, in
	// percent of the stable version's; default 10.
	Tail float64 `yaml:"tail" json:"tail"`
	// Errors is a rise of the error rate in percentage points; default 0.5.
	Errors float64 `yaml:"errors" json:"errors"`
	// Agreement is a drop of the shadow's agreement in percentage
	// points; default 1.
	Agreement float64 `yaml:"agreement" json:"agreement"`
}

// WithDefaults returns s with its zero fields filled.
func (s Spec) WithDefaults() Spec {
	j := &s.Judgement
	if j.TailQuantile == 0 {
		j.TailQuantile = DefaultTailQuantile
	}
	if j.Alpha == 0 {
		j.Alpha = DefaultAlpha
	}
	if j.MinChange.Tail == 0 {
		j.MinChange.Tail = DefaultMinTail
	}
	if j.MinChange.Errors == 0 {
		j.MinChange.Errors = DefaultMinErrors
	}
	if j.MinChange.Agreement == 0 {
		j.MinChange.Agreement = DefaultMinAgreement
	}
	if j.MinCalls == 0 {
		j.MinCalls = DefaultMinCalls
	}
	if j.Power == 0 {
		j.Power = DefaultPower
	}
	if j.StepTimeLimit == 0 {
		j.StepTimeLimit = DefaultStepTimeLimit
	}
	if s.Shadow != nil {
		sh := *s.Shadow
		if sh.Target == (Target{}) {
			sh.Target = s.Candidate
		}
		if sh.Compare == "" {
			sh.Compare = CompareValues
		}
		s.Shadow = &sh
	}
	if s.Idempotent == nil {
		t := true
		s.Idempotent = &t
	}
	return s
}

// IsIdempotent reports whether a failed candidate call may be sent again
// to the stable version (true unless idempotent: false).
func (s Spec) IsIdempotent() bool { return s.Idempotent == nil || *s.Idempotent }

// Lookup tells Problems whether the server knows a target. A nil func
// skips its check (the repository index lives outside this package).
type Lookup struct {
	// Model reports whether the repository index holds model at version
	// ("" means any version of it).
	Model func(model, version string) bool
	// Upstream reports whether an upstream of that name is configured.
	Upstream func(name string) bool
}

// Problems returns one error per bad field of the releases, each naming
// the field as in the YAML file ("releases[0].steps: not increasing (5
// after 25)"). Defaults are filled first, so zero fields are fine.
func Problems(specs []Spec, known Lookup) []error {
	var errs []error
	byModel := map[string]int{}
	for i, s := range specs {
		prefix := fmt.Sprintf("releases[%d].", i)
		for _, e := range s.WithDefaults().problems(known) {
			errs = append(errs, errors.New(prefix+e.Error()))
		}
		if s.Model == "" {
			continue
		}
		if j, dup := byModel[s.Model]; dup {
			errs = append(errs, fmt.Errorf("%smodel: %q is already released by releases[%d]", prefix, s.Model, j))
			continue
		}
		byModel[s.Model] = i
	}
	return errs
}

// problems checks one spec whose defaults are filled; the errors start
// with the field's name relative to the release.
func (s Spec) problems(known Lookup) []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf(field+": "+format, args...))
	}
	if s.Model == "" {
		bad("model", "must name the model the release splits")
	}
	s.Stable.check("stable", s.Model, known, bad)
	s.Candidate.check("candidate", s.Model, known, bad)
	if s.Stable != (Target{}) && s.Stable == s.Candidate {
		bad("candidate", "is the stable target (%s)", s.Stable)
	}
	if !inRange(s.Weight, 0, 100) {
		bad("weight", "must be between 0 and 100, got %g", s.Weight)
	}
	if len(s.Steps) > 0 && s.Weight != 0 {
		bad("weight", "must be left out with steps (the release starts at steps[0], %g)", s.Steps[0])
	}
	for k, w := range s.Steps {
		if !inRange(w, 0, 100) || w == 0 {
			bad(fmt.Sprintf("steps[%d]", k), "must be above 0 and at most 100, got %g", w)
		} else if k > 0 && w <= s.Steps[k-1] {
			bad("steps", "not increasing (%g after %g)", w, s.Steps[k-1])
		}
	}
	if s.Weight == 0 && len(s.Steps) == 0 && s.Shadow == nil {
		bad("weight", "the release sends the candidate nothing: set weight, steps or shadow")
	}
	if st := s.Sticky; st != "" && st != StickySequence && !isHeaderName(st) {
		bad("sticky", "must be a lowercase header name or %q, got %q", StickySequence, st)
	}
	if sh := s.Shadow; sh != nil {
		if !(sh.Fraction > 0 && sh.Fraction <= 1) {
			bad("shadow.fraction", "must be above 0 and at most 1, got %g", sh.Fraction)
		}
		if sh.Target != s.Candidate {
			sh.Target.check("shadow.target", s.Model, known, bad)
		}
		if sh.Target == s.Stable {
			bad("shadow.target", "is the stable target (%s): its answers would be compared with themselves", s.Stable)
		}
		if sh.Compare != CompareValues && sh.Compare != CompareTop1 {
			bad("shadow.compare", "must be %q or %q, got %q", CompareValues, CompareTop1, sh.Compare)
		}
		if !inRange(sh.Tolerance.Abs, 0, math.MaxFloat64) {
			bad("shadow.tolerance.abs", "must be 0 or more, got %g", sh.Tolerance.Abs)
		}
		if !inRange(sh.Tolerance.Rel, 0, math.MaxFloat64) {
			bad("shadow.tolerance.rel", "must be 0 or more, got %g", sh.Tolerance.Rel)
		}
	}
	j := s.Judgement
	if !inRange(j.TailQuantile, 0.9, 0.9999) {
		bad("judgement.tail_quantile", "must be between 0.9 and 0.9999, got %g", j.TailQuantile)
	}
	if !inRange(j.Alpha, 1e-6, 0.2) {
		bad("judgement.alpha", "must be between 0.000001 and 0.2, got %g", j.Alpha)
	}
	if !inRange(j.MinChange.Tail, 0, 1000) || j.MinChange.Tail == 0 {
		bad("judgement.min_change.tail", "must be above 0 and at most 1000 (percent), got %g", j.MinChange.Tail)
	}
	if !inRange(j.MinChange.Errors, 0, 100) || j.MinChange.Errors == 0 {
		bad("judgement.min_change.errors", "must be above 0 and at most 100 (points), got %g", j.MinChange.Errors)
	}
	if !inRange(j.MinChange.Agreement, 0, 100) || j.MinChange.Agreement == 0 {
		bad("judgement.min_change.agreement", "must be above 0 and at most 100 (points), got %g", j.MinChange.Agreement)
	}
	if j.MinCalls < 1 {
		bad("judgement.min_calls", "must be positive, got %d", j.MinCalls)
	}
	if !(j.Power > 0 && j.Power < 1) {
		bad("judgement.power", "must be between 0 and 1 (both excluded), got %g", j.Power)
	}
	if j.StepTimeLimit <= 0 {
		bad("judgement.step_time_limit", "must be positive, got %s", j.StepTimeLimit)
	}
	return errs
}

// check reports a target that is not exactly one of version, model and
// upstream, or that the server does not know.
func (t Target) check(field, model string, known Lookup, bad func(field, format string, args ...any)) {
	set := 0
	for _, v := range []string{t.Version, t.Model, t.Upstream} {
		if v != "" {
			set++
		}
	}
	if set != 1 {
		bad(field, "must set exactly one of version, model and upstream")
		return
	}
	switch {
	case t.Version != "" && known.Model != nil && model != "" && !known.Model(model, t.Version):
		bad(field+".version", "model %q has no version %q on the server", model, t.Version)
	case t.Model != "" && known.Model != nil && !known.Model(t.Model, ""):
		bad(field+".model", "the server has no model %q", t.Model)
	case t.Upstream != "" && known.Upstream != nil && !known.Upstream(t.Upstream):
		bad(field+".upstream", "no upstream is named %q", t.Upstream)
	}
}

// inRange reports lo <= v <= hi for a number (NaN is out of every range).
func inRange(v, lo, hi float64) bool { return v >= lo && v <= hi }

// isHeaderName reports a lowercase HTTP/2 header name made of token
// characters, not a pseudo-header.
func isHeaderName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}
