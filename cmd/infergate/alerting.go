package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/infergate/infergate/alert"
	"github.com/infergate/infergate/internal/statefile"
	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/monitor/baseline"
)

// alertingConfig builds the alert configuration from its three places:
// the alerting: section, the top-level rules: and slo: sections of
// --config, and the --rules file (whose sections win). It validates it
// and reads the admin token.
func (c *Config) alertingConfig() []error {
	ac := c.Alerting
	if c.Rules != nil {
		ac.Rules = c.Rules
	}
	if c.SLO != nil {
		ac.SLO = c.SLO
	}
	var errs []error
	if c.RulesFile != "" {
		fc, err := loadRulesFile(c.RulesFile)
		if err != nil {
			return []error{err}
		}
		overlay(&ac, fc)
	}
	if c.AlertStateFile != "" {
		ac.StateFile = c.AlertStateFile
	}
	if err := ac.Validate(); err != nil {
		where := "config: "
		if c.RulesFile != "" {
			where = "rules " + c.RulesFile + ": "
		}
		for _, e := range unjoin(err) {
			errs = append(errs, fmt.Errorf("%s%v", where, e))
		}
	}
	c.alerts = &ac
	if c.AdminTokenFile != "" {
		b, err := os.ReadFile(c.AdminTokenFile)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("config: admin_token_file: %v", err))
		case strings.TrimSpace(string(b)) == "":
			errs = append(errs, fmt.Errorf("config: admin_token_file: %s is empty", c.AdminTokenFile))
		default:
			c.adminToken = strings.TrimSpace(string(b))
		}
	}
	return errs
}

