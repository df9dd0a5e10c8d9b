package alert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"time"

	"github.com/infergate/infergate/internal/statefile"
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
	// Outbox is what the receivers are owed (see outbox).
	Outbox *savedOutbox `json:"outbox,omitempty"`
}

type savedOutbox struct {
	NextID  uint64 `json:"next_id"`
	Entries []owed `json:"entries"`
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
	// Fired is each condition's worst value while it held, and Cause
	// the cause the evidence named last (at CauseAt): what the summary
	// says. Files written before them have none; the summary then says
	// the value was not kept.
	Fired   []firedValue `json:"fired,omitempty"`
	Cause   string       `json:"cause,omitempty"`
	CauseAt time.Time    `json:"cause_at,omitzero"`
}

const stateVersion = 1

// Bounds on what a state file may restore. A real file holds a few
// alerts, silences and groups; these bound what a damaged or crafted one
// can make the proxy hold.
const (
	// maxStateFileSize is the largest alert state file read: 1,000
	// silences at their largest (silenceMaxBytes) take 8 MiB.
	maxStateFileSize  = 16 << 20
	maxRestoredAlerts = 10000
	maxRestoredGroups = 10000
	// restoredGroupTTL is how long a group restored from the file waits
	// for an alert to be routed to it again before it is forgotten.
	restoredGroupTTL = 10 * time.Minute
)

// stateFileKind labels the alert state file in the state-file metrics.
const stateFileKind = "alert_state"

