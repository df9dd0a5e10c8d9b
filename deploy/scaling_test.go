package deploy_test

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"

	"github.com/infergate/infergate/monitor"
)

// The autoscaling manifests: keda-scaledobject.yaml, or hpa.yaml with the
// prometheus-adapter configuration of prometheus-adapter-rules.yaml.

type scaledObjectSpec struct {
	ScaleTargetRef  scaleTargetRef `yaml:"scaleTargetRef"`
	PollingInterval *int           `yaml:"pollingInterval"`
	CooldownPeriod  *int           `yaml:"cooldownPeriod"`
	MinReplicaCount *int           `yaml:"minReplicaCount"`
	MaxReplicaCount *int           `yaml:"maxReplicaCount"`
	Triggers        []struct {
		Type       string            `yaml:"type"`
		Name       string            `yaml:"name"`
		MetricType string            `yaml:"metricType"`
		Metadata   map[string]string `yaml:"metadata"`
	} `yaml:"triggers"`
}

type scaleTargetRef struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Name       string `yaml:"name"`
}

type hpaTarget struct {
	Type         string `yaml:"type"`
	Value        string `yaml:"value"`
	AverageValue string `yaml:"averageValue"`
}

type hpaMetricSource struct {
	Metric struct {
		Name string `yaml:"name"`
	} `yaml:"metric"`
	Target hpaTarget `yaml:"target"`
}

type hpaSpec struct {
	ScaleTargetRef scaleTargetRef `yaml:"scaleTargetRef"`
	MinReplicas    *int           `yaml:"minReplicas"`
	MaxReplicas    int            `yaml:"maxReplicas"`
	Metrics        []struct {
		Type     string           `yaml:"type"`
		Pods     *hpaMetricSource `yaml:"pods"`
		External *hpaMetricSource `yaml:"external"`
	} `yaml:"metrics"`
}

// adapterRule is one of prometheus-adapter's discovery rules.
type adapterRule struct {
	SeriesQuery string `yaml:"seriesQuery"`
	Resources   struct {
		Overrides map[string]struct {
			Group    string `yaml:"group"`
			Resource string `yaml:"resource"`
		} `yaml:"overrides"`
	} `yaml:"resources"`
	Name struct {
		Matches string `yaml:"matches"`
		As      string `yaml:"as"`
	} `yaml:"name"`
	MetricsQuery string `yaml:"metricsQuery"`
}

type adapterConfig struct {
	Rules         []adapterRule `yaml:"rules"`
	ExternalRules []adapterRule `yaml:"externalRules"`
}

// adapterConfigMap is the ConfigMap prometheus-adapter reads its
// configuration from, and its key.
const adapterConfigMap, adapterConfigKey = "adapter-config", "config.yaml"

// exportedSeries maps each series name infergate's monitor exports (a
// classic histogram's and a summary's _bucket, _sum and _count included)
// to its label names, and each label to the values seen. It records one
// batched call in a registry and gathers it, so the list follows the code.
func exportedSeries(t *testing.T) map[string]map[string][]string {
	t.Helper()
	r := monitor.NewRegistry(monitor.Options{})
	reg := prometheus.NewRegistry()
	if err := r.Register(reg); err != nil {
		t.Fatal(err)
	}
	key := monitor.SeriesKey{Model: "m", Version: "1", Method: "/inference.GRPCInferenceService/ModelInfer",
		Upstream: "127.0.0.1:8001", CodeClass: monitor.CodeClassOK, Route: monitor.RoutePrimary}
	r.Record(key, monitor.Sample{Total: 3 * time.Millisecond, Upstream: 2 * time.Millisecond, Queue: time.Millisecond, Code: "OK"})
	r.InFlight(key.Upstream).Inc()
	r.Rotate()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string][]string{}
	add := func(name string, labels map[string]string) {
		if out[name] == nil {
			out[name] = map[string][]string{}
		}
		for k, v := range labels {
			if !slices.Contains(out[name][k], v) {
				out[name][k] = append(out[name][k], v)
			}
		}
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			add(f.GetName(), labels)
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM:
				add(f.GetName()+"_sum", labels)
				add(f.GetName()+"_count", labels)
				for _, b := range m.GetHistogram().GetBucket() {
					add(f.GetName()+"_bucket", map[string]string{"le": strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)})
					add(f.GetName()+"_bucket", labels)
				}
			case dto.MetricType_SUMMARY:
				add(f.GetName()+"_sum", labels)
				add(f.GetName()+"_count", labels)
				for _, q := range m.GetSummary().GetQuantile() {
					add(f.GetName(), map[string]string{"quantile": strconv.FormatFloat(q.GetQuantile(), 'g', -1, 64)})
				}
			}
		}
	}
	return out
}

