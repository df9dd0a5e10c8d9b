package deploy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// The Helm chart in helm/infergate: helm lint, helm template for both modes
// and every values file of its examples/ and ci/, the rendered objects
// checked against the binary, the schema's refusals, and the raw manifests
// of kubernetes/ rendered from it (make manifests).

const (
	chartDir     = "helm/infergate"
	helmInstall  = `GOBIN="$HOME/go/bin" go install helm.sh/helm/v4/cmd/helm@v4.3.2`
	dashboardSrc = "../examples/grafana/dashboards/infergate.json"
	rulesFile    = chartDir + "/files/prometheus-rules.yaml"
)

// helmBin finds helm on PATH or where .ci/run installs it; without it the
// test fails (CI installs it), as the h2spec and ghz tests do.
func helmBin(t *testing.T) string {
	t.Helper()
	if bin, err := exec.LookPath("helm"); err == nil {
		return bin
	}
	if home, err := os.UserHomeDir(); err == nil {
		bin := filepath.Join(home, "go", "bin", "helm")
		if st, err := os.Stat(bin); err == nil && !st.IsDir() {
			return bin
		}
	}
	t.Fatalf("helm is not installed (CI installs it): %s", helmInstall)
	return ""
}

// helm runs helm with its caches and configuration under a temporary
// directory (nothing of the user's is read or written).
func helm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(helmBin(t), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	return cmd.CombinedOutput()
}

// chartCase is one rendering of the chart.
type chartCase struct {
	name, release string
	args          []string
}

// chartCases: both modes with the default values, and every values file
// of examples/ and ci/.
func chartCases(t *testing.T) []chartCase {
	t.Helper()
	cases := []chartCase{
		{name: "gateway-defaults", release: "infergate"},
		{name: "sidecar-defaults", release: "triton", args: []string{"--set", "mode=sidecar"}},
	}
	for _, dir := range []string{"examples", "ci"} {
		files, err := filepath.Glob(filepath.Join(chartDir, dir, "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no values files in %s/%s: %v", chartDir, dir, err)
		}
		for _, f := range files {
			cases = append(cases, chartCase{name: dir + "/" + filepath.Base(f), release: "infergate", args: []string{"-f", f}})
		}
	}
	return cases
}

// render runs helm template and parses what it prints.
func render(t *testing.T, release string, args ...string) ([]*k8sObject, []byte) {
	t.Helper()
	out, err := helm(t, append([]string{"template", release, chartDir, "--namespace", "default"}, args...)...)
	if err != nil {
		t.Fatalf("helm template %s %s: %v\n%s", release, strings.Join(args, " "), err, out)
	}
	return parseObjects(t, "helm template "+strings.Join(args, " "), out), out
}

func parseObjects(t *testing.T, where string, b []byte) []*k8sObject {
	t.Helper()
	var objs []*k8sObject
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		o := &k8sObject{file: where}
		err := dec.Decode(o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if o.Kind == "" {
			continue // an empty document
		}
		if o.APIVersion == "" || o.Metadata.Name == "" {
			t.Fatalf("%s: a %s without apiVersion or metadata.name", where, o.Kind)
		}
		objs = append(objs, o)
	}
	return objs
}

// TestHelmLint: helm lint --strict finds nothing, with the default values
// and with every values file.
func TestHelmLint(t *testing.T) {
	for _, c := range chartCases(t) {
		out, err := helm(t, append([]string{"lint", "--strict", chartDir}, c.args...)...)
		if err != nil || !bytes.Contains(out, []byte("0 chart(s) failed")) {
			t.Errorf("helm lint --strict %s (%s): %v\n%s", chartDir, c.name, err, out)
			continue
		}
		t.Logf("helm lint --strict %s %s:\n%s", chartDir, strings.Join(c.args, " "), out)
	}
}

// flagTable is every flag of the binary: the flag table `infergate docs`
// writes from what the binary parses.
func flagTable(t *testing.T) map[string]bool {
	t.Helper()
	dir := t.TempDir()
	if code, out := runInfergate(t, "docs", "--out", dir); code != 0 {
		t.Fatalf("infergate docs: exit %d\n%s", code, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "flags.md"))
	if err != nil {
		t.Fatal(err)
	}
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `--([a-z0-9-]+)`").FindAllSubmatch(b, -1) {
		flags[string(m[1])] = true
	}
	if len(flags) < 20 {
		t.Fatalf("infergate docs: only %d flags in flags.md: not the table this test reads", len(flags))
	}
	return flags
}

