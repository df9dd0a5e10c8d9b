package alert

import (
	"fmt"
	"slices"
	"strings"

	"github.com/infergate/infergate/monitor/correlate"
)

// KindHint holds while the correlator's cause hint for the model is one
// of the condition's.
const KindHint = "hint"

// hintCond is a compiled hint condition.
type hintCond struct {
	hints []string
}

func parseHint(cc *Condition, _ condCommon, _ *Config) (condition, error) {
	if len(cc.Hints) == 0 {
		return nil, fmt.Errorf("hints: missing")
	}
	for _, h := range cc.Hints {
		if !slices.Contains(correlate.Hints, h) {
			return nil, fmt.Errorf("hints: %q, want one of %s", h, strings.Join(correlate.Hints, ", "))
		}
	}
	return &hintCond{hints: cc.Hints}, nil
}

func (cd *hintCond) kind() string { return KindHint }

// models adds none: a hint names no window; a rule of hints only judges
// the models the correlator knows.
func (cd *hintCond) models(*frame, selector, map[string]bool) {}

func (cd *hintCond) eval(f *frame, _ *Rule, _ int, model string) outcome {
	ms, ok := f.models[model]
	if !ok {
		return outcome{note: "no correlation for the model"}
	}
	return outcome{holds: triOf(slices.Contains(cd.hints, ms.Hint)), note: "cause hint " + ms.Hint,
		measure: "cause hint", text: ms.Hint}
}