// StateReset says why the engine started without its state file.
type StateReset struct {
	File   string    `json:"file"`
	Aside  string    `json:"set_aside_as,omitempty"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// persistStage writes the state file (alerts, silences, groups) when
// something it keeps changed, at most every five seconds: often enough
// that a crash loses little, seldom enough not to write every tick.
type persistStage struct {
	file     string // "" means in memory only: the stage does nothing
	alerts   map[string]*instance
	silences *silenceStore
	groups   map[string]*group
	outbox   *outbox
	log      *slog.Logger
	metrics  *statefile.Metrics
	// dirty is set by the stages (s.changed) and the API's silence
	// writes, and cleared by a successful save.
	dirty    bool
	lastSave time.Time
	// saver writes the file and reports failed saves (made at the
	// first save).
	saver *statefile.Saver
	// reset is set when the file could not be used at start.
	reset *StateReset
}

func (p *persistStage) exec(ctx context.Context, s *step) {
	now := nowOf(ctx)
	outboxChanged := p.outbox.dirty()
	p.dirty = p.dirty || s.changed || outboxChanged
	// Any change to the outbox is saved at once, whenever the last save
	// was: a new notice before the deliver stage sends it (that is what
	// lets a restart send it), a delivered one at the next step (so a
	// crash at most one evaluation later does not send it again).
	if p.file != "" && p.dirty && (outboxChanged || now.Sub(p.lastSave) >= 5*time.Second) {
		p.save(now)
		p.lastSave = now
	}
}

// save writes the state file now (saved at now). A failure is counted
// and logged (once until a save works again) and retried at the next
// save: the state stays dirty.
func (p *persistStage) save(now time.Time) {
	if p.file == "" {
		return
	}
	sf := stateFile{Version: stateVersion, Saved: now, Silences: p.silences.all(), Groups: p.groups, Outbox: &savedOutbox{}}
	sf.Outbox.NextID, sf.Outbox.Entries = p.outbox.snapshot()
	for _, a := range p.alerts {
		if a.state == StateResolved {
			continue
		}
		sf.Alerts = append(sf.Alerts, savedAlert{
			Rule: a.rule.Name, Fingerprint: a.fp, Subject: a.subject, Labels: a.labels, State: a.state,
			ActiveSince: a.activeSince, FiredAt: a.firedAt, LastTrue: a.lastTrue, Escalated: a.escalated, Actions: a.actions,
			Fired: a.fired, Cause: a.cause, CauseAt: a.causeAt,
		})
	}
	if p.saver == nil {
		p.saver = &statefile.Saver{Path: p.file, Kind: stateFileKind, Retry: "at the next save", Log: p.log, Metrics: p.metrics}
	}
	err := p.saver.Write(func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		return enc.Encode(sf)
	})
	if err != nil {
		p.outbox.saveFailed()
		return
	}
	p.dirty = false
}

// load restores a saved state at now, restarting the actions of firing
// alerts through lc; a missing file is a first start. A file that cannot
// be read or parsed is set aside (NAME.corrupt-TIMESTAMP), logged and
// counted, and the engine starts empty: the alert bookkeeping must never
// keep the proxy from serving. Entries that make no sense (a null group,
// an alert of a rule that is gone, an invalid silence) are skipped, and
// what is restored is bounded.
func (p *persistStage) load(rules []*Rule, lc *lifecycleStage, now time.Time) {
	p.metrics.Init(stateFileKind)
	sf, err := readStateFile(p.file)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		p.reset = &StateReset{File: p.file, Reason: err.Error(), At: now}
		aside, aerr := statefile.SetAside(p.file, now)
		if aerr == nil {
			p.reset.Aside = aside
		}
		p.metrics.Damaged(stateFileKind)
		p.log.Error("alert: state file unusable; starting without it", "file", p.file, "err", err, "set_aside_as", aside, "set_aside_err", aerr)
		return
	}
	byName := map[string]*Rule{}
	for _, r := range rules {
		byName[r.Name] = r
	}
	skipped := 0
	for _, sa := range sf.Alerts {
		r := byName[sa.Rule]
		if r == nil || (sa.State != StatePending && sa.State != StateFiring) || sa.Fingerprint == "" || len(p.alerts) >= maxRestoredAlerts {
			skipped++
			continue // the rule is gone: so is its alert
		}
		a := &instance{rule: r, fp: sa.Fingerprint, subject: sa.Subject, labels: sa.Labels, state: sa.State,
			activeSince: sa.ActiveSince, firedAt: sa.FiredAt, lastTrue: sa.LastTrue, lastDecided: now,
			escalated: sa.Escalated, actions: sa.Actions, cause: sa.Cause, causeAt: sa.CauseAt}
		if len(sa.Fired) == len(r.conds) {
			a.fired = sa.Fired
		}
		a.render(now)
		p.alerts[a.fp] = a
		if a.state == StateFiring {
			lc.act(a, true) // the proxy forgot it on restart
		}
	}
	var silences []Silence
	for _, si := range sf.Silences {
		if len(silences) >= maxSilences || si.ID == "" || si.Validate(now) != nil {
			skipped++
			continue
		}
		silences = append(silences, si)
	}
	p.silences.replace(silences)
	for k, g := range sf.Groups {
		if g == nil || g.Key != k || len(p.groups) >= maxRestoredGroups {
			skipped++
			continue
		}
		if g.Notified == nil {
			g.Notified = map[string]bool{}
		}
		g.restored = now
		p.groups[k] = g
	}
	if sf.Outbox != nil {
		skipped += p.outbox.restore(sf.Outbox.NextID, sf.Outbox.Entries)
	}
	if skipped > 0 {
		p.log.Warn("alert: state file entries skipped (unknown rule, invalid, or over the limits)", "file", p.file, "skipped", skipped)
	}
	p.log.Info("alert: state restored", "file", p.file, "alerts", len(p.alerts), "silences", len(silences), "groups", len(p.groups),
		"owed_notifications", p.outbox.len())
}

// readStateFile reads and checks the state file, bounded in size.
func readStateFile(path string) (*stateFile, error) {
	b, err := statefile.Read(path, maxStateFileSize)
	if err != nil {
		return nil, err
	}
	var sf stateFile
	if err := json.Unmarshal(b, &sf); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if sf.Version != stateVersion {
		return nil, fmt.Errorf("version %d, want %d", sf.Version, stateVersion)
	}
	return &sf, nil
}
