package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/infergate/infergate/admin"
	"github.com/infergate/infergate/proxy"
)

// Live reload. SIGHUP, POST /-/reload and a change of the
// --config file each re-read the whole configuration the way the start
// does (the file, then the original command line over it: flags win) and
// check it with every check the start runs. A bad configuration is
// refused whole and the running one keeps serving; a good one is applied
// by steps, each of which first prepares what it needs without touching
// what serves (prepare may fail and refuse the reload), then swaps it in
// (commit cannot fail). Settings that only a restart can change are
// named in a warning and the reload's answer; the rest applies.

// reloadStep applies one part of the configuration.
type reloadStep struct {
	name string
	// prepare readies the change from old to next. It returns nil, nil,
	// nil when its part did not change.
	prepare func(old, next *Config) (commit func() string, abort func(), err error)
}

// loadedConfig is a configuration in force and what the API shows of it.
type loadedConfig struct {
	cfg Config
	// tree is the effective configuration as YAML decodes it (secrets
	// in it), what reloads compare; shown only through redact.
	tree map[string]any
	sha  string
	at   time.Time
	// pending are settings a reload changed that wait for a restart.
	pending []string
}

// reloadResult is the answer of POST /-/reload and what the log says.
type reloadResult struct {
	// Status is success, unchanged or error.
	Status string `json:"status"`
	// Changed are the settings that differ, as the file spells them.
	Changed []string `json:"changed"`
	// Applied says what each step did.
	Applied []string `json:"applied"`
	// RestartRequired are the changed settings that wait for a restart.
	RestartRequired []string `json:"restart_required"`
	// Warnings are settings that have no effect as configured.
	Warnings []string `json:"warnings,omitempty"`
	Error    string   `json:"error,omitempty"`
	SHA256   string   `json:"sha256"`
}

// reloader re-reads and applies the configuration; one reload at a time.
type reloader struct {
	args  []string
	path  string // --config; "" when none
	log   *slog.Logger
	steps []reloadStep
	// load re-reads the configuration as the start did.
	load func(args []string) (Config, error)
	now  func() time.Time
	// poll is the period of the --config file's check.
	poll time.Duration

	mu           sync.Mutex
	cur          atomic.Pointer[loadedConfig]
	lastOK, okAt prometheus.Gauge
}

// reloadGauges are the reload's two metrics, registered with the other
// parts (newParts) so that the metric reference lists them.
type reloadGauges struct{ lastOK, okAt prometheus.Gauge }

func newReloadGauges(reg prometheus.Registerer) (*reloadGauges, error) {
	g := &reloadGauges{
		lastOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "infergate_config_last_reload_successful",
			Help: "Whether the last configuration reload (SIGHUP, POST /-/reload, a change of --config's file) succeeded (1) or was refused (0).",
		}),
		okAt: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "infergate_config_last_reload_success_timestamp_seconds",
			Help: "When the configuration was last loaded successfully (the start counts), in Unix seconds.",
		}),
	}
	for _, c := range []prometheus.Collector{g.lastOK, g.okAt} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	return g, nil
}

// newReloader starts from cfg, the configuration the process started
// with, read from args; g are its metrics.
func newReloader(cfg Config, log *slog.Logger, g *reloadGauges) (*reloader, error) {
	r := &reloader{
		args: cfg.args, path: configPath(cfg.args), log: log, now: time.Now, poll: time.Second,
		load: func(args []string) (Config, error) {
			c, err := parseConfig(args)
			if err == nil {
				err = c.readFiles()
			}
			return c, err
		},
		lastOK: g.lastOK, okAt: g.okAt,
	}
	lc, err := newLoaded(cfg, r.now())
	if err != nil {
		return nil, err
	}
	r.cur.Store(lc)
	r.lastOK.Set(1)
	r.okAt.Set(float64(lc.at.UnixNano()) / 1e9)
	return r, nil
}

// configPath is --config's value in args, "" when none.
func configPath(args []string) string {
	var path string
	var errs []error
	c := defaultConfig()
	fs := newFlagSet(&c, &path, &errs)
	fs.SetOutput(nopWriter{})
	_ = fs.Parse(args)
	return path
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }

// effective is c as it is in force: the alerting section as the three
// places it comes from (alerting:, rules:/slo:, --rules) made it.
func effective(c Config) Config {
	if c.alerts != nil {
		c.Alerting = *c.alerts
		c.Rules, c.SLO = nil, nil
	}
	return c
}

func newLoaded(c Config, at time.Time) (*loadedConfig, error) {
	b, err := yaml.Marshal(effective(c))
	if err != nil {
		return nil, fmt.Errorf("config: render: %w", err)
	}
	var tree map[string]any
	if err := yaml.Unmarshal(b, &tree); err != nil {
		return nil, fmt.Errorf("config: render: %w", err)
	}
	// The token is not in the file's tree (a file holds it): a new one
	// is a change too, so it counts in the hash.
	sum := sha256.Sum256(append(b, c.adminToken...))
	return &loadedConfig{cfg: c, tree: tree, sha: hex.EncodeToString(sum[:]), at: at}, nil
}

