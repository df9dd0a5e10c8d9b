package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/infergate/infergate/proto/kservepb"
)

const (
	dashboardFile  = "../examples/grafana/dashboards/infergate.json"
	datasourceFile = "../examples/grafana/provisioning/datasources/infergate.yaml"
	providerFile   = "../examples/grafana/provisioning/dashboards/infergate.yaml"
)

// grafanaPanel is what the tests read of a dashboard panel; rows nest
// their panels when collapsed.
type grafanaPanel struct {
	Title      string         `json:"title"`
	Type       string         `json:"type"`
	Repeat     string         `json:"repeat"`
	Datasource map[string]any `json:"datasource"`
	Targets    []struct {
		RefID      string         `json:"refId"`
		Expr       string         `json:"expr"`
		Datasource map[string]any `json:"datasource"`
		Exemplar   bool           `json:"exemplar"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"`
}

type grafanaDashboard struct {
	Inputs     []any          `json:"__inputs"`
	Panels     []grafanaPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string         `json:"name"`
			Type       string         `json:"type"`
			Query      any            `json:"query"`
			AllValue   string         `json:"allValue"`
			Datasource map[string]any `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

func loadDashboard(t *testing.T) (grafanaDashboard, string) {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d grafanaDashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d, string(b)
}

// eachPanel calls f for every panel, and for the panels rows nest.
func eachPanel(ps []grafanaPanel, f func(grafanaPanel)) {
	for _, p := range ps {
		f(p)
		eachPanel(p.Panels, f)
	}
}

// dashQuery is one PromQL expression of the dashboard and where it is.
type dashQuery struct {
	where, expr string
	repeat      string // the variable its panel repeats over, if any
}

// dashboardQueries walks every panel, rows' nested panels included, and
// returns each target's expression, and each query variable's
// label_values(selector, label) as the PromQL Grafana runs for it.
func dashboardQueries(t *testing.T, d grafanaDashboard) []dashQuery {
	t.Helper()
	var out []dashQuery
	eachPanel(d.Panels, func(p grafanaPanel) {
		for _, tg := range p.Targets {
			out = append(out, dashQuery{where: fmt.Sprintf("panel %q target %s", p.Title, tg.RefID), expr: tg.Expr, repeat: p.Repeat})
		}
	})
	labelValues := regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			t.Fatalf("variable %s: query %q is not label_values(selector, label)", v.Name, q)
		}
		out = append(out, dashQuery{where: "variable " + v.Name, expr: fmt.Sprintf("count by (%s) (%s)", m[2], m[1])})
	}
	return out
}

// substitute stands in for Grafana: it replaces $name and ${name} by
// vars[name] and refuses an expression with any other variable left.
func substitute(expr string, vars map[string]string) (string, error) {
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	// Longest first: $__rate_interval before $__interval, $model before $m.
	slices.SortFunc(keys, func(a, b string) int { return len(b) - len(a) })
	for _, k := range keys {
		expr = strings.ReplaceAll(expr, "${"+k+"}", vars[k])
		expr = strings.ReplaceAll(expr, "$"+k, vars[k])
	}
	if i := strings.IndexByte(expr, '$'); i >= 0 {
		return "", fmt.Errorf("unknown variable at %q", expr[i:])
	}
	return expr, nil
}

// hasData reports whether a vector has a finite value: an expression
// that returns only NaN (a quantile of nothing) shows an empty panel too.
func hasData(v []promSample) bool {
	for _, s := range v {
		if len(s.Histogram) == 2 {
			return true
		}
		if f, err := s.Float(); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
			return true
		}
	}
	return false
}

// metricName matches the infergate metric names an expression reads.
var metricName = regexp.MustCompile(`\binfergate_[a-z0-9_]+`)

// family maps a classic histogram's or summary's series to its family.
func family(name string) string {
	for _, suf := range []string{"_bucket", "_count", "_sum"} {
		name = strings.TrimSuffix(name, suf)
	}
	return name
}

// TestGrafanaDashboardModel: the dashboard works provisioned and
// imported alike (a datasource variable, no __inputs), and the
// provisioning files say what Grafana needs.
func TestGrafanaDashboardModel(t *testing.T) {
	d, raw := loadDashboard(t)
	if len(d.Inputs) > 0 || strings.Contains(raw, "${DS_") {
		t.Error("the dashboard uses __inputs/${DS_...}: a provisioned copy fails with datasource not found")
	}
	var dsVar bool
	for _, v := range d.Templating.List {
		if v.Type == "datasource" && v.Name == "datasource" && v.Query == "prometheus" {
			dsVar = true
		}
		if v.Type == "query" && v.Datasource["uid"] != "${datasource}" {
			t.Errorf("variable %s reads datasource %v, want ${datasource}", v.Name, v.Datasource)
		}
	}
	if !dsVar {
		t.Error("no datasource variable of type datasource with query prometheus")
	}
	eachPanel(d.Panels, func(p grafanaPanel) {
		if p.Type != "row" && p.Datasource["uid"] != "${datasource}" {
			t.Errorf("panel %q reads datasource %v, want ${datasource}", p.Title, p.Datasource)
		}
		for _, tg := range p.Targets {
			if tg.Datasource["uid"] != "${datasource}" {
				t.Errorf("panel %q target %s reads datasource %v", p.Title, tg.RefID, tg.Datasource)
			}
			// The latency histogram carries traced calls' trace ids:
			// its time series panels show them, so a p99 spike links
			// to a trace (a stat panel has no points to mark).
			if p.Type == "timeseries" && strings.Contains(tg.Expr, "infergate_request_duration_seconds") && !tg.Exemplar {
				t.Errorf("panel %q target %s reads the latency histogram without \"exemplar\": true", p.Title, tg.RefID)
			}
		}
	})

	var ds struct {
		APIVersion  int `yaml:"apiVersion"`
		Datasources []struct {
			Type     string            `yaml:"type"`
			URL      string            `yaml:"url"`
			JSONData map[string]string `yaml:"jsonData"`
		} `yaml:"datasources"`
	}
	var prov struct {
		APIVersion int `yaml:"apiVersion"`
		Providers  []struct {
			Name    string            `yaml:"name"`
			Type    string            `yaml:"type"`
			Options map[string]string `yaml:"options"`
		} `yaml:"providers"`
	}
	for _, f := range []struct {
		path string
		v    any
	}{{datasourceFile, &ds}, {providerFile, &prov}} {
		b, err := os.ReadFile(f.path)
		if err == nil {
			err = yaml.Unmarshal(b, f.v)
		}
		if err != nil {
			t.Fatalf("%s: %v", f.path, err)
		}
	}
	if ds.APIVersion != 1 || len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL == "" ||
		ds.Datasources[0].JSONData["timeInterval"] == "" {
		t.Errorf("%s: want apiVersion 1 and one prometheus datasource with a url and jsonData.timeInterval: %+v", datasourceFile, ds)
	}
	if prov.APIVersion != 1 || len(prov.Providers) != 1 || prov.Providers[0].Type != "file" || prov.Providers[0].Options["path"] == "" {
		t.Errorf("%s: want apiVersion 1 and one file provider with options.path: %+v", providerFile, prov)
	}
}

// dashboardRules are the alert rules of the dashboard test: a latency
// threshold every model crosses (so the exported rule must fire in
// Prometheus, from the native histograms) and an error ratio.
const dashboardRules = `rules:
  - name: FleetP99Over1ms
    kind: threshold
    select: {model: resnet50}
    quantile: p99
    window: 1m
    value: 1ms
    severity: warning
  - name: ModelErrorRatio
    kind: errors
    ratio: 1%
    window: 2s
    severity: critical
  - name: ModelAnomaly
    kind: anomaly
    severity: warning
`

// TestGrafanaDashboardQueriesHaveData: two infergate replicas with
// batching, a fallback route and GPU telemetry in front of simserver
// under load, scraped by a real Prometheus run with
// examples/prometheus/prometheus.yml and the exported rules; every PromQL
// expression of the dashboard (every panel's targets, rows included, and
// the variables' label_values), with Grafana's variables substituted,
// returns data. The exported rules evaluate without error, the latency
// one fires from the native histograms (the only form this Prometheus
// stores), and they read the same series as the dashboard.
func TestGrafanaDashboardQueriesHaveData(t *testing.T) {
	d, _ := loadDashboard(t)
	queries := dashboardQueries(t, d)
	dir := t.TempDir()
	rulesPath := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rulesPath, []byte(dashboardRules), 0o644); err != nil {
		t.Fatal(err)
	}
	exported, err := exec.Command(filepath.Join(binDir, "infergate"), "rules", "export", "--rules", rulesPath).Output()
	if err != nil {
		t.Fatalf("rules export: %v", err)
	}

	// resnet50 is served as versions 1 and 2, for the version panels.
	pri := startSim(t, "--gpu-interval", "200ms", "--config", versionedDefaults(t))
	edge := startSim(t)
	// A release of resnet50 for the release panels (half its unnamed
	// calls to version 2, a fixed split).
	releaseCfg := filepath.Join(dir, "infergate.yaml")
	// A business metric for the latency-against-business-metric panel:
	// its Prometheus is a stub answering every instant query with one
	// series (the real Prometheus starts after the proxies, on a port
	// not known yet; TestBusinessMetricLag reads a real one).
	biz := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[%d,"0.031"]}]}}`, time.Now().Unix())
	}))
	t.Cleanup(biz.Close)
	if err := os.WriteFile(releaseCfg, []byte("releases:\n  - {model: resnet50, stable: {version: \"1\"}, candidate: {version: \"2\"}, weight: 50}\n"+
		"business_metrics:\n  - {name: conversion, query: conversion_rate, url: \""+biz.URL+"\", interval: 1s}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var admins, grpcs []string
	for range 2 {
		g := startProxy(t, pri.grpc, "--config", releaseCfg, "--rules", rulesPath,
			"--batching", "adaptive", "--batch-models", "resnet50", "--batch-max-size", "64",
			"--fallback", "resnet50="+edge.grpc+"/mobilenet_v3", "--flow-control",
			"--gpu-source", "prometheus", "--gpu-metrics-url", "http://"+pri.admin+"/metrics", "--gpu-interval", "200ms")
		admins, grpcs = append(admins, g.admin), append(grpcs, g.grpc)
	}
	prom := startPrometheus(t, "1s", string(exported), admins...)
	// Server errors for the error panels: a fifth of mobilenet_v3's calls.
	fault(t, pri.admin, `{"model":"mobilenet_v3","error_rate":0.2,"error_code":"INTERNAL"}`)

	// Load on both replicas: batched resnet50 callers and one mobilenet_v3
	// caller each, paced so that two cores keep up.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for _, addr := range grpcs {
		kc := kservepb.NewGRPCInferenceServiceClient(dial(t, addr))
		for w := range 5 {
			req := resnetRequest("resnet50", 1+w%3)
			switch w {
			case 1, 2: // two callers name a version: a canary beside its baseline
				req.ModelVersion = strconv.Itoa(w)
			case 4:
				req = resnetRequest("mobilenet_v3", 1)
			}
			wg.Go(func() {
				tk := time.NewTicker(10 * time.Millisecond)
				defer tk.Stop()
				for ctx.Err() == nil {
					cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
					kc.ModelInfer(cctx, req) // errors are part of the load
					ccancel()
					select {
					case <-tk.C:
					case <-ctx.Done():
					}
				}
			})
		}
	}

	// Every expression with the variables at All (their allValue), and the
	// repeated panel's also for one model (Grafana repeats it per model).
	// The built-in intervals are what Grafana computes for a 1s scrape
	// interval ($__rate_interval is at least four scrapes).
	vars := map[string]string{"__rate_interval": "10s", "__interval": "2s", "__range": "1m"}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			if v.AllValue == "" {
				t.Fatalf("variable %s has no allValue", v.Name)
			}
			vars[v.Name] = v.AllValue
		}
	}
	type check struct{ where, expr string }
	var checks []check
	for _, q := range queries {
		expr, err := substitute(q.expr, vars)
		if err != nil {
			t.Fatalf("%s: %v", q.where, err)
		}
		checks = append(checks, check{q.where, expr})
		if q.repeat == "model" {
			one := map[string]string{"model": "resnet50"}
			for k, v := range vars {
				if k != "model" {
					one[k] = v
				}
			}
			expr, _ := substitute(q.expr, one)
			checks = append(checks, check{q.where + " (model=resnet50)", expr})
		}
	}
	// Series appear as the load, the batcher, the GPU sampler and the
	// alert evaluation get going: each expression is retried until it has
	// data. An error (a parse error, a many-to-many match) is final.
	start := time.Now()
	pending := checks
	last := map[string]string{}
	for len(pending) > 0 && time.Since(start) < 60*time.Second {
		time.Sleep(time.Second)
		var still []check
		for _, c := range pending {
			v, err := promQuery(prom, c.expr, time.Time{})
			switch {
			case err != nil:
				t.Errorf("%s: %v", c.where, err)
			case !hasData(v):
				last[c.where] = fmt.Sprintf("no data: %s = %v", c.expr, v)
				still = append(still, c)
			}
		}
		pending = still
	}
	for _, c := range pending {
		t.Errorf("%s: %s", c.where, last[c.where])
	}
	t.Logf("%d expressions (%d dashboard queries) checked in %v", len(checks), len(queries), time.Since(start).Round(time.Second))

	// The version ratio: one series per version of resnet50 that clients
	// named (not the unversioned calls), the busiest version at 1.
	ratioPanels := 0
	eachPanel(d.Panels, func(p grafanaPanel) {
		if !strings.HasPrefix(p.Title, "Version ratio") {
			return
		}
		ratioPanels++
		expr, _ := substitute(p.Targets[0].Expr, vars)
		expr = strings.ReplaceAll(expr, `model=~".+"`, `model="resnet50"`)
		v, err := promQuery(prom, expr, time.Time{})
		if err != nil {
			t.Fatalf("%s: %v", p.Title, err)
		}
		got := map[string]float64{}
		for _, s := range v {
			got[s.Metric["version"]], _ = s.Float()
		}
		if len(got) != 2 || (got["1"] != 1 && got["2"] != 1) || math.IsNaN(got["1"]+got["2"]) {
			t.Errorf("%s for resnet50 = %v, want versions 1 and 2, one of them 1", p.Title, got)
		}
		t.Logf("%s for resnet50: %v", p.Title, got)
	})
	if ratioPanels != 1 {
		t.Errorf("%d version ratio panels, want 1", ratioPanels)
	}

	// p99 by size class: resnet50's callers send 1 to 3 rows of 64 FP32
	// (256 to 768 bytes), so every call falls in le_4KiB: one series, by
	// its class.
	sizePanels := 0
	eachPanel(d.Panels, func(p grafanaPanel) {
		if !strings.HasSuffix(p.Title, "p99 by size class") {
			return
		}
		sizePanels++
		expr, _ := substitute(p.Targets[0].Expr, map[string]string{"job": ".+", "model": "resnet50", "__rate_interval": "10s"})
		v, err := promQuery(prom, expr, time.Time{})
		if err != nil {
			t.Fatalf("%s: %v", p.Title, err)
		}
		got := map[string]bool{}
		for _, s := range v {
			got[s.Metric["size_class"]] = true
		}
		if !got["le_4KiB"] || len(got) != 1 {
			t.Errorf("%s for resnet50: size classes %v, want le_4KiB alone", p.Title, got)
		}
	})
	if sizePanels != 1 {
		t.Errorf("%d size class panels, want 1", sizePanels)
	}

	// The exported rules: healthy, and the latency rule fires from the
	// native histograms.
	waitProm(t, prom, `ALERTS{alertname="FleetP99Over1ms", alertstate="firing", model="resnet50"}`, func(v []promSample) bool { return len(v) == 1 })
	_, body := httpGet(t, "http://"+prom+"/api/v1/rules")
	var rules struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name, Query, Health, LastError string
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &rules); err != nil {
		t.Fatal(err)
	}
	var ruleExprs []string
	for _, g := range rules.Data.Groups {
		for _, r := range g.Rules {
			ruleExprs = append(ruleExprs, r.Query)
			if r.Health != "ok" {
				t.Errorf("rule %s: health %s %s", r.Name, r.Health, r.LastError)
			}
		}
	}
	if len(ruleExprs) != 2 {
		t.Fatalf("Prometheus loaded %d rules, want 2: %s", len(ruleExprs), body)
	}
	if v, err := promQuery(prom, "count(infergate_request_duration_seconds_bucket)", time.Time{}); err == nil && len(v) == 0 {
		t.Log("this Prometheus stores the request histogram in native form only (no _bucket series), as the example config says")
	}

	// The same series: every family the rules read, the dashboard reads,
	// and the request histogram in its native form in both.
	dashNames := map[string]bool{}
	for _, q := range queries {
		for _, n := range metricName.FindAllString(q.expr, -1) {
			dashNames[family(n)] = true
		}
	}
	native := "rate(infergate_request_duration_seconds{"
	var dashNative bool
	for _, q := range queries {
		dashNative = dashNative || strings.Contains(q.expr, native)
	}
	var rulesNative bool
	for _, e := range ruleExprs {
		rulesNative = rulesNative || strings.Contains(e, native)
		for _, n := range metricName.FindAllString(e, -1) {
			if !dashNames[family(n)] {
				t.Errorf("the rules read %s, the dashboard does not", n)
			}
		}
	}
	if !dashNative || !rulesNative {
		t.Errorf("native request histogram: dashboard %v, rules %v; both must read %s...", dashNative, rulesNative, native)
	}
}