// targetLabels are the labels ../prometheus/scrape.yml's Kubernetes job
// puts on every series of a pod (the Prometheus Operator's PodMonitor adds
// the same namespace and pod).
func targetLabels(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, sc := range loadScrape(t).ScrapeConfigs {
		if len(sc.KubernetesSD) == 0 {
			continue
		}
		for _, rc := range sc.RelabelConfigs {
			if rc.TargetLabel != "" && !strings.HasPrefix(rc.TargetLabel, "__") && !slices.Contains(out, rc.TargetLabel) {
				out = append(out, rc.TargetLabel)
			}
		}
	}
	if !slices.Contains(out, "namespace") || !slices.Contains(out, "pod") {
		t.Fatalf("../prometheus/scrape.yml: the Kubernetes job labels series with %v; the autoscaling queries select namespace and pod", out)
	}
	return out
}

// selectorRE matches a metric selector with its matchers; matcherRE one
// matcher.
var (
	selectorRE = regexp.MustCompile(`\b(infergate_[a-z0-9_]+)\s*\{([^}]*)\}`)
	matcherRE  = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*$`)
	bareNameRE = regexp.MustCompile(`\binfergate_[a-z0-9_]+\b`)
)

type matcher struct{ name, op, value string }

// selectors returns each infergate metric an expression reads with its
// matchers; a metric read without braces is an error (it would select
// every namespace's pods).
func selectors(t *testing.T, where, expr string) map[string][][]matcher {
	t.Helper()
	out := map[string][][]matcher{}
	for _, m := range selectorRE.FindAllStringSubmatch(expr, -1) {
		var ms []matcher
		for _, part := range splitMatchers(m[2]) {
			mm := matcherRE.FindStringSubmatch(part)
			if mm == nil {
				t.Errorf("%s: cannot read matcher %q of %s", where, part, m[1])
				continue
			}
			v, err := strconv.Unquote(`"` + mm[3] + `"`)
			if err != nil {
				t.Errorf("%s: matcher %q: %v", where, part, err)
			}
			ms = append(ms, matcher{mm[1], mm[2], v})
		}
		out[m[1]] = append(out[m[1]], ms)
	}
	braced := selectorRE.ReplaceAllString(expr, "")
	for _, n := range bareNameRE.FindAllString(braced, -1) {
		t.Errorf("%s: %s is read without a selector", where, n)
	}
	return out
}

// splitMatchers splits a selector's body at the commas outside quotes.
func splitMatchers(s string) []string {
	var out []string
	var cur strings.Builder
	quoted, escaped := false, false
	for _, r := range s {
		switch {
		case escaped:
			escaped = false
		case r == '\\' && quoted:
			escaped = true
		case r == '"':
			quoted = !quoted
		case r == ',' && !quoted:
			out = append(out, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteRune(r)
	}
	if strings.TrimSpace(cur.String()) != "" {
		out = append(out, cur.String())
	}
	return out
}

// renderAdapter renders a metricsQuery template as prometheus-adapter
// does: delimiters << >>, the series name, the label matchers of the
// objects asked about, and the labels to group by.
func renderAdapter(t *testing.T, tmpl, series, labelMatchers, groupBy string) string {
	t.Helper()
	tp, err := template.New("metrics-query").Delims("<<", ">>").Parse(tmpl)
	if err != nil {
		t.Fatalf("metricsQuery %q: %v", tmpl, err)
	}
	var b bytes.Buffer
	err = tp.Execute(&b, map[string]any{
		"Series": series, "LabelMatchers": labelMatchers, "GroupBy": groupBy,
		"GroupBySlice": strings.Split(groupBy, ","), "LabelValuesByName": map[string]string{},
	})
	if err != nil {
		t.Fatalf("metricsQuery %q: %v", tmpl, err)
	}
	return b.String()
}

// seriesQueryName is the metric name of a seriesQuery
// (`name{matchers}` or `{__name__="name",...}`).
func seriesQueryName(t *testing.T, q string) string {
	t.Helper()
	if m := regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)\{`).FindStringSubmatch(q); m != nil {
		return m[1]
	}
	if m := regexp.MustCompile(`__name__="([^"]+)"`).FindStringSubmatch(q); m != nil {
		return m[1]
	}
	t.Fatalf("seriesQuery %q names no metric", q)
	return ""
}