// restartOnly are the settings read once at start, as the file names
// them: a path is one of them when it is one or lies under one.
var restartOnly = []string{
	"listen", "admin", "tls", "fast_path", "front_door", "upstream_tls",
	"max_message_bytes", "upstream_conns", "upstream_timeout", "upstream_keepalive_time", "max_in_flight",
	"shutdown_timeout", "drain_delay", "readiness", "monitor", "gpu", "pprof",
	// The tracing sampler changes live (tracingStep); the exporter is
	// built once.
	"tracing.enabled", "tracing.protocol", "tracing.endpoint", "tracing.service_name",
	"log.format", "log.requests", "log.interval",
	"alerting.evaluation_interval", "alerting.state_file", "alerting.baseline", "alert_state_file",
	"admin_token_file", "batching.key_headers",
}

func isRestartOnly(path string) bool {
	for _, p := range restartOnly {
		if path == p || strings.HasPrefix(path, p+".") {
			return true
		}
	}
	return false
}

// diffPaths lists the paths (dotted, at most three deep) where a and b
// differ.
func diffPaths(a, b map[string]any) []string {
	var out []string
	var walk func(prefix string, a, b map[string]any, depth int)
	walk = func(prefix string, a, b map[string]any, depth int) {
		keys := map[string]bool{}
		for k := range a {
			keys[k] = true
		}
		for k := range b {
			keys[k] = true
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			p := prefix + k
			if reflect.DeepEqual(a[k], b[k]) {
				continue
			}
			am, aok := a[k].(map[string]any)
			bm, bok := b[k].(map[string]any)
			if depth < 3 && (aok || a[k] == nil) && (bok || b[k] == nil) {
				walk(p+".", am, bm, depth+1)
				continue
			}
			out = append(out, p)
		}
	}
	walk("", a, b, 1)
	return out
}

// reload re-reads the configuration and applies it; trigger says what
// asked (sighup, api, file).
func (r *reloader) reload(trigger string) reloadResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	old := r.cur.Load()
	refuse := func(err error) reloadResult {
		r.lastOK.Set(0)
		r.log.Error("configuration reload refused; the running configuration keeps serving", "trigger", trigger, "err", err)
		return reloadResult{Status: "error", Error: err.Error(), SHA256: old.sha, Changed: []string{}, Applied: []string{}, RestartRequired: []string{}}
	}
	next, err := r.load(r.args)
	if err != nil {
		return refuse(err)
	}
	nl, err := newLoaded(next, r.now())
	if err != nil {
		return refuse(err)
	}
	res := reloadResult{Status: "success", Changed: diffPaths(old.tree, nl.tree), Applied: []string{}, RestartRequired: []string{}, SHA256: nl.sha}
	if next.adminToken != old.cfg.adminToken {
		res.Changed = append(res.Changed, "admin_token")
	}
	res.Warnings = effectWarnings(next)
	if len(res.Changed) == 0 {
		r.lastOK.Set(1)
		r.okAt.Set(float64(nl.at.UnixNano()) / 1e9)
		nl.cfg, nl.tree, nl.pending = old.cfg, old.tree, old.pending
		r.cur.Store(nl)
		r.log.Info("configuration reloaded: nothing changed", "trigger", trigger, "sha256", nl.sha)
		res.Status = "unchanged"
		return res
	}
	var commits []func() string
	var aborts []func()
	for _, st := range r.steps {
		commit, abort, err := st.prepare(&old.cfg, &next)
		if err != nil {
			for _, a := range aborts {
				a()
			}
			return refuse(fmt.Errorf("%s: %w", st.name, err))
		}
		if commit != nil {
			commits = append(commits, commit)
		}
		if abort != nil {
			aborts = append(aborts, abort)
		}
	}
	for _, c := range commits {
		if did := c(); did != "" {
			res.Applied = append(res.Applied, did)
		}
	}
	pending := map[string]bool{}
	for _, p := range old.pending {
		pending[p] = true
	}
	for _, p := range res.Changed {
		if isRestartOnly(p) {
			pending[p] = true
		}
	}
	for _, p := range restartPending(old.cfg, next) {
		pending[p] = true
	}
	nl.pending = slices.Sorted(maps.Keys(pending))
	for _, p := range res.Changed {
		if pending[p] {
			res.RestartRequired = append(res.RestartRequired, p)
		}
	}
	r.cur.Store(nl)
	r.lastOK.Set(1)
	r.okAt.Set(float64(nl.at.UnixNano()) / 1e9)
	r.log.Info("configuration reloaded", "trigger", trigger, "changed", strings.Join(res.Changed, ","),
		"applied", strings.Join(res.Applied, "; "), "sha256", nl.sha)
	if len(res.RestartRequired) > 0 {
		r.log.Warn("configuration reload: these settings change only at a restart; the running values stay until then",
			"settings", strings.Join(res.RestartRequired, ","))
	}
	for _, w := range res.Warnings {
		r.log.Warn("configuration: " + w)
	}
	return res
}

