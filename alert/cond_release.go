package alert

import (
	"time"
)

// KindVersionRegression holds while a model's release is rolled back:
// its candidate was worse than the stable version (the judgement's
// evidence), or gone from the server (NOT_FOUND), or an operator rolled
// it back. The alert's value is the rollback's evidence in words, so the
// default rule's summary is the decision itself.
const KindVersionRegression = "version_regression"

// ReleaseSource tells the version_regression condition where each
// model's release stands. alert does not import the release package:
// cmd/infergate adapts release.Set.Status to it.
type ReleaseSource interface {
	// Releases returns every release, and for a while those removed
	// since (RolledBack false), so that their alerts resolve at once.
	Releases() []ReleaseState
}

// ReleaseState is one model's release as the condition reads it.
type ReleaseState struct {
	Model string
	// RolledBack is set from the rollback until the release is
	// restarted (a changed release at a reload) or removed.
	RolledBack bool
	// Reason is the rollback decision in words ("version 2's p99 is
	// 1.31x version 1's ...; rolled back at 10%"); At when it was made;
	// Manual set for an operator's.
	Reason string
	At     time.Time
	Manual bool
}

// releaseCond is a compiled version_regression condition; it has no
// fields of its own.
type releaseCond struct{}

func parseVersionRegression(*Condition, condCommon, *Config) (condition, error) {
	return releaseCond{}, nil
}

func (releaseCond) kind() string { return KindVersionRegression }

// models adds the models that have a release (or had one lately) and
// that the rule selects: a release is judged whether or not it has
// calls now.
func (releaseCond) models(f *frame, sel selector, seen map[string]bool) {
	for m := range f.releases {
		if glob(sel.model, m) {
			seen[m] = true
		}
	}
}

func (releaseCond) eval(f *frame, _ *Rule, _ int, model string) outcome {
	rs, ok := f.releases[model]
	switch {
	case !ok:
		return outcome{note: "no release"}
	case !rs.RolledBack:
		return outcome{holds: no, note: "release not rolled back", measure: "release", text: "not rolled back"}
	}
	return outcome{holds: yes, note: rs.Reason, measure: "release rolled back", text: rs.Reason}
}
