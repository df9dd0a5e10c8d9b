package alert

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// stateFile is what survives a restart: active alerts, silences and what
// each group last sent, so a restarted infergate neither forgets an
// incident nor pages for it again.
type stateFile struct {
	Version  int               `json:"version"`
	Saved    time.Time         `json:"saved"`
	Alerts   []savedAlert      `json:"alerts"`
	Silences []Silence         `json:"silences"`
	Groups   map[string]*group `json:"groups"`
}

type savedAlert struct {
	Rule        string            `json:"rule"`
	Fingerprint string            `json:"fingerprint"`
	Subject     string            `json:"subject"`
	Labels      map[string]string `json:"labels"`
	State       State             `json:"state"`
	ActiveSince time.Time         `json:"active_since"`
	FiredAt     time.Time         `json:"fired_at"`
	LastTrue    time.Time         `json:"last_true"`
	Escalated   bool              `json:"escalated"`
	Actions     []string          `json:"actions"`
}

const stateVersion = 1

func (e *Engine) saveStateLocked() {
	if e.cfg.StateFile == "" {
		return
	}
	sf := stateFile{Version: stateVersion, Saved: e.opts.Now(), Silences: e.silences.all(), Groups: e.disp.groups}
	for _, a := range e.alerts {
		if a.state == StateResolved {
			continue
		}
		sf.Alerts = append(sf.Alerts, savedAlert{
			Rule: a.rule.Name, Fingerprint: a.fp, Subject: a.subject, Labels: a.labels, State: a.state,
			ActiveSince: a.activeSince, FiredAt: a.firedAt, LastTrue: a.lastTrue, Escalated: a.escalated, Actions: a.actions,
		})
	}
	b, err := json.MarshalIndent(sf, "", " ")
	if err == nil {
		err = writeAtomic(e.cfg.StateFile, b)
	}
	if err != nil {
		e.log.Error("alert: saving state", "file", e.cfg.StateFile, "err", err)
		return
	}
	e.dirty = false
}

func writeAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// loadState restores a saved state; a missing file is a first start.
func (e *Engine) loadState(path string) error {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("alert: state file: %w", err)
	}
	var sf stateFile
	if err := json.Unmarshal(b, &sf); err != nil {
		return fmt.Errorf("alert: state file %s: %w", path, err)
	}
	if sf.Version != stateVersion {
		return fmt.Errorf("alert: state file %s: version %d, want %d", path, sf.Version, stateVersion)
	}
	rules := map[string]*Rule{}
	for _, r := range e.cfg.rules {
		rules[r.Name] = r
	}
	now := e.opts.Now()
	for _, sa := range sf.Alerts {
		r := rules[sa.Rule]
		if r == nil || (sa.State != StatePending && sa.State != StateFiring) {
			continue // the rule is gone: so is its alert
		}
		a := &instance{rule: r, fp: sa.Fingerprint, subject: sa.Subject, labels: sa.Labels, state: sa.State,
			activeSince: sa.ActiveSince, firedAt: sa.FiredAt, lastTrue: sa.LastTrue, lastDecided: now,
			escalated: sa.Escalated, actions: sa.Actions}
		e.alerts[a.fp] = a
		if a.state == StateFiring {
			e.act(a, true) // the proxy forgot it on restart
		}
	}
	e.silences.replace(sf.Silences)
	for k, g := range sf.Groups {
		if g.Notified == nil {
			g.Notified = map[string]bool{}
		}
		e.disp.groups[k] = g
	}
	e.log.Info("alert: state restored", "file", path, "alerts", len(e.alerts), "silences", len(sf.Silences), "groups", len(sf.Groups))
	return nil
}
