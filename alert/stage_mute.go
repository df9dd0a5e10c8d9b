package alert

import (
	"context"

	"github.com/infergate/infergate/alert/notify"
)

// muter says why a firing alert is muted ("inhibited by ...", "silenced
// by ..."), or "" when it is not. active is every firing and
// just-resolved alert of the step, muted or not: the candidate sources of
// an inhibition. As Alertmanager's Muter, one interface serves every mute
// source, here the inhibitor and the silences. Muters run inside the
// engine's step, under its lock.
type muter interface {
	mutes(ctx context.Context, a notify.Alert, active []notify.Alert) string
}

// muteStage records in s.muted why each firing alert its muter mutes is
// muted; alerts an earlier mute stage muted keep that stage's reason.
// Resolved alerts are never muted: a resolved notification is owed for
// every firing one sent.
type muteStage struct {
	muter muter
}

func (st muteStage) exec(ctx context.Context, s *step) {
	for _, a := range s.alerts {
		if a.Status != notify.StatusFiring || s.muted[a.Fingerprint] != "" {
			continue
		}
		if why := st.muter.mutes(ctx, a, s.alerts); why != "" {
			s.muted[a.Fingerprint] = why
		}
	}
}

// inhibitor mutes a target alert while another, firing, source alert
// matches an inhibit rule and agrees with it on the rule's equal labels.
type inhibitor []InhibitConfig

func (ih inhibitor) mutes(_ context.Context, a notify.Alert, active []notify.Alert) string {
	for _, r := range ih {
		if !matchAll(r.TargetMatch, a.Labels) {
			continue
		}
		for _, src := range active {
			if src.Fingerprint == a.Fingerprint || src.Status != notify.StatusFiring {
				continue
			}
			if matchAll(r.SourceMatch, src.Labels) && sameLabels(src.Labels, a.Labels, r.Equal) {
				return "inhibited by " + src.Name + " " + joinKV(src.Labels, r.Equal)
			}
		}
	}
	return ""
}

// silencer mutes the alerts a silence (or an acknowledgement) in its
// store covers at the step's time.
type silencer struct{ store *silenceStore }

func (sl silencer) mutes(ctx context.Context, a notify.Alert, _ []notify.Alert) string {
	if id := sl.store.muted(a.Labels, a.Fingerprint, nowOf(ctx)); id != "" {
		return "silenced by " + id
	}
	return ""
}
