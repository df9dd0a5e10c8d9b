package alert

import (
	"context"
	"time"

	"github.com/infergate/infergate/alert/notify"
)

// stage is one step of an evaluation, as in Alertmanager's notification
// pipeline. The engine runs its stages in order, under its lock, once a
// tick: evaluate → lifecycle → mute (inhibition, then silences) → group →
// flush → persist. Each stage reads the step's time with nowOf(ctx), never
// a clock of its own, and hands its results to the next ones in s.
type stage interface {
	exec(ctx context.Context, s *step)
}

// stages runs stages in order.
type stages []stage

func (ss stages) exec(ctx context.Context, s *step) {
	for _, st := range ss {
		st.exec(ctx, s)
	}
}

// step is what one evaluation's stages hand each other.
type step struct {
	// frame is the data the evaluation reads (evaluate, lifecycle).
	frame *frame
	// verdicts are the rules' verdicts per subject (evaluate → lifecycle).
	verdicts []verdict
	// alerts are the firing and just-resolved alerts, by fingerprint
	// (lifecycle → mute → group).
	alerts []notify.Alert
	// muted says why each muted alert is muted (mute → group, and the
	// API until the next step).
	muted map[string]string
	// undecided holds the firing alerts no verdict decided this step, by
	// fingerprint: they hold their state but are not re-sent (lifecycle →
	// flush).
	undecided map[string]bool
	// groups are the routed aggregation groups, by key (group → flush).
	groups []*group
	// changed says that something the state file keeps changed
	// (lifecycle → persist).
	changed bool
}

func newStep(f *frame) *step { return &step{frame: f, muted: map[string]string{}} }

// nowKey is the context key of the step's time.
type nowKey struct{}

// withNow returns ctx carrying the step's time, which every stage uses
// instead of reading a clock: one evaluation sees one instant (as
// Alertmanager's notify.WithNow).
func withNow(ctx context.Context, now time.Time) context.Context {
	return context.WithValue(ctx, nowKey{}, now)
}

// nowOf returns the step's time carried by ctx; the zero time if none.
func nowOf(ctx context.Context) time.Time {
	now, _ := ctx.Value(nowKey{}).(time.Time)
	return now
}
