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
	// owe puts a message in the outbox (saved, then sent by the deliver
	// stage); only limits it to some integrations (nil: all).
	owe func(receiver string, m *notify.Message, only []string, resend bool)
	// resend says how often firing alerts go again to receiver's
	// alertmanager integrations (0: it has none), and whether such a
	// re-send is still owed.
	resend        func(receiver string) (every time.Duration, to []string)
	resendPending func(receiver, key string) bool
	externalURL   string
	metrics       *engineMetrics
	log           *slog.Logger
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
		st.resendIfDue(g, now)
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
	g.LastResend = now
	st.owe(g.Receiver, m, nil, false)
}

// resendIfDue sends the group's firing alerts that were already notified
// again to the receiver's alertmanager integrations every resend
// interval, as Prometheus does: their endsAt (resend_validity ahead)
// never passes while the alert fires, and a restarted Alertmanager has
// them again within one interval. People are paced by repeat_interval;
// Alertmanager deduplicates.
func (st flushStage) resendIfDue(g *group, now time.Time) {
	if st.resend == nil || g.LastFlush.IsZero() {
		return
	}
	every, to := st.resend(g.Receiver)
	if every <= 0 || now.Sub(g.LastResend) < every || st.resendPending(g.Receiver, g.Key) {
		return
	}
	var firing []notify.Alert
	for _, a := range g.alerts {
		if a.Status == notify.StatusFiring && g.Notified[a.Fingerprint] {
			firing = append(firing, a)
		}
	}
	if len(firing) == 0 {
		return
	}
	sort.Slice(firing, func(i, j int) bool { return firing[i].Fingerprint < firing[j].Fingerprint })
	g.LastResend = now
	st.owe(g.Receiver, &notify.Message{Receiver: g.Receiver, GroupKey: g.Key, GroupLabels: maps.Clone(g.Labels),
		Status: notify.StatusFiring, Alerts: firing, ExternalURL: st.externalURL}, to, true)
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
