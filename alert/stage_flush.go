package alert

import (
	"context"
	"log/slog"
	"maps"
	"sort"
	"time"

	"github.com/infergate/infergate/alert/notify"
)

// flushStage sends each routed group's message when one is due: group_wait
// after the group formed, then when its alerts change (no sooner than
// group_interval after the last message) or, while some fire, every
// repeat_interval. A message holds the group's firing alerts and the
// resolved ones it had sent as firing.
type flushStage struct {
	send        func(receiver string, m *notify.Message)
	externalURL string
	metrics     *engineMetrics
	log         *slog.Logger
}

func (st flushStage) exec(ctx context.Context, s *step) {
	now := nowOf(ctx)
	for _, g := range s.groups {
		st.flushIfDue(g, now, s.undecided)
	}
}

// flushIfDue sends the group's message when one is due. A repeat is not
// due while every firing alert of the group is undecided: nothing new is
// known of them, and an alert that may be stale should not page again.
func (st flushStage) flushIfDue(g *group, now time.Time, undecided map[string]bool) {
	var firing, resolved []notify.Alert
	changed := false
	for _, a := range g.alerts {
		switch a.Status {
		case notify.StatusFiring:
			firing = append(firing, a)
			if !g.Notified[a.Fingerprint] {
				changed = true
			}
		case notify.StatusResolved:
			if g.Notified[a.Fingerprint] {
				resolved = append(resolved, a)
				changed = true
			}
		}
	}
	due := false
	switch {
	case g.LastFlush.IsZero():
		due = len(firing) > 0 && now.Sub(g.Created) >= g.rt.wait
	case changed:
		due = now.Sub(g.LastFlush) >= g.rt.interval
	default:
		due = len(firing) > 0 && now.Sub(g.LastFlush) >= g.rt.repeat && !allIn(firing, undecided)
	}
	if !due {
		return
	}
	all := append(firing, resolved...)
	if len(all) == 0 {
		return
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Fingerprint < all[j].Fingerprint })
	m := &notify.Message{Receiver: g.Receiver, GroupKey: g.Key, GroupLabels: maps.Clone(g.Labels),
		Status: notify.StatusResolved, Alerts: all, ExternalURL: st.externalURL}
	if len(firing) > 0 {
		m.Status = notify.StatusFiring
	}
	g.LastFlush = now
	g.Notified = map[string]bool{}
	for _, a := range firing {
		g.Notified[a.Fingerprint] = true
	}
	for _, a := range resolved {
		delete(g.alerts, a.Fingerprint)
	}
	st.metrics.sent(g.Receiver)
	st.log.Info("alert notification", "receiver", g.Receiver, "group", g.Key, "status", m.Status, "firing", len(firing), "resolved", len(resolved))
	st.send(g.Receiver, m)
}

// allIn says whether every alert of as is in set.
func allIn(as []notify.Alert, set map[string]bool) bool {
	for _, a := range as {
		if !set[a.Fingerprint] {
			return false
		}
	}
	return true
}