// unjoin splits an errors.Join into its errors.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// loadRulesFile reads a --rules file: the alerting sections (rules, slo,
// route, receivers, inhibit_rules, schedules, baseline, ...) at the top.
func loadRulesFile(path string) (alert.Config, error) {
	var ac alert.Config
	f, err := os.Open(path)
	if err != nil {
		return ac, fmt.Errorf("rules: %w", err)
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	dec.KnownFields(true)
	if err := dec.Decode(&ac); err != nil && !errors.Is(err, io.EOF) {
		return ac, fmt.Errorf("rules: %s: %s", path, yamlMessage(err, nil))
	}
	return ac, nil
}

// overlay copies the sections the rules file sets over ac.
func overlay(ac *alert.Config, fc alert.Config) {
	if fc.EvaluationInterval != 0 {
		ac.EvaluationInterval = fc.EvaluationInterval
	}
	if fc.SLO != nil {
		ac.SLO = fc.SLO
	}
	if fc.Rules != nil {
		ac.Rules = fc.Rules
	}
	if fc.Route != nil {
		ac.Route = fc.Route
	}
	if fc.Receivers != nil {
		ac.Receivers = fc.Receivers
	}
	if fc.Inhibit != nil {
		ac.Inhibit = fc.Inhibit
	}
	if fc.Schedules != nil {
		ac.Schedules = fc.Schedules
	}
	if fc.StateFile != "" {
		ac.StateFile = fc.StateFile
	}
	if fc.ExternalURL != "" {
		ac.ExternalURL = fc.ExternalURL
	}
	if fc.Baseline.File != "" || fc.Baseline.TimeZone != "" || fc.Baseline.Holidays != nil || fc.Baseline.Weeks != 0 || fc.Baseline.TimeScale != 0 || fc.Baseline.Prometheus != "" {
		ac.Baseline = fc.Baseline
	}
}

// baselineFileKind labels the baseline file in the state-file metrics.
const baselineFileKind = "baseline"

// newBaselines builds the shared baseline store and loads its history. A
// baseline file that cannot be read or parsed is set aside
// (NAME.corrupt-TIMESTAMP), logged and counted, and the baselines learn
// again from live traffic: only alerting reads them, and alerting must
// never keep the proxy from serving.
func newBaselines(ac *alert.Config, fm *statefile.Metrics, log *slog.Logger) (*baseline.Store, error) {
	opts := baseline.Options{Holidays: ac.Baseline.Holidays, Weeks: ac.Baseline.Weeks, Scale: ac.Baseline.TimeScale, MinLearn: ac.Baseline.Learn}
	if ac.Baseline.TimeZone != "" {
		loc, err := time.LoadLocation(ac.Baseline.TimeZone)
		if err != nil {
			return nil, err
		}
		opts.Location = loc
	}
	st := baseline.New(opts)
	if f := ac.Baseline.File; f != "" {
		fm.Init(baselineFileKind)
		b, err := statefile.Read(f, 0)
		if err == nil {
			err = st.Load(bytes.NewReader(b))
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			now := time.Now()
			aside, aerr := statefile.SetAside(f, now)
			fm.Damaged(baselineFileKind)
			log.Error("baseline file unusable; learning from live traffic", "file", f, "err", err, "set_aside_as", aside, "set_aside_err", aerr)
			st = baseline.New(opts) // nothing half-loaded
		default:
			log.Info("baseline loaded", "file", f, "models", len(st.Infos()))
		}
	}
	if u := ac.Baseline.Prometheus; u != "" {
		// A warm start is a bonus: a Prometheus that does not answer
		// leaves the baseline to learn from live traffic.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		n, err := st.WarmFromPrometheus(ctx, strings.TrimSuffix(u, "/"), nil)
		cancel()
		if err != nil {
			log.Warn("baseline: warm start failed; learning from live traffic", "err", err)
		} else {
			log.Info("baseline warmed from Prometheus", "url", u, "models", n)
		}
	}
	return st, nil
}

// sloFunc gives the correlator each model's SLO.
func sloFunc(ac *alert.Config) func(string) baseline.SLO {
	return func(model string) baseline.SLO {
		s, ok := ac.SLOFor(model)
		if !ok {
			return baseline.SLO{}
		}
		return baseline.SLO{s.P50, s.P90, s.P99}
	}
}

// alerting is the running alert engine and what it keeps on disk.
type alerting struct {
	engine    *alert.Engine
	baselines *baseline.Store
	file      string
	log       *slog.Logger
	saver     *statefile.Saver // nil without a baseline file
}

func startAlerting(ac *alert.Config, mon *monitor.Registry, gt *gpuRuntime, st *baseline.Store, act alert.Actuator,
	rel alert.ReleaseSource, reg prometheus.Registerer, fm *statefile.Metrics, log *slog.Logger) (*alerting, error) {
	var tick <-chan time.Time
	if ac.EvaluationInterval == time.Second { // the slice length: evaluate as each slice completes
		tick = mon.Rotations()
	}
	e, err := alert.New(alert.Options{
		Config: ac, Latency: mon, Models: gt.corr.Models, GPU: gt.hub.State, Baselines: st,
		Actuator: act, Releases: rel, Logger: log, Registerer: reg, FileMetrics: fm, SliceLength: time.Second, Tick: tick,
	})
	if err != nil {
		return nil, err
	}
	a := &alerting{engine: e, baselines: st, file: ac.Baseline.File, log: log}
	if a.file != "" {
		a.saver = &statefile.Saver{Path: a.file, Kind: baselineFileKind, Retry: "every minute", Log: log, Metrics: fm}
	}
	return a, nil
}

// run evaluates until ctx ends and saves the baseline every minute and
// at the end.
func (a *alerting) run(ctx context.Context) {
	done := make(chan struct{})
	go func() { a.engine.Run(ctx); close(done) }()
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			<-done
			a.save()
			return
		case <-t.C:
			a.baselines.Forget(30 * 24 * time.Hour)
			a.save()
		}
	}
}

func (a *alerting) save() {
	if a.saver != nil {
		_ = a.saver.Write(a.baselines.Save) // reported by the saver; tried again in a minute
	}
}
