package alert

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/infergate/infergate/alert/notify"
)

// stagesFor is the pipeline over cfg; the engine's state (alerts,
// silences, groups, outbox) is the same whatever the configuration.
func (e *Engine) stagesFor(cfg *Config) stages {
	inhibit := cfg.Inhibit
	if inhibit == nil {
		inhibit = DefaultInhibit()
	}
	return stages{
		evaluateStage{cfg: cfg},
		e.lifecycle,
		muteStage{inhibitor(inhibit)},
		muteStage{silencer{e.silences}},
		groupStage{cfg: cfg, groups: e.groups},
		flushStage{owe: e.owe, resend: e.resend, resendPending: e.outbox.resendPending, externalURL: cfg.ExternalURL,
			metrics: e.metrics, log: e.log},
		e.persist,
		deliverStage{outbox: e.outbox, send: e.deliver},
	}
}

// buildReceivers builds the receivers of cfg (and the log receiver); on
// an error it closes those it built.
func (e *Engine) buildReceivers(cfg *Config) (map[string]*notify.Receiver, error) {
	out := map[string]*notify.Receiver{}
	cfgs := append([]notify.ReceiverConfig{{Name: LogReceiver, Log: true}}, cfg.Receivers...)
	for _, rc := range cfgs {
		r, err := notify.Build(rc, notify.WithLogger(e.log), notify.WithMetrics(e.notifyMetrics))
		if err != nil {
			closeAll(out)
			return nil, fmt.Errorf("alert: receiver %q: %w", rc.Name, err)
		}
		out[rc.Name] = r
	}
	return out, nil
}

// closeAll stops receivers, giving their queued notifications a few
// seconds.
func closeAll(rs map[string]*notify.Receiver) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, r := range rs {
		_ = r.Close(ctx)
	}
}

// Apply replaces the engine's configuration (a validated Config: rules,
// route, receivers, inhibition, schedules, templates) between two
// evaluation steps. Alerts of rules whose definition is the same (same
// name, same rule as written) keep their state: a firing alert keeps
// firing, without a new page. An alert of a rule that changed or went
// resolves now (its action is stopped, its resolved notice goes out at
// the next step), and the new rule starts from nothing. Silences, groups
// and owed notifications carry over. The receivers are built before
// anything changes, so one that cannot be built refuses the whole
// configuration and the running one stays. EvaluationInterval, StateFile
// and Baseline are read at start only. It returns the names of the
// alerts' rules that were resolved by the change.
func (e *Engine) Apply(cfg *Config) ([]string, error) {
	commit, _, err := e.Stage(cfg)
	if err != nil {
		return nil, err
	}
	return commit(), nil
}

// Stage is Apply in two steps, for a reload that changes several parts
// at once: it builds what cfg needs (the receivers) and returns commit,
// which swaps it in as Apply does and cannot fail, and abort, which
// drops what was built. Call one of them, once.
func (e *Engine) Stage(cfg *Config) (commit func() []string, abort func(), err error) {
	if cfg == nil {
		return nil, nil, fmt.Errorf("alert: Apply: nil Config")
	}
	var receivers map[string]*notify.Receiver
	if e.opts.Send == nil {
		if receivers, err = e.buildReceivers(cfg); err != nil {
			return nil, nil, err
		}
	}
	return func() []string { return e.swap(cfg, receivers) }, func() { closeAll(receivers) }, nil
}

// swap installs cfg and its receivers (nil: keep the test's Send).
func (e *Engine) swap(cfg *Config, receivers map[string]*notify.Receiver) []string {
	e.mu.Lock()
	now := e.opts.Now()
	rules := map[string]*Rule{}
	for _, r := range cfg.rules {
		rules[r.Name] = r
	}
	var ended []string
	for fp, a := range e.alerts {
		if r := rules[a.rule.Name]; r != nil && reflect.DeepEqual(r.Config, a.rule.Config) {
			a.rule = r
			continue
		}
		if a.state != StateResolved {
			ended = append(ended, a.rule.Name)
		}
		e.lifecycle.retire(a, now, "its rule changed or was removed by a reload")
		if a.state == StateResolved {
			// Under a key of its own until its notice is sent, so that
			// the new rule's alert of the same subject starts afresh.
			delete(e.alerts, fp)
			e.alerts[fp+"\x00reloaded"] = a
		}
	}
	old := e.receivers
	if receivers != nil {
		e.receivers = receivers
	}
	e.cfg = cfg
	e.lifecycle.cfg = cfg
	e.pipeline = e.stagesFor(cfg)
	e.mu.Unlock()
	if receivers != nil {
		// What the old receivers still hold is sent in the background.
		go closeAll(old)
	}
	slices.Sort(ended)
	return slices.Compact(ended)
}