// TestHelmTemplate renders each case and checks what it renders against
// the binary: the args (every flag in the binary's flag table) and the
// ConfigMap's infergate.yaml pass --check-config; probes, ports and the
// Service name the args' addresses; the production defaults are there; the
// monitors scrape the admin port; every metric the rules and autoscalers
// read is one infergate exports; the PrometheusRule is what `infergate
// rules export` prints for the rendered config, and promtool accepts it.
func TestHelmTemplate(t *testing.T) {
	flags := flagTable(t)
	exported := exportedSeries(t)
	for _, c := range chartCases(t) {
		t.Run(strings.ReplaceAll(c.name, "/", "_"), func(t *testing.T) {
			objs, _ := render(t, c.release, c.args...)
			checkRendered(t, c, objs, flags, exported)
		})
	}
}

func objectNamed(objs []*k8sObject, kind, suffix string) *k8sObject {
	for _, o := range find(objs, kind) {
		if strings.HasSuffix(o.Metadata.Name, suffix) {
			return o
		}
	}
	return nil
}

func checkRendered(t *testing.T, c chartCase, objs []*k8sObject, flags map[string]bool, exported map[string]map[string][]string) {
	cm := objectNamed(objs, "ConfigMap", "-config")
	if cm == nil || cm.Data["infergate.yaml"] == "" {
		t.Fatal("no ConfigMap *-config with infergate.yaml")
	}
	cfg := filepath.Join(t.TempDir(), "infergate.yaml")
	if err := os.WriteFile(cfg, []byte(cm.Data["infergate.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	// The file alone (as a sidecar included in someone's pod reads it).
	checkConfig(t, "ConfigMap "+cm.Metadata.Name, []string{"--config", cfg})
	configPath := cfg

	deps := find(objs, "Deployment")
	var s *k8sSetup
	if len(deps) > 0 {
		s = setupPod(t, objs, "")
		configPath = s.configPath
		for _, a := range s.infergate.Args {
			name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if !strings.HasPrefix(a, "-") || !flags[name] {
				t.Errorf("container infergate: arg %q is not a flag of the binary's flag table", a)
			}
		}
		checkConfig(t, "Deployment "+deps[0].Metadata.Name+" container infergate", s.args)
		checkChartPod(t, s, deps[0])
	}

	if o := objectNamed(objs, "ConfigMap", "-dashboard"); o != nil {
		want, err := os.ReadFile(dashboardSrc)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.Data["infergate.json"]; strings.TrimSpace(got) != strings.TrimSpace(string(want)) || !json.Valid([]byte(got)) {
			t.Errorf("ConfigMap %s: infergate.json is not %s (run make manifests)", o.Metadata.Name, dashboardSrc)
		}
		if o.Metadata.Labels["grafana_dashboard"] == "" {
			t.Errorf("ConfigMap %s: no grafana_dashboard label (Grafana's sidecar looks for it)", o.Metadata.Name)
		}
	}

	for _, kind := range []string{"PodMonitor", "ServiceMonitor"} {
		for _, o := range find(objs, kind) {
			checkMonitor(t, o, objs, s)
		}
	}

	if prs := find(objs, "PrometheusRule"); len(prs) > 0 {
		code, out := runInfergate(t, "rules", "export", "--config", configPath)
		if code != 0 {
			t.Fatalf("infergate rules export: exit %d\n%s", code, out)
		}
		var got, want any
		if err := prs[0].Spec.Decode(&got); err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal([]byte(out), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("PrometheusRule %s is not `infergate rules export` of the rendered config: set monitoring.prometheusRule.exported (helm --set-file) or run make manifests for the defaults. Want:\n%s", prs[0].Metadata.Name, out)
		}
		var spec struct {
			Groups []struct {
				Rules []struct {
					Expr string `yaml:"expr"`
				} `yaml:"rules"`
			} `yaml:"groups"`
		}
		if err := prs[0].Spec.Decode(&spec); err != nil {
			t.Fatal(err)
		}
		for _, g := range spec.Groups {
			for _, r := range g.Rules {
				checkMetricNames(t, "PrometheusRule "+prs[0].Metadata.Name, r.Expr, exported)
			}
		}
		b, _ := yaml.Marshal(got)
		rules := filepath.Join(t.TempDir(), "rules.yml")
		if err := os.WriteFile(rules, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := exec.LookPath("promtool"); err != nil {
			t.Fatal("promtool not installed (Debian's prometheus package; .ci/run installs it)")
		}
		if out, err := exec.Command("promtool", "check", "rules", rules).CombinedOutput(); err != nil {
			t.Errorf("promtool check rules (PrometheusRule %s): %v\n%s", prs[0].Metadata.Name, err, out)
		}
	}

	for _, o := range find(objs, "ScaledObject") {
		var so scaledObjectSpec
		if err := o.Spec.Decode(&so); err != nil {
			t.Fatal(err)
		}
		checkScaleTarget(t, "ScaledObject "+o.Metadata.Name, so.ScaleTargetRef, deps)
		for _, tr := range so.Triggers {
			checkMetricNames(t, "ScaledObject trigger "+tr.Name, tr.Metadata["query"], exported)
			for _, ms := range selectors(t, tr.Name, tr.Metadata["query"]) {
				for _, list := range ms {
					for _, m := range list {
						if m.name == "pod" {
							re := regexp.MustCompile("^(?:" + m.value + ")$")
							if len(deps) > 0 && !re.MatchString(deps[0].Metadata.Name+"-6d8f9c7b5d-x7k2p") {
								t.Errorf("ScaledObject trigger %s: pod=~%q does not select the pods of Deployment %s", tr.Name, m.value, deps[0].Metadata.Name)
							}
						}
					}
				}
			}
		}
	}
	for _, o := range find(objs, "HorizontalPodAutoscaler") {
		var hpa hpaSpec
		if err := o.Spec.Decode(&hpa); err != nil {
			t.Fatal(err)
		}
		checkScaleTarget(t, "HPA "+o.Metadata.Name, hpa.ScaleTargetRef, deps)
		// Pods metrics are infergate's series (prometheus-adapter keeps
		// their names); the External one is the adapter's ratio, named in
		// kubernetes/prometheus-adapter-rules.yaml (TestScaling).
		for _, m := range hpa.Metrics {
			if m.Pods != nil {
				if _, ok := exported[m.Pods.Metric.Name]; !ok && m.Pods.Metric.Name != "infergate_queue_p90_seconds" {
					t.Errorf("HPA %s: metric %s: infergate exports no such series", o.Metadata.Name, m.Pods.Metric.Name)
				}
			}
		}
	}
}

// checkChartPod: the production defaults and the addresses of a rendered
// Deployment.
func checkChartPod(t *testing.T, s *k8sSetup, dep *k8sObject) {
	c := s.infergate
	checkProbes(t, s)
	sc := c.SecurityContext
	if sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("container infergate: want runAsNonRoot and readOnlyRootFilesystem")
	}
	var caps struct {
		Containers []struct {
			Name            string `yaml:"name"`
			SecurityContext struct {
				Capabilities struct {
					Drop []string `yaml:"drop"`
				} `yaml:"capabilities"`
			} `yaml:"securityContext"`
		} `yaml:"containers"`
		Affinity yaml.Node `yaml:"affinity"`
	}
	var spec struct {
		Template struct {
			Spec yaml.Node `yaml:"spec"`
		} `yaml:"template"`
	}
	if err := dep.Spec.Decode(&spec); err != nil {
		t.Fatal(err)
	}
	if err := spec.Template.Spec.Decode(&caps); err != nil {
		t.Fatal(err)
	}
	for _, ct := range caps.Containers {
		if ct.Name == "infergate" && !slices.Contains(ct.SecurityContext.Capabilities.Drop, "ALL") {
			t.Error("container infergate: capabilities.drop lacks ALL")
		}
	}
	if c.Resources.Limits["memory"] == "" {
		t.Error("container infergate: no memory limit (GOMEMLIMIT and the buffer budget follow from it)")
	}
	if s.deploy.Template.Spec.TerminationGracePeriodSeconds == nil {
		t.Fatal("no terminationGracePeriodSeconds")
	}
	grace := time.Duration(*s.deploy.Template.Spec.TerminationGracePeriodSeconds) * time.Second
	drain := duration(t, "infergate args", s.args, "drain-delay", "drain_delay")
	shutdown := duration(t, "infergate args", s.args, "shutdown-timeout", "shutdown_timeout")
	if grace < c.preStopDelay(t)+drain+shutdown+stopMargin {
		t.Errorf("terminationGracePeriodSeconds %s < drain-delay %s + shutdown-timeout %s + margin %s", grace, drain, shutdown, stopMargin)
	}
	// The clients' Service reaches --listen.
	_, listenPort := hostPort(t, "--listen", setting(t, "infergate args", s.args, "listen", "listen"))
	svc := 0
	for _, o := range find(s.objs, "Service") {
		var sp struct {
			Selector map[string]string `yaml:"selector"`
			Ports    []struct {
				Name       string `yaml:"name"`
				TargetPort string `yaml:"targetPort"`
			} `yaml:"ports"`
		}
		if err := o.Spec.Decode(&sp); err != nil {
			t.Fatal(err)
		}
		if !selects(sp.Selector, s.deploy.Template.Metadata.Labels) {
			continue
		}
		svc++
		for _, p := range sp.Ports {
			want := listenPort
			if p.Name == "admin" {
				want = s.adminPort
			}
			if got := c.port(t, p.TargetPort); got != want {
				t.Errorf("Service %s port %s: targetPort %s is %d, want %d", o.Metadata.Name, p.Name, p.TargetPort, got, want)
			}
		}
	}
	if svc == 0 {
		t.Error("no Service selects the Deployment's pods")
	}
	pdbs := find(s.objs, "PodDisruptionBudget")
	if len(pdbs) != 1 {
		t.Errorf("want one PodDisruptionBudget, found %d", len(pdbs))
	}
	if c := dep.Metadata.Labels["app.kubernetes.io/component"]; c == "gateway" && caps.Affinity.Kind == 0 {
		t.Error("gateway Deployment: no pod anti-affinity")
	}
}

// checkMonitor: a PodMonitor or ServiceMonitor selects the pods (or their
// metrics Service) and scrapes /metrics on a port they declare, infergate's
// admin port among them.
func checkMonitor(t *testing.T, o *k8sObject, objs []*k8sObject, s *k8sSetup) {
	var spec struct {
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		PodEndpoints []struct {
			Port string `yaml:"port"`
			Path string `yaml:"path"`
		} `yaml:"podMetricsEndpoints"`
		Endpoints []struct {
			Port string `yaml:"port"`
			Path string `yaml:"path"`
		} `yaml:"endpoints"`
	}
	if err := o.Spec.Decode(&spec); err != nil {
		t.Fatal(err)
	}
	where := o.Kind + " " + o.Metadata.Name
	admin := false
	switch o.Kind {
	case "PodMonitor":
		if s == nil {
			t.Logf("%s: no Deployment rendered here (sidecar in your pod): its ports are your pod's", where)
			return
		}
		if !selects(spec.Selector.MatchLabels, s.deploy.Template.Metadata.Labels) {
			t.Errorf("%s: selector %v does not select the pods %v", where, spec.Selector.MatchLabels, s.deploy.Template.Metadata.Labels)
		}
		for _, e := range spec.PodEndpoints {
			found := false
			for _, c := range s.deploy.Template.Spec.Containers {
				found = found || slices.ContainsFunc(c.Ports, func(p struct {
					Name          string `yaml:"name"`
					ContainerPort int    `yaml:"containerPort"`
				}) bool {
					return p.Name == e.Port
				})
			}
			if !found || e.Path != "/metrics" {
				t.Errorf("%s: endpoint port %q path %q: want /metrics on a port the pod declares", where, e.Port, e.Path)
			}
			admin = admin || s.infergate.portName(s.adminPort) == e.Port
		}
	case "ServiceMonitor":
		var svc *k8sObject
		for _, x := range find(objs, "Service") {
			if selects(spec.Selector.MatchLabels, x.Metadata.Labels) {
				svc = x
			}
		}
		if svc == nil {
			t.Fatalf("%s: selects no Service of the chart", where)
		}
		var sp struct {
			Ports []struct {
				Name       string `yaml:"name"`
				TargetPort string `yaml:"targetPort"`
			} `yaml:"ports"`
		}
		if err := svc.Spec.Decode(&sp); err != nil {
			t.Fatal(err)
		}
		for _, e := range spec.Endpoints {
			i := slices.IndexFunc(sp.Ports, func(p struct {
				Name       string `yaml:"name"`
				TargetPort string `yaml:"targetPort"`
			}) bool {
				return p.Name == e.Port
			})
			if i < 0 || e.Path != "/metrics" {
				t.Errorf("%s: endpoint port %q path %q: want /metrics on a port of Service %s", where, e.Port, e.Path, svc.Metadata.Name)
				continue
			}
			admin = admin || (s != nil && s.infergate.port(t, sp.Ports[i].TargetPort) == s.adminPort)
		}
	}
	if !admin {
		t.Errorf("%s: scrapes no endpoint on infergate's admin port", where)
	}
}

func checkScaleTarget(t *testing.T, where string, ref scaleTargetRef, deps []*k8sObject) {
	if len(deps) == 0 {
		return
	}
	if ref.Name != deps[0].Metadata.Name || cmpOr(ref.Kind, "Deployment") != "Deployment" {
		t.Errorf("%s: scaleTargetRef %+v, want the Deployment %s", where, ref, deps[0].Metadata.Name)
	}
}

// checkMetricNames: every infergate_ series an expression reads is one
// infergate exports.
func checkMetricNames(t *testing.T, where, expr string, exported map[string]map[string][]string) {
	t.Helper()
	names := regexp.MustCompile(`\binfergate_[a-z0-9_]+`).FindAllString(expr, -1)
	if len(names) == 0 {
		t.Errorf("%s: reads no infergate metric: %s", where, expr)
	}
	for _, n := range names {
		if _, ok := exported[n]; !ok {
			t.Errorf("%s: infergate exports no series %s", where, n)
		}
	}
}

// TestHelmSchemaRefuses: values.schema.json refuses bad values, and helm
// says which field.
func TestHelmSchemaRefuses(t *testing.T) {
	// The schema's refusals come from helm template and helm lint alike;
	// those that need arithmetic over several values (lint marked) are the
	// templates' fail(), which helm lint logs but does not count.
	for _, c := range []struct {
		name, values, field string
		templateOnly        bool
	}{
		{"negative release weight", "releases:\n  - model: m\n    weight: -5\n", "weight", false},
		{"release weight over 100", "releases:\n  - model: m\n    weight: 150\n", "weight", false},
		{"unknown balance", "upstreams:\n  - name: a\n    address: a:8001\n    balance: fastest\n", "balance", false},
		{"unknown mode", "mode: daemonset\n", "mode", false},
		{"misspelt key", "upstreems: []\n", "upstreems", false},
		{"bad duration", "drainDelay: five\n", "drainDelay", false},
		{"no memory limit", "resources:\n  limits:\n    memory: null\n", "memory", false},
		{"one replica under an autoscaler", "autoscaling:\n  minReplicas: 1\n", "minReplicas", false},
		{"grace under the drain", "terminationGracePeriodSeconds: 30\n", "terminationGracePeriodSeconds", true},
		{"both autoscalers", "autoscaling:\n  hpa: {enabled: true}\n  keda: {enabled: true}\n", "autoscaling", false},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "bad.yaml")
			if err := os.WriteFile(f, []byte(c.values), 0o644); err != nil {
				t.Fatal(err)
			}
			cmds := [][]string{{"template", "x", chartDir, "-f", f}, {"lint", chartDir, "-f", f}}
			if c.templateOnly {
				cmds = cmds[:1]
			}
			for _, cmd := range cmds {
				out, err := helm(t, cmd...)
				if err == nil {
					t.Errorf("helm %s accepts %q", cmd[0], c.values)
					continue
				}
				if !strings.Contains(string(out), c.field) {
					t.Errorf("helm %s refuses %q without naming %s:\n%s", cmd[0], c.values, c.field, out)
				}
			}
			out, _ := helm(t, "template", "x", chartDir, "-f", f)
			t.Logf("%s: %s", c.name, firstLine(out))
		})
	}
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// manifest is one file of kubernetes/ and the helm template that renders it.
type manifest struct {
	file, release, values string
	args                  []string
}

// manifests: the raw manifests of kubernetes/, each rendered from the
// chart. prometheus-adapter-rules.yaml (prometheus-adapter's own
// configuration), gateway/triton-pool.yaml (the model servers) and
// README-scaling.md are not the chart's and stay hand-written.
var manifests = []manifest{
	{"kubernetes/triton-infergate.yaml", "triton", "ci/kubernetes-sidecar.yaml", []string{"-s", "templates/configmap.yaml", "-s", "templates/service.yaml", "-s", "templates/deployment.yaml", "-s", "templates/pdb.yaml"}},
	{"kubernetes/podmonitor.yaml", "triton", "ci/kubernetes-sidecar.yaml", []string{"-s", "templates/podmonitor.yaml"}},
	{"kubernetes/prometheusrule.yaml", "triton", "ci/kubernetes-sidecar.yaml", []string{"-s", "templates/prometheusrule.yaml"}},
	{"kubernetes/grafana-dashboard.yaml", "triton", "ci/kubernetes-sidecar.yaml", []string{"-s", "templates/dashboard.yaml"}},
	{"kubernetes/keda-scaledobject.yaml", "triton", "ci/kubernetes-sidecar.yaml", []string{"--set", "autoscaling.keda.enabled=true", "-s", "templates/keda.yaml"}},
	{"kubernetes/hpa.yaml", "triton", "ci/kubernetes-sidecar.yaml", []string{"--set", "autoscaling.hpa.enabled=true", "-s", "templates/hpa.yaml"}},
	{"kubernetes/gateway/infergate-gateway.yaml", "infergate", "ci/kubernetes-gateway.yaml", nil},
}

func manifestHeader(m manifest) string {
	return fmt.Sprintf("# Generated by `make manifests` from the Helm chart deploy/helm/infergate:\n"+
		"#   helm template %s deploy/helm/infergate --namespace default -f deploy/helm/infergate/%s %s\n"+
		"# Edit the chart or that values file, not this file: TestHelmManifests fails\n"+
		"# when they differ. docs/deployment.md says how to apply it.\n",
		m.release, m.values, strings.Join(m.args, " "))
}

// TestHelmManifests: each raw manifest of kubernetes/ is what the chart
// renders, the chart's dashboard is examples/'s and its default rules are
// `infergate rules export` of its default values' config. -update (make
// manifests) rewrites them.
func TestHelmManifests(t *testing.T) {
	// The dashboard and the default rules first: the manifests hold them.
	want, err := os.ReadFile(dashboardSrc)
	if err != nil {
		t.Fatal(err)
	}
	syncFile(t, chartDir+"/files/dashboards/infergate.json", want)

	objs, _ := render(t, "infergate", "--set", "monitoring.prometheusRule.enabled=false")
	cm := objectNamed(objs, "ConfigMap", "-config")
	cfg := filepath.Join(t.TempDir(), "infergate.yaml")
	if err := os.WriteFile(cfg, []byte(cm.Data["infergate.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	code, rules := runInfergate(t, "rules", "export", "--config", cfg)
	if code != 0 {
		t.Fatalf("infergate rules export: exit %d\n%s", code, rules)
	}
	syncFile(t, rulesFile, []byte(rules))

	for _, m := range manifests {
		_, out := render(t, m.release, append([]string{"-f", filepath.Join(chartDir, m.values)}, m.args...)...)
		syncFile(t, m.file, append([]byte(manifestHeader(m)), out...))
	}
}

// syncFile compares path with want, or with -update writes it.
func syncFile(t *testing.T, path string, want []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what the chart renders: run make manifests", path)
	}
}
