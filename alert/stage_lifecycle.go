package alert

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/infergate/infergate/alert/notify"
)

// lifecycleStage moves each alert through its lifecycle on the step's
// verdicts (pending, firing after for, resolved after keep_firing_for or
// five minutes without a verdict, escalated), starting and stopping rule
// actions as alerts fire and resolve. It writes s.alerts, the firing and
// just-resolved alerts, then forgets the resolved ones and ends the
// silences whose time is up and the acknowledgements of alerts that no
// longer fire.
type lifecycleStage struct {
	cfg      *Config
	alerts   map[string]*instance // by fingerprint; the engine's
	silences *silenceStore
	// actuator carries out actions; nil means they are only logged.
	actuator Actuator
	log      *slog.Logger
	// started is when the engine started. Until it has watched the
	// traffic for maxWindow, no call seen is no evidence of no traffic:
	// an alert restored at a restart must not resolve as "no traffic"
	// only because the new process has not seen a call yet.
	started time.Time
}

func (l *lifecycleStage) exec(ctx context.Context, s *step) {
	now := nowOf(ctx)
	judged := make(map[string]bool, len(s.verdicts)) // fingerprints with a verdict this step
	for _, v := range s.verdicts {
		judged[fingerprint(v.rule, v.subjectLabel, v.subject)] = true
		l.advance(s, v, now)
	}
	// A model's traffic alert that nothing decided this step resolves at
	// once when the model had no call at all for a minute: absent data
	// resolves, as an absent series does in Prometheus. Other alerts
	// nothing decided for a while (their calls became too few to judge)
	// resolve after staleAfter: an incident nobody can see any more
	// should not page forever. Until then they hold without a re-page
	// (s.undecided, read by the flush stage).
	for _, a := range l.alerts {
		switch {
		case a.state == StateResolved || !a.lastDecided.Before(now):
		case !judged[a.fp] && l.noTraffic(s.frame, a):
			a.markNoTraffic()
			l.resolve(s, a, now, "no traffic for "+maxWindow.String())
		case now.Sub(a.lastDecided) > staleAfter(a.rule):
			l.resolve(s, a, now, "no verdict for "+staleAfter(a.rule).String())
		case a.state == StateFiring:
			if s.undecided == nil {
				s.undecided = map[string]bool{}
			}
			s.undecided[a.fp] = true
		}
		if a.state != StateResolved && !judged[a.fp] {
			// No verdict of its subject at all this step: its summary
			// must not go on saying where it stood at the last one.
			a.judged = false
			a.render(now)
		}
	}
	s.alerts = l.notifications()
	for fp, a := range l.alerts {
		if a.state == StateResolved {
			delete(l.alerts, fp)
		}
	}
	l.silences.expire(now, l.isFiring)
}

// noTraffic says whether a is the alert of a traffic rule (one whose
// conditions all read the model's calls) on a model that had no call,
// answered by any route and whatever its status, in the last maxWindow.
func (l *lifecycleStage) noTraffic(f *frame, a *instance) bool {
	r := a.rule
	if f == nil || r.PerGPU || len(r.conds) == 0 || f.now.Sub(l.started) < maxWindow {
		return false
	}
	for _, cd := range r.conds {
		if k := cd.kind(); k == KindGPU || k == KindHint {
			return false
		}
	}
	_, ok := f.windowOf(r.sel, maxWindow, viewAny)[a.subject]
	return !ok
}

// staleAfter is how long an alert keeps its state without any verdict.
func staleAfter(r *Rule) time.Duration { return max(5*time.Minute, r.For, r.KeepFiringFor) }

// advance moves one alert through its lifecycle given its conditions'
// outcomes.
func (l *lifecycleStage) advance(s *step, v verdict, now time.Time) {
	f, r, subjectLabel, subject, os, holds := s.frame, v.rule, v.subjectLabel, v.subject, v.outcomes, v.holds
	fp := fingerprint(r, subjectLabel, subject)
	a := l.alerts[fp]
	if a == nil {
		if holds != yes {
			return
		}
		a = &instance{rule: r, fp: fp, subject: subject, state: StatePending, activeSince: now}
		if subjectLabel == "model" && recurringKinds(r) {
			if p, ok := f.baselines.Recurring(subject); ok {
				a.recurring = &p
			}
		}
		l.alerts[fp] = a
		s.changed = true
	}
	if a.labels == nil {
		a.labels = a.labelsIn(f, subjectLabel)
	}
	a.fillEvidence(f, subjectLabel, os)
	a.noteCause(now)
	a.record(os, holds, now)
	if holds == unknown {
		a.render(now)
		return
	}
	a.lastDecided = now
	switch {
	case holds == yes:
		a.lastTrue = now
		if a.state == StatePending && now.Sub(a.activeSince) >= r.For {
			a.state, a.firedAt = StateFiring, now
			s.changed = true
			l.log.Warn("alert firing", "alert", r.Name, subjectLabel, subject, "value", a.value, "threshold", a.threshold)
			l.act(a, true)
		}
	case a.state == StatePending:
		delete(l.alerts, fp)
		s.changed = true
	case a.state == StateFiring && now.Sub(a.lastTrue) >= r.KeepFiringFor:
		l.resolve(s, a, now, whyCleared)
	}
	if a.state == StateFiring && r.Escalate != nil && !a.escalated && now.Sub(a.firedAt) >= r.Escalate.After {
		a.escalated = true
		s.changed = true
		l.log.Warn("alert escalated", "alert", r.Name, subjectLabel, subject, "severity", r.Escalate.Severity)
	}
	a.labels = a.labelsIn(f, subjectLabel)
	a.render(now)
}