// quantity reads a Kubernetes quantity as the autoscaling targets use it
// ("16", "800m", "0.8").
func quantity(t *testing.T, where, s string) float64 {
	t.Helper()
	scale := 1.0
	if v, ok := strings.CutSuffix(s, "m"); ok {
		s, scale = v, 0.001
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 {
		t.Fatalf("%s: %q is not a positive quantity", where, s)
	}
	return f * scale
}

// sloSeconds is the p99 objective of the ConfigMap's infergate.yaml: the
// denominator of the p99-over-SLO signal. One objective for every model,
// since one ratio scales the Deployment.
func sloSeconds(t *testing.T, s *k8sSetup) float64 {
	t.Helper()
	b, err := os.ReadFile(s.configPath)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		SLO []struct {
			Model string `yaml:"model"`
			P99   string `yaml:"p99"`
		} `yaml:"slo"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	var slo time.Duration
	for _, o := range cfg.SLO {
		d, err := time.ParseDuration(o.P99)
		if err != nil {
			t.Fatalf("ConfigMap slo model %s: p99 %q: %v", o.Model, o.P99, err)
		}
		if slo != 0 && d != slo {
			t.Fatalf("ConfigMap slo: p99 objectives %s and %s: the p99-over-SLO query divides by one; write one trigger per model", slo, d)
		}
		slo = d
	}
	if slo == 0 {
		t.Fatal("the ConfigMap's infergate.yaml has no slo p99: the p99-over-SLO signal has nothing to divide by")
	}
	return slo.Seconds()
}

// scalingQuery is one PromQL expression an autoscaler runs.
type scalingQuery struct {
	where, signal, expr string
	perPod              bool // adapter custom metric: one value per pod
}

// TestScaling: the ScaledObject and the HPA scale the Deployment of
// triton-infergate.yaml, keep enough replicas for its rolling update, and
// agree on the signals and their targets; the HPA's metrics are the
// adapter's rules; every query reads series infergate exports (gathered
// from the monitor package), with labels and label values they carry,
// only of the Deployment's pods; the p99 ratio divides by the ConfigMap's
// objective; promtool parses every query.
func TestScaling(t *testing.T) {
	s := setupK8s(t)
	deps := find(s.objs, "Deployment")
	depName := deps[0].Metadata.Name
	var strategy struct {
		Strategy struct {
			RollingUpdate struct {
				MaxUnavailable any `yaml:"maxUnavailable"`
			} `yaml:"rollingUpdate"`
		} `yaml:"strategy"`
	}
	if err := deps[0].Spec.Decode(&strategy); err != nil {
		t.Fatal(err)
	}
	maxUnavailable, ok := strategy.Strategy.RollingUpdate.MaxUnavailable.(int)
	if !ok {
		t.Fatalf("Deployment %s: maxUnavailable %v is not a number of pods; teach TestScaling percentages", depName, strategy.Strategy.RollingUpdate.MaxUnavailable)
	}
	checkTarget := func(where string, ref scaleTargetRef) {
		if ref.Name != depName || cmpOr(ref.Kind, "Deployment") != "Deployment" || cmpOr(ref.APIVersion, "apps/v1") != "apps/v1" {
			t.Errorf("%s: scaleTargetRef %+v, want the Deployment %s of triton-infergate.yaml", where, ref, depName)
		}
	}
	checkReplicas := func(where string, lo *int, hi int) {
		switch {
		case lo == nil:
			t.Errorf("%s: no min replicas", where)
		case *lo <= maxUnavailable:
			t.Errorf("%s: min replicas %d: the rolling update takes %d pods down at a time (maxUnavailable), leaving none serving", where, *lo, maxUnavailable)
		case hi < *lo:
			t.Errorf("%s: max replicas %d < min %d", where, hi, *lo)
		}
	}

	// KEDA.
	sos := find(s.objs, "ScaledObject")
	if len(sos) != 1 || sos[0].APIVersion != "keda.sh/v1alpha1" {
		t.Fatalf("want one ScaledObject of keda.sh/v1alpha1, found %d", len(sos))
	}
	var so scaledObjectSpec
	if err := sos[0].Spec.Decode(&so); err != nil {
		t.Fatal(err)
	}
	checkTarget("ScaledObject", so.ScaleTargetRef)
	if so.MaxReplicaCount == nil {
		t.Fatal("ScaledObject: no maxReplicaCount (KEDA's default is 100 GPUs)")
	}
	checkReplicas("ScaledObject", so.MinReplicaCount, *so.MaxReplicaCount)
	if so.PollingInterval == nil || so.CooldownPeriod == nil {
		t.Error("ScaledObject: state pollingInterval and cooldownPeriod")
	}
	kedaThresholds := map[string]float64{}
	var queries []scalingQuery
	for i, tr := range so.Triggers {
		where := fmt.Sprintf("ScaledObject trigger %d (%s)", i, tr.Name)
		if tr.Type != "prometheus" || tr.Name == "" {
			t.Errorf("%s: type %q: want a named prometheus trigger", where, tr.Type)
			continue
		}
		if tr.MetricType != "AverageValue" && tr.MetricType != "Value" {
			t.Errorf("%s: metricType %q, want AverageValue or Value", where, tr.MetricType)
		}
		for _, k := range []string{"serverAddress", "query", "threshold"} {
			if tr.Metadata[k] == "" {
				t.Errorf("%s: no metadata.%s", where, k)
			}
		}
		if _, dup := kedaThresholds[tr.Name]; dup {
			t.Errorf("%s: two triggers named %s", where, tr.Name)
		}
		kedaThresholds[tr.Name] = quantity(t, where+" threshold", tr.Metadata["threshold"])
		queries = append(queries, scalingQuery{where: where, signal: tr.Name, expr: tr.Metadata["query"]})
	}

	// prometheus-adapter.
	var cfg adapterConfig
	cms := find(s.objs, "ConfigMap")
	ci := slices.IndexFunc(cms, func(o *k8sObject) bool { return o.Metadata.Name == adapterConfigMap })
	if ci < 0 {
		t.Fatalf("no ConfigMap %s (prometheus-adapter's configuration)", adapterConfigMap)
	}
	if err := yaml.Unmarshal([]byte(cms[ci].Data[adapterConfigKey]), &cfg); err != nil {
		t.Fatalf("ConfigMap %s %s: %v", adapterConfigMap, adapterConfigKey, err)
	}
	exported := exportedSeries(t)
	targets := targetLabels(t)
	podName := depName + "-6d8f9c7b5d-x7k2p" // a ReplicaSet hash and a pod suffix
	podMetrics, externalMetrics := map[string]bool{}, map[string]bool{}
	for kind, rules := range map[string][]adapterRule{"rules": cfg.Rules, "externalRules": cfg.ExternalRules} {
		for i, r := range rules {
			where := fmt.Sprintf("adapter %s[%d] (%s)", kind, i, r.Name.As)
			series := seriesQueryName(t, r.SeriesQuery)
			if _, ok := exported[series]; !ok {
				t.Errorf("%s: seriesQuery %s: infergate exports no such series", where, series)
			}
			if re, err := regexp.Compile(r.Name.Matches); err != nil || !re.MatchString(series) || r.Name.As == "" {
				t.Errorf("%s: name matches %q as %q: must match %s and give a name", where, r.Name.Matches, r.Name.As, series)
			}
			want := map[string]string{"namespace": "namespace"}
			labelMatchers, groupBy := `namespace="default"`, ""
			if kind == "rules" {
				want["pod"] = "pod"
				labelMatchers, groupBy = fmt.Sprintf(`namespace="default",pod=~"%s|%s"`, podName, depName+"-6d8f9c7b5d-q4w8n"), "pod"
				podMetrics[r.Name.As] = true
			} else {
				externalMetrics[r.Name.As] = true
			}
			for label, res := range want {
				if o, ok := r.Resources.Overrides[label]; !ok || o.Resource != res || o.Group != "" || !slices.Contains(targets, label) {
					t.Errorf("%s: resources.overrides[%s] = %+v: want {resource: %s}, a label scrape.yml gives", where, label, o, res)
				}
			}
			queries = append(queries, scalingQuery{where: where, signal: r.Name.As,
				expr: renderAdapter(t, r.MetricsQuery, series, labelMatchers, groupBy), perPod: kind == "rules"})
		}
	}

	// The HPA: the adapter's metrics, KEDA's targets.
	hpas := find(s.objs, "HorizontalPodAutoscaler")
	if len(hpas) != 1 || hpas[0].APIVersion != "autoscaling/v2" {
		t.Fatalf("want one HorizontalPodAutoscaler of autoscaling/v2, found %d", len(hpas))
	}
	var hpa hpaSpec
	if err := hpas[0].Spec.Decode(&hpa); err != nil {
		t.Fatal(err)
	}
	checkTarget("HPA", hpa.ScaleTargetRef)
	checkReplicas("HPA", hpa.MinReplicas, hpa.MaxReplicas)
	if hpa.MinReplicas != nil && so.MinReplicaCount != nil && (*hpa.MinReplicas != *so.MinReplicaCount || hpa.MaxReplicas != *so.MaxReplicaCount) {
		t.Errorf("HPA replicas %d..%d, ScaledObject %d..%d: the two ways to scale should agree", *hpa.MinReplicas, hpa.MaxReplicas, *so.MinReplicaCount, *so.MaxReplicaCount)
	}
	hpaSignals := map[string]bool{}
	for i, m := range hpa.Metrics {
		where := fmt.Sprintf("HPA metric %d (%s)", i, m.Type)
		var src *hpaMetricSource
		var served map[string]bool
		switch m.Type {
		case "Pods":
			src, served = m.Pods, podMetrics
			if src != nil && src.Target.Type != "AverageValue" {
				t.Errorf("%s: target type %s: a Pods metric takes AverageValue", where, src.Target.Type)
			}
		case "External":
			src, served = m.External, externalMetrics
		default:
			t.Errorf("%s: want Pods or External metrics (prometheus-adapter serves those)", where)
			continue
		}
		if src == nil {
			t.Errorf("%s: no %s source", where, strings.ToLower(m.Type))
			continue
		}
		name := src.Metric.Name
		hpaSignals[name] = true
		if !served[name] {
			t.Errorf("%s: metric %s: no adapter rule serves it as a %s metric (have %v)", where, name, m.Type, slices.Sorted(maps.Keys(served)))
		}
		v := cmpOr(src.Target.AverageValue, src.Target.Value)
		if (src.Target.Type == "Value") != (src.Target.Value != "") {
			t.Errorf("%s: target type %s with value %q averageValue %q", where, src.Target.Type, src.Target.Value, src.Target.AverageValue)
		}
		got := quantity(t, where+" target", v)
		if want, ok := kedaThresholds[name]; !ok {
			t.Errorf("%s: %s: the ScaledObject has no trigger of that name", where, name)
		} else if got != want {
			t.Errorf("%s: %s target %g, the ScaledObject's threshold %g: the two ways to scale should agree", where, name, got, want)
		}
	}
	for name := range kedaThresholds {
		if !hpaSignals[name] {
			t.Errorf("ScaledObject trigger %s: the HPA has no metric of that name", name)
		}
	}

	// Every query: exported series, their labels, the Deployment's pods.
	slo := sloSeconds(t, s)
	ratioDenominator := regexp.MustCompile(`\)\s*/\s*([0-9.]+)\s*\)`)
	for _, q := range queries {
		sels := selectors(t, q.where, q.expr)
		if len(sels) == 0 {
			t.Errorf("%s: reads no infergate metric: %s", q.where, q.expr)
		}
		for name, list := range sels {
			labels, ok := exported[name]
			if !ok {
				t.Errorf("%s: infergate exports no series %s", q.where, name)
				continue
			}
			for _, ms := range list {
				var ns, pod bool
				for _, m := range ms {
					values, ok := labels[m.name]
					switch {
					case m.name == "namespace" && m.op == "=":
						ns = true
					case m.name == "pod" && (m.op == "=~" || m.op == "="):
						re, err := regexp.Compile("^(?:" + m.value + ")$")
						pod = err == nil && re.MatchString(podName) && !re.MatchString("other-"+podName) && !re.MatchString(depName+"-canary-6d8f9c7b5d-x7k2p-x")
						if !pod {
							t.Errorf("%s: %s{pod%s%q} does not select exactly the pods of Deployment %s (such as %s)", q.where, name, m.op, m.value, depName, podName)
						}
					case slices.Contains(targets, m.name):
					case !ok:
						t.Errorf("%s: %s has no label %s (it has %v)", q.where, name, m.name, slices.Sorted(maps.Keys(labels)))
					case (m.name == "window" || m.name == "quantile") && m.op == "=" && !slices.Contains(values, m.value):
						t.Errorf("%s: %s{%s=%q}: infergate exports %s %v", q.where, name, m.name, m.value, m.name, values)
					}
				}
				if !ns || !pod {
					t.Errorf("%s: a selector of %s lacks namespace= or pod=~ (%v): it would read other Deployments' pods", q.where, name, ms)
				}
			}
		}
		if strings.Contains(q.signal, "slo") {
			m := ratioDenominator.FindStringSubmatch(q.expr)
			if m == nil {
				t.Errorf("%s: no `) / SLO)` in %s", q.where, q.expr)
			} else if d, _ := strconv.ParseFloat(m[1], 64); d != slo {
				t.Errorf("%s: divides by %s; the ConfigMap's slo p99 is %gs", q.where, m[1], slo)
			}
		}
	}

	// promtool parses every query (as a recording rule's expression).
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Fatal("promtool not installed (Debian's prometheus package; .ci/run installs it): the queries cannot be parsed")
	}
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: scaling\n    rules:\n")
	for i, q := range queries {
		fmt.Fprintf(&rules, "      - record: scaling:query:%d\n        expr: %s\n", i, strconv.Quote(q.expr))
	}
	path := filepath.Join(t.TempDir(), "scaling.yml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("promtool", "check", "rules", path).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules (the autoscaling queries): %v\n%s", err, out)
	}
	t.Logf("%d queries checked: %d KEDA triggers, %d adapter rules", len(queries), len(so.Triggers), len(cfg.Rules)+len(cfg.ExternalRules))
}
