package alert

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
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

// persistStage writes the state file (alerts, silences, groups) when
// something it keeps changed, at most every five seconds: often enough
// that a crash loses little, seldom enough not to write every tick.
type persistStage struct {
	file     string // "" means in memory only: the stage does nothing
	alerts   map[string]*instance
	silences *silenceStore
	groups   map[string]*group
	log      *slog.Logger
	// dirty is set by the stages (s.changed) and the API's silence
	// writes, and cleared by a successful save.
	dirty    bool
	lastSave time.Time
}

func (p *persistStage) exec(ctx context.Context, s *step) {
	now := nowOf(ctx)
	p.dirty = p.dirty || s.changed
	if p.file != "" && p.dirty && now.Sub(p.lastSave) >= 5*time.Second {
		p.save(now)
		p.lastSave = now
	}
}

// save writes the state file now (saved at now).
func (p *persistStage) save(now time.Time) {
	if p.file == "" {
		return
	}
	sf := stateFile{Version: stateVersion, Saved: now, Silences: p.silences.all(), Groups: p.groups}
	for _, a := range p.alerts {
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
		err = writeAtomic(p.file, b)
	}
	if err != nil {
		p.log.Error("alert: saving state", "file", p.file, "err", err)
		return
	}
	p.dirty = false
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

// load restores a saved state at now, restarting the actions of firing
// alerts through lc; a missing file is a first start.
func (p *persistStage) load(rules []*Rule, lc *lifecycleStage, now time.Time) error {
	path := p.file
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
	byName := map[string]*Rule{}
	for _, r := range rules {
		byName[r.Name] = r
	}
	for _, sa := range sf.Alerts {
		r := byName[sa.Rule]
		if r == nil || (sa.State != StatePending && sa.State != StateFiring) {
			continue // the rule is gone: so is its alert
		}
		a := &instance{rule: r, fp: sa.Fingerprint, subject: sa.Subject, labels: sa.Labels, state: sa.State,
			activeSince: sa.ActiveSince, firedAt: sa.FiredAt, lastTrue: sa.LastTrue, lastDecided: now,
			escalated: sa.Escalated, actions: sa.Actions}
		p.alerts[a.fp] = a
		if a.state == StateFiring {
			lc.act(a, true) // the proxy forgot it on restart
		}
	}
	p.silences.replace(sf.Silences)
	for k, g := range sf.Groups {
		if g.Notified == nil {
			g.Notified = map[string]bool{}
		}
		p.groups[k] = g
	}
	p.log.Info("alert: state restored", "file", path, "alerts", len(p.alerts), "silences", len(sf.Silences), "groups", len(sf.Groups))
	return nil
}