// whyCleared is why an alert whose condition stopped holding for its
// keep_firing_for resolves.
const whyCleared = "condition cleared"

func (l *lifecycleStage) resolve(s *step, a *instance, now time.Time, why string) {
	if a.state == StatePending {
		delete(l.alerts, a.fp)
		return
	}
	a.state, a.resolvedAt, a.resolvedWhy = StateResolved, now, why
	a.render(now)
	s.changed = true
	l.log.Info("alert resolved", "alert", a.rule.Name, "subject", a.subject, "why", why)
	l.act(a, false)
}

func (l *lifecycleStage) isFiring(fp string) bool {
	a := l.alerts[fp]
	return a != nil && a.state == StateFiring
}

// act starts or stops the rule's action and records what happened.
func (l *lifecycleStage) act(a *instance, on bool) {
	r := a.rule
	if r.Action == "" || a.acting == on {
		return
	}
	a.acting = on
	verb := map[bool]string{true: "start", false: "stop"}[on]
	var did string
	var err error
	switch {
	case l.actuator == nil:
		did = fmt.Sprintf("%s %s: no actuator in this build", verb, r.Action)
	case on:
		did, err = l.actuator.Start(r.Action, a.labels)
	default:
		did, err = l.actuator.Stop(r.Action, a.labels)
	}
	if err != nil {
		did = fmt.Sprintf("%s %s failed: %v", verb, r.Action, err)
		l.log.Error("alert action failed", "alert", r.Name, "subject", a.subject, "action", r.Action, "err", err)
	} else {
		l.log.Warn("alert action", "alert", r.Name, "subject", a.subject, "action", r.Action, "did", did)
	}
	a.actions = append(a.actions, did)
	if len(a.actions) > 10 {
		a.actions = a.actions[len(a.actions)-10:]
	}
	// The evidence was filled before the state changed: show the action
	// now, not one evaluation later.
	a.evidence.Actions = a.actions
}

// notifications returns the alerts the notification stages consider:
// firing and just-resolved ones, by fingerprint.
func (l *lifecycleStage) notifications() []notify.Alert {
	var out []notify.Alert
	for _, a := range l.alerts {
		if a.state == StatePending {
			continue
		}
		na := notify.Alert{
			Name: a.rule.Name, Status: notify.StatusFiring, Severity: a.labels["severity"],
			Labels: a.labels, Annotations: a.annotations, StartsAt: a.firedAt, Fingerprint: a.fp,
			Evidence: a.evidence.String(), Actions: slices.Clone(a.actions),
			GeneratorURL: strings.TrimSuffix(l.cfg.ExternalURL, "/") + "/api/v1/alerts",
		}
		if a.state == StateResolved {
			na.Status, na.EndsAt = notify.StatusResolved, a.resolvedAt
		}
		out = append(out, na)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Fingerprint < out[j].Fingerprint })
	return out
}

// retire ends a, whose rule a reload changed or removed, outside a step:
// a pending alert is forgotten, a firing one resolves (its action
// stopped) and its resolved notice goes out at the next step.
func (l *lifecycleStage) retire(a *instance, now time.Time, why string) {
	if a.state == StatePending {
		delete(l.alerts, a.fp)
		return
	}
	if a.state == StateResolved {
		return
	}
	a.state, a.resolvedAt, a.resolvedWhy = StateResolved, now, why
	a.render(now)
	l.log.Info("alert resolved", "alert", a.rule.Name, "subject", a.subject, "why", why)
	l.act(a, false)
}

// recurringKinds says whether r's alerts can be a recurring pattern's:
// rules of baseline or trend conditions, the rises the baselines name.
// An SLO or error rule pages even inside a pattern: a scheduled job that
// breaks the objective is felt by the users all the same.
func recurringKinds(r *Rule) bool {
	for _, cd := range r.conds {
		if k := cd.kind(); k == KindBaseline || k == KindTrend {
			return true
		}
	}
	return false
}
