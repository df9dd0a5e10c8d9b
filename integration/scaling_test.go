package integration

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/infergate/infergate/proto/kservepb"
)

const (
	scaledObjectFile = "../deploy/kubernetes/keda-scaledobject.yaml"
	hpaFile          = "../deploy/kubernetes/hpa.yaml"
	adapterFile      = "../deploy/kubernetes/prometheus-adapter-rules.yaml"
)

// loadManifest decodes the spec (or, for a ConfigMap, the data) of the
// only document of a manifest file into v.
func loadManifest(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Spec yaml.Node `yaml:"spec"`
		Data yaml.Node `yaml:"data"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	n := &doc.Spec
	if n.Kind == 0 {
		n = &doc.Data
	}
	if err := n.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// adapterRuleIT is what the test reads of a prometheus-adapter rule.
type adapterRuleIT struct {
	SeriesQuery string `yaml:"seriesQuery"`
	Name        struct {
		As string `yaml:"as"`
	} `yaml:"name"`
	MetricsQuery string `yaml:"metricsQuery"`
}

// renderAdapterQuery renders a metricsQuery as prometheus-adapter does
// (text/template, delimiters << >>) for a request about some objects.
func renderAdapterQuery(t *testing.T, tmpl, series, labelMatchers, groupBy string) string {
	t.Helper()
	tp, err := template.New("metrics-query").Delims("<<", ">>").Parse(tmpl)
	if err != nil {
		t.Fatalf("metricsQuery %q: %v", tmpl, err)
	}
	var b bytes.Buffer
	if err := tp.Execute(&b, map[string]any{"Series": series, "LabelMatchers": labelMatchers, "GroupBy": groupBy,
		"GroupBySlice": strings.Split(groupBy, ","), "LabelValuesByName": map[string]string{}}); err != nil {
		t.Fatalf("metricsQuery %q: %v", tmpl, err)
	}
	return b.String()
}

// finite returns a sample's float value if it is a finite number.
func finite(s promSample) (float64, bool) {
	f, err := s.Float()
	return f, err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
}

// TestScalingQueriesHaveData: two replicas of the Deployment (infergate
// with adaptive batching in front of simserver), and a pod of another
// Deployment in the same namespace, under load and scraped by a real
// Prometheus that labels them as Kubernetes discovery does. Every query
// of keda-scaledobject.yaml returns one finite value, as KEDA requires
// (more than one is an error to it); every metric hpa.yaml asks for,
// rendered from prometheus-adapter-rules.yaml as the adapter does, returns
// one finite value per pod asked about (Pods) or one for the namespace
// (External). At one evaluation time KEDA and the adapter read the same
// numbers, and neither counts the other Deployment's pod.
func TestScalingQueriesHaveData(t *testing.T) {
	var so struct {
		Triggers []struct {
			Name     string            `yaml:"name"`
			Metadata map[string]string `yaml:"metadata"`
		} `yaml:"triggers"`
	}
	loadManifest(t, scaledObjectFile, &so)
	var hpa struct {
		Metrics []struct {
			Type     string                                  `yaml:"type"`
			Pods     *struct{ Metric struct{ Name string } } `yaml:"pods"`
			External *struct{ Metric struct{ Name string } } `yaml:"external"`
		} `yaml:"metrics"`
	}
	loadManifest(t, hpaFile, &hpa)
	var data map[string]string
	loadManifest(t, adapterFile, &data)
	var adapter struct {
		Rules         []adapterRuleIT `yaml:"rules"`
		ExternalRules []adapterRuleIT `yaml:"externalRules"`
	}
	if err := yaml.Unmarshal([]byte(data["config.yaml"]), &adapter); err != nil {
		t.Fatalf("%s config.yaml: %v", adapterFile, err)
	}
	if len(so.Triggers) == 0 || len(hpa.Metrics) == 0 {
		t.Fatalf("no triggers in %s or no metrics in %s", scaledObjectFile, hpaFile)
	}

	// The pods: names as the Deployment's ReplicaSet gives them, in the
	// namespace the queries select.
	const namespace = "default"
	pods := []string{"triton-6d8f9c7b5d-x7k2p", "triton-6d8f9c7b5d-q4w8n"}
	const outsider = "other-7c9d8e6f5a-z9z9z"

	sim := startSim(t)
	var grpcs []string
	var static []any
	for _, pod := range append(slices.Clone(pods), outsider) {
		g := startProxy(t, sim.grpc, "--batching", "adaptive", "--batch-models", "resnet50", "--batch-max-size", "64")
		grpcs = append(grpcs, g.grpc)
		static = append(static, map[string]any{"targets": []string{g.admin},
			"labels": map[string]string{"namespace": namespace, "pod": pod}})
	}
	prom := startPrometheusStatic(t, "1s", "", static)

	// Load: batched resnet50 callers and a mobilenet_v3 caller on each
	// replica, fewer on the outsider, paced so that two cores keep up.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for i, addr := range grpcs {
		kc := kservepb.NewGRPCInferenceServiceClient(dial(t, addr))
		callers := 5
		if i == len(pods) {
			callers = 2
		}
		for w := range callers {
			req := resnetRequest("resnet50", 1+w%3)
			if w == 4 {
				req = resnetRequest("mobilenet_v3", 1)
			}
			wg.Go(func() {
				tk := time.NewTicker(10 * time.Millisecond)
				defer tk.Stop()
				for ctx.Err() == nil {
					cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
					kc.ModelInfer(cctx, req)
					ccancel()
					select {
					case <-tk.C:
					case <-ctx.Done():
					}
				}
			})
		}
	}

	// The queries, each with the shape its consumer needs.
	type check struct {
		where, signal, expr string
		perPod              bool
	}
	var checks []check
	for _, tr := range so.Triggers {
		checks = append(checks, check{where: "ScaledObject trigger " + tr.Name, signal: tr.Name, expr: tr.Metadata["query"]})
	}
	rule := func(rules []adapterRuleIT, name string) (adapterRuleIT, bool) {
		i := slices.IndexFunc(rules, func(r adapterRuleIT) bool { return r.Name.As == name })
		if i < 0 {
			return adapterRuleIT{}, false
		}
		return rules[i], true
	}
	series := func(r adapterRuleIT) string {
		name, _, _ := strings.Cut(r.SeriesQuery, "{")
		return name
	}
	for _, m := range hpa.Metrics {
		switch {
		case m.Type == "Pods" && m.Pods != nil:
			r, ok := rule(adapter.Rules, m.Pods.Metric.Name)
			if !ok {
				t.Fatalf("hpa.yaml Pods metric %s: no adapter rule", m.Pods.Metric.Name)
			}
			matchers := fmt.Sprintf(`namespace=%q,pod=~%q`, namespace, strings.Join(pods, "|"))
			checks = append(checks, check{where: "HPA Pods metric " + r.Name.As, signal: r.Name.As, perPod: true,
				expr: renderAdapterQuery(t, r.MetricsQuery, series(r), matchers, "pod")})
		case m.Type == "External" && m.External != nil:
			r, ok := rule(adapter.ExternalRules, m.External.Metric.Name)
			if !ok {
				t.Fatalf("hpa.yaml External metric %s: no adapter external rule", m.External.Metric.Name)
			}
			checks = append(checks, check{where: "HPA External metric " + r.Name.As, signal: r.Name.As,
				expr: renderAdapterQuery(t, r.MetricsQuery, series(r), fmt.Sprintf(`namespace=%q`, namespace), "")})
		default:
			t.Fatalf("hpa.yaml metric of type %s: not read here", m.Type)
		}
	}
	// shapeOK says why a result is not what its consumer needs, or "".
	shapeOK := func(c check, v []promSample) string {
		if c.perPod {
			var got []string
			for _, s := range v {
				if _, ok := finite(s); !ok {
					return fmt.Sprintf("pod %s: %v is not finite", s.Metric["pod"], s.Value)
				}
				got = append(got, s.Metric["pod"])
			}
			slices.Sort(got)
			if want := slices.Sorted(slices.Values(pods)); !slices.Equal(got, want) {
				return fmt.Sprintf("values for pods %v, want one for each of %v", got, want)
			}
			return ""
		}
		if len(v) != 1 {
			return fmt.Sprintf("%d values, want 1: %v", len(v), v)
		}
		if f, ok := finite(v[0]); !ok || f <= 0 {
			return fmt.Sprintf("%v, want a finite value above 0 under load", v[0].Value)
		}
		return ""
	}

	// Series appear as the load, the batcher and the rate windows get
	// going: each query is retried until it has its shape. An error (a
	// parse error, a many-to-many match) is final.
	start := time.Now()
	pending := checks
	last := map[string]string{}
	for len(pending) > 0 && time.Since(start) < 60*time.Second {
		time.Sleep(time.Second)
		var still []check
		for _, c := range pending {
			v, err := promQuery(prom, c.expr, time.Time{})
			if err != nil {
				t.Errorf("%s: %v", c.where, err)
				continue
			}
			if why := shapeOK(c, v); why != "" {
				last[c.where] = why + "\n  " + c.expr
				still = append(still, c)
			}
		}
		pending = still
	}
	for _, c := range pending {
		t.Errorf("%s: %s", c.where, last[c.where])
	}
	if t.Failed() {
		return
	}
	t.Logf("%d queries had data after %v", len(checks), time.Since(start).Round(time.Second))

	// The same numbers at one evaluation time: KEDA's one value and the
	// adapter's (per pod: summed for in-flight, whose KEDA trigger is an
	// average per replica; averaged for queue time, a value). A time a
	// little in the past, so that no scrape lands in it between the
	// queries; retried while the windows there are still filling.
	compare := func(at time.Time) (problems, logs []string) {
		values := map[string]map[string][]float64{} // signal → where → values
		for _, c := range checks {
			v, err := promQuery(prom, c.expr, at)
			if err != nil {
				t.Fatalf("%s: %v", c.where, err)
			}
			if why := shapeOK(c, v); why != "" {
				return []string{fmt.Sprintf("%s at %v: %s", c.where, at, why)}, nil
			}
			if values[c.signal] == nil {
				values[c.signal] = map[string][]float64{}
			}
			for _, s := range v {
				f, _ := finite(s)
				values[c.signal][c.where] = append(values[c.signal][c.where], f)
			}
		}
		for signal, byWhere := range values {
			if len(byWhere) != 2 {
				problems = append(problems, fmt.Sprintf("signal %s: read by %v, want the ScaledObject and the HPA", signal, slices.Sorted(maps.Keys(byWhere))))
				continue
			}
			var keda float64
			var adapterVals []float64
			for where, vs := range byWhere {
				if strings.HasPrefix(where, "ScaledObject") {
					keda = vs[0]
				} else {
					adapterVals = vs
				}
			}
			var sum float64
			for _, f := range adapterVals {
				sum += f
			}
			want := sum
			if strings.Contains(signal, "queue") {
				want = sum / float64(len(adapterVals))
			}
			if math.Abs(keda-want) > 1e-9*math.Max(1, math.Abs(want)) {
				problems = append(problems, fmt.Sprintf("signal %s at %v: KEDA reads %g, the adapter %v (%g)", signal, at, keda, adapterVals, want))
			}
			logs = append(logs, fmt.Sprintf("signal %s: KEDA %g, adapter %v", signal, keda, adapterVals))
		}
		// The outsider carried calls too: had a query counted its pod,
		// the sums above would differ.
		q := fmt.Sprintf(`sum(avg_over_time(infergate_requests_in_flight{namespace=%q,pod=%q}[1m]))`, namespace, outsider)
		if v, err := promQuery(prom, q, at); err != nil || len(v) != 1 {
			problems = append(problems, fmt.Sprintf("%s: %v %v", q, v, err))
		} else if f, ok := finite(v[0]); !ok || f <= 0 {
			problems = append(problems, fmt.Sprintf("%s = %v: the other Deployment's pod carried no calls, so the queries' pod selection went untested", q, v[0].Value))
		}
		return problems, logs
	}
	var problems, logs []string
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if problems, logs = compare(time.Now().Add(-2 * time.Second)); len(problems) == 0 {
			break
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
	for _, l := range logs {
		t.Log(l)
	}
}
