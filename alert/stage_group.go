package alert

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/infergate/infergate/alert/notify"
)

// groupStage routes each alert not muted down the routing tree (matchers
// and schedules) to its receivers and puts it in the aggregation group of
// its group_by labels, as Alertmanager's dispatcher does. An alert that
// vanished (muted now) leaves its group quietly; a resolved one stays
// until its resolved notification is sent. It writes s.groups, the routed
// groups by key, and forgets groups empty and quiet for an hour.
type groupStage struct {
	cfg *Config
	// groups are the aggregation groups by key; the engine's (the state
	// file keeps them).
	groups map[string]*group
}

func (st groupStage) exec(ctx context.Context, s *step) {
	now := nowOf(ctx)
	root := routed{receiver: st.cfg.Route.Receiver, groupBy: st.cfg.Route.GroupBy, wait: st.cfg.Route.GroupWait,
		interval: st.cfg.Route.GroupInterval, repeat: st.cfg.Route.RepeatInterval}
	present := map[string]map[string]bool{} // group key -> fingerprints seen this step
	for _, a := range s.alerts {
		if s.muted[a.Fingerprint] != "" {
			continue
		}
		for _, rt := range st.match(st.cfg.Route, root, a.Labels, now, "") {
			gl := map[string]string{}
			for _, k := range rt.groupBy {
				gl[k] = a.Labels[k]
			}
			key := rt.receiver + rt.path + "{" + joinKV(gl, slices.Sorted(maps.Keys(gl))) + "}"
			g := st.groups[key]
			if g == nil {
				if a.Status == notify.StatusResolved {
					continue // never notified: nothing to resolve
				}
				g = &group{Key: key, Receiver: rt.receiver, Labels: gl, Created: now, Notified: map[string]bool{}}
				st.groups[key] = g
			}
			g.rt = rt
			if g.alerts == nil {
				g.alerts = map[string]notify.Alert{}
			}
			g.alerts[a.Fingerprint] = a
			if present[key] == nil {
				present[key] = map[string]bool{}
			}
			present[key][a.Fingerprint] = true
		}
	}
	for key, g := range st.groups {
		// An alert that vanished (muted now) leaves the group quietly; a
		// resolved one stays until its resolved notification is sent.
		for fp, a := range g.alerts {
			if !present[key][fp] && !(a.Status == notify.StatusResolved && g.Notified[fp]) {
				delete(g.alerts, fp)
			}
		}
		if g.rt.receiver == "" { // restored from a state file, not routed yet
			if now.Sub(g.restored) > restoredGroupTTL {
				delete(st.groups, key)
			}
			continue
		}
		// A group with nothing to send and nothing sent for an hour goes.
		if len(g.alerts) == 0 && now.Sub(g.LastFlush) > time.Hour {
			delete(st.groups, key)
			continue
		}
		s.groups = append(s.groups, g)
	}
	slices.SortFunc(s.groups, func(a, b *group) int { return strings.Compare(a.Key, b.Key) })
}

// group is one aggregation group: one receiver, one value of its
// group_by labels.
type group struct {
	Key       string            `json:"key"`
	Receiver  string            `json:"receiver"`
	Labels    map[string]string `json:"labels"`
	Created   time.Time         `json:"created"`
	LastFlush time.Time         `json:"last_flush"`
	// Notified holds the fingerprints last sent as firing.
	Notified map[string]bool `json:"notified"`
	// LastResend is when the firing alerts last went to the receiver's
	// alertmanager integrations (a flush or a re-send).
	LastResend time.Time `json:"last_resend,omitzero"`

	rt     routed
	alerts map[string]notify.Alert
	// restored is when the group was read from the state file; zero for
	// a group formed here. One no alert is routed to again is forgotten
	// after restoredGroupTTL.
	restored time.Time
}

// routed is a matched route with the settings it inherits.
type routed struct {
	receiver string
	path     string
	groupBy  []string
	wait     time.Duration
	interval time.Duration
	repeat   time.Duration
	node     *RouteConfig
}

// match walks the routing tree: the first matching child wins unless it
// says continue; with no matching child the node itself takes the alert.
func (st groupStage) match(r *RouteConfig, parent routed, labels map[string]string, now time.Time, path string) []routed {
	cur := parent
	cur.node, cur.path = r, path
	if r.Receiver != "" {
		cur.receiver = r.Receiver
	}
	if r.GroupBy != nil {
		cur.groupBy = r.GroupBy
	}
	if r.GroupWait > 0 {
		cur.wait = r.GroupWait
	}
	if r.GroupInterval > 0 {
		cur.interval = r.GroupInterval
	}
	if r.RepeatInterval > 0 {
		cur.repeat = r.RepeatInterval
	}
	var out []routed
	for i, ch := range r.Routes {
		if !matchAll(ch.Match, labels) || !st.scheduleOK(ch.Schedule, now) {
			continue
		}
		out = append(out, st.match(ch, cur, labels, now, path+"/"+itoa(i))...)
		if !ch.Continue {
			break
		}
	}
	if len(out) == 0 {
		out = []routed{cur}
	}
	return out
}

func itoa(i int) string { return strconv.Itoa(i) }

func (st groupStage) scheduleOK(name string, now time.Time) bool {
	if name == "" {
		return true
	}
	not := strings.HasPrefix(name, "!")
	sc := st.cfg.schedules[strings.TrimPrefix(name, "!")]
	if sc == nil {
		return false
	}
	return sc.active(now) != not
}
