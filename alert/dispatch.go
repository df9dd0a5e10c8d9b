package alert

import (
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/infergate/infergate/alert/notify"
)

// dispatcher turns alerts into notifications the way Alertmanager does:
// inhibit, silence, route to a receiver, group by labels, wait, and send
// one message per group when it changes (no sooner than group_interval)
// or when it has been quiet for repeat_interval. It runs inside the
// engine's step, under the engine's lock, so it needs no lock of its own.
type dispatcher struct {
	cfg      *Config
	inhibit  []InhibitConfig
	silences *silenceStore
	send     func(receiver string, m *notify.Message)
	log      *slog.Logger
	metrics  *engineMetrics
	groups   map[string]*group
	// muted records why each muted alert is muted, for the API.
	muted map[string]string
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

	rt     routed
	alerts map[string]notify.Alert
}

func newDispatcher(cfg *Config, inhibit []InhibitConfig, s *silenceStore, send func(string, *notify.Message), log *slog.Logger, m *engineMetrics) *dispatcher {
	return &dispatcher{cfg: cfg, inhibit: inhibit, silences: s, send: send, log: log, metrics: m,
		groups: map[string]*group{}, muted: map[string]string{}}
}

// route is a matched route with the settings it inherits.
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
func (d *dispatcher) match(r *RouteConfig, parent routed, labels map[string]string, now time.Time, path string) []routed {
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
		if !matchAll(ch.Match, labels) || !d.scheduleOK(ch.Schedule, now) {
			continue
		}
		out = append(out, d.match(ch, cur, labels, now, path+"/"+itoa(i))...)
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

func (d *dispatcher) scheduleOK(name string, now time.Time) bool {
	if name == "" {
		return true
	}
	not := strings.HasPrefix(name, "!")
	sc := d.cfg.schedules[strings.TrimPrefix(name, "!")]
	if sc == nil {
		return false
	}
	return sc.active(now) != not
}

// mutedBy returns why an alert is muted ("inhibited by X", "silenced by
// ID"), or "".
func (d *dispatcher) mutedBy(a notify.Alert, firing []notify.Alert, now time.Time) string {
	for _, ih := range d.inhibit {
		if !matchAll(ih.TargetMatch, a.Labels) {
			continue
		}
		for _, src := range firing {
			if src.Fingerprint == a.Fingerprint || src.Status != notify.StatusFiring {
				continue
			}
			if matchAll(ih.SourceMatch, src.Labels) && sameLabels(src.Labels, a.Labels, ih.Equal) {
				return "inhibited by " + src.Name + " " + joinKV(src.Labels, ih.Equal)
			}
		}
	}
	if id := d.silences.muted(a.Labels, a.Fingerprint, now); id != "" {
		return "silenced by " + id
	}
	return ""
}

// step takes the engine's current firing and just-resolved alerts and
// sends what is due.
func (d *dispatcher) step(now time.Time, alerts []notify.Alert) {
	clear(d.muted)
	root := routed{receiver: d.cfg.Route.Receiver, groupBy: d.cfg.Route.GroupBy, wait: d.cfg.Route.GroupWait,
		interval: d.cfg.Route.GroupInterval, repeat: d.cfg.Route.RepeatInterval}
	present := map[string]map[string]bool{} // group key -> fingerprints seen this step
	for _, a := range alerts {
		if a.Status == notify.StatusFiring {
			if why := d.mutedBy(a, alerts, now); why != "" {
				d.muted[a.Fingerprint] = why
				continue
			}
		}
		for _, rt := range d.match(d.cfg.Route, root, a.Labels, now, "") {
			gl := map[string]string{}
			for _, k := range rt.groupBy {
				gl[k] = a.Labels[k]
			}
			key := rt.receiver + rt.path + "{" + joinKV(gl, slices.Sorted(maps.Keys(gl))) + "}"
			g := d.groups[key]
			if g == nil {
				if a.Status == notify.StatusResolved {
					continue // never notified: nothing to resolve
				}
				g = &group{Key: key, Receiver: rt.receiver, Labels: gl, Created: now, Notified: map[string]bool{}}
				d.groups[key] = g
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
	for key, g := range d.groups {
		// An alert that vanished (muted now) leaves the group quietly; a
		// resolved one stays until its resolved notification is sent.
		for fp, a := range g.alerts {
			if !present[key][fp] && !(a.Status == notify.StatusResolved && g.Notified[fp]) {
				delete(g.alerts, fp)
			}
		}
		if g.rt.receiver == "" { // restored from a state file, not routed yet
			continue
		}
		d.flushIfDue(g, g.rt, now)
		if len(g.alerts) == 0 && now.Sub(g.LastFlush) > time.Hour {
			delete(d.groups, key)
		}
	}
}

// flushIfDue sends the group's message when one is due.
func (d *dispatcher) flushIfDue(g *group, rt routed, now time.Time) {
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
		due = len(firing) > 0 && now.Sub(g.Created) >= rt.wait
	case changed:
		due = now.Sub(g.LastFlush) >= rt.interval
	default:
		due = len(firing) > 0 && now.Sub(g.LastFlush) >= rt.repeat
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
		Status: notify.StatusResolved, Alerts: all, ExternalURL: d.cfg.ExternalURL}
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
	d.metrics.sent(g.Receiver)
	d.log.Info("alert notification", "receiver", g.Receiver, "group", g.Key, "status", m.Status, "firing", len(firing), "resolved", len(resolved))
	d.send(g.Receiver, m)
}