// restartPending names the changes no step can make live whatever the
// setting. Batching and routing are not among them: the batcher and the
// router are built at start whatever the setting (an empty one costs a
// call nothing), and a reload fills them.
func restartPending(old, next Config) []string {
	var out []string
	// The default upstream moves (routingStep) between host:port
	// addresses, or lists of them (its endpoints change); one dialled
	// with a scheme (dns:///, unix:) is not movable
	// (proxy.Upstream.Move).
	_, from := old.routes.Default()
	if _, to := next.routes.Default(); to != from && (!proxy.PlainEndpoints(from) || !proxy.PlainEndpoints(to)) {
		out = append(out, "upstream")
	}
	return out
}

// run reloads on SIGHUP (hup) and when the --config file changes, until
// ctx ends. The file is checked every poll: its resolved path (a
// Kubernetes ConfigMap swaps a ..data symlink) and the hash of its
// content, so an edit, a rename over it and a symlink swap all count,
// and no watcher library is needed.
func (r *reloader) run(ctx context.Context, hup <-chan os.Signal) {
	var tick <-chan time.Time
	last := ""
	if r.path != "" {
		t := time.NewTicker(r.poll)
		defer t.Stop()
		tick = t.C
		last = fileState(r.path)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			r.reload("sighup")
			if r.path != "" {
				last = fileState(r.path)
			}
		case <-tick:
			st := fileState(r.path)
			if st == "" || st == last {
				continue // unchanged, or missing for a moment mid-swap
			}
			last = st
			r.reload("file")
		}
	}
}

// fileState is path's resolved target and content hash; "" when it
// cannot be read.
func fileState(path string) string {
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return ""
	}
	b, err := os.ReadFile(target)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return target + "\x00" + hex.EncodeToString(sum[:])
}

// reloadAPI answers POST /-/reload (the admin guards it with its token,
// as every write).
func (r *reloader) reloadAPI(w http.ResponseWriter, _ *http.Request) {
	res := r.reload("api")
	code := http.StatusOK
	if res.Status == "error" {
		code = http.StatusBadRequest
	}
	admin.WriteJSON(w, code, res)
}

// statusConfig answers the configuration in force, secrets redacted, as
// YAML, or as JSON with ?format=json or Accept: application/json.
func (r *reloader) statusConfig(w http.ResponseWriter, req *http.Request) {
	lc := r.cur.Load()
	body := map[string]any{
		"sha256":           lc.sha,
		"loaded_at":        lc.at.UTC().Format(time.RFC3339Nano),
		"restart_required": append([]string{}, lc.pending...),
		"config":           redact(lc.tree, ""),
	}
	if req.URL.Query().Get("format") == "json" || strings.Contains(req.Header.Get("Accept"), "application/json") {
		admin.WriteJSON(w, http.StatusOK, jsonSafe(body))
		return
	}
	b, err := yaml.Marshal(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/yaml")
	w.Write(b)
}

// jsonSafe turns what YAML decodes (map[any]any never appears with
// map[string]any at the top, but nested keys may be numbers) into what
// encoding/json takes.
func jsonSafe(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonSafe(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[fmt.Sprint(k)] = jsonSafe(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonSafe(e)
		}
		return out
	}
	return v
}

// redacted stands for a secret in /api/v1/status/config.
const redacted = "<secret>"

// secretKeys are settings whose value is a secret wherever they appear.
// Paths to files holding secrets (bearer_token_file, auth_password_file,
// admin_token_file) are shown: they are not the secret.
var secretKeys = map[string]bool{
	"password": true, "auth_password": true, "auth_username": true, "auth_secret": true, "auth_identity": true,
	"token": true, "bearer_token": true, "api_key": true, "secret": true, "routing_key": true,
}

// redact returns v with secrets replaced: every value of a headers map
// (Authorization and the like), the secret keys, a Slack or WeCom
// webhook URL (the URL is the credential), and in every other URL its
// user info and query values.
func redact(v any, key string) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			switch {
			case k == "headers":
				out[k] = redactAll(e)
			case secretKeys[k]:
				out[k] = redacted
			case (key == "slack_configs" || key == "wecom_configs") && k == "url":
				out[k] = redacted
			default:
				out[k] = redact(e, k)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = redact(e, key)
		}
		return out
	case string:
		return redactURL(x)
	}
	return v
}

func redactAll(v any) any {
	if m, ok := v.(map[string]any); ok {
		out := make(map[string]any, len(m))
		for k := range m {
			out[k] = redacted
		}
		return out
	}
	return redacted
}

// redactURL hides the user info and query values of an absolute URL.
func redactURL(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return s
	}
	if u.User != nil {
		u.User = url.User(redacted)
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{redacted}
		}
		u.RawQuery = q.Encode()
	}
	out := u.String()
	// url escapes the placeholder's brackets; show it as written.
	return strings.NewReplacer("%3Csecret%3E", redacted).Replace(out)
}

// yamlMarshal is yaml.Marshal, for the tests.
func yamlMarshal(v any) ([]byte, error) { return yaml.Marshal(v) }
