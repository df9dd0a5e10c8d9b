package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// exampleConfig is the Prometheus configuration users copy.
const exampleConfig = "../examples/prometheus/prometheus.yml"

// startPrometheus runs the Debian-packaged Prometheus with
// examples/prometheus/prometheus.yml, changed only where a test must:
// its targets, a short scrape and evaluation interval, and its rule file
// (none when rules is ""). Native histograms are on as the example's
// comment tells users of Prometheus 2.40 to 3.7 (Debian 12 has 2.42). It
// returns the address of its HTTP API once Prometheus is ready.
func startPrometheus(t *testing.T, interval, rules string, targets ...string) string {
	t.Helper()
	return startPrometheusStatic(t, interval, rules, []any{map[string]any{"targets": targets}})
}

// startPrometheusStatic is startPrometheus with the job's static_configs
// given whole: groups of targets with the labels a service discovery
// would give them (namespace and pod, as Kubernetes discovery does).
func startPrometheusStatic(t *testing.T, interval, rules string, staticConfigs []any) string {
	t.Helper()
	return startPrometheusFeatures(t, interval, rules, "native-histograms", staticConfigs)
}

// startPrometheusFeatures is startPrometheusStatic with the feature flags
// given (--enable-feature's comma-separated list): exemplar-storage keeps
// exemplars; without native-histograms Prometheus 2.42 scrapes
// OpenMetrics text and stores the classic buckets.
func startPrometheusFeatures(t *testing.T, interval, rules, features string, staticConfigs []any) string {
	t.Helper()
	b, err := os.ReadFile(exampleConfig)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("%s: %v", exampleConfig, err)
	}
	global, _ := cfg["global"].(map[string]any)
	jobs, _ := cfg["scrape_configs"].([]any)
	if global == nil || len(jobs) != 1 {
		t.Fatalf("%s: want a global section and one scrape job", exampleConfig)
	}
	global["scrape_interval"], global["evaluation_interval"] = interval, interval
	jobs[0].(map[string]any)["static_configs"] = staticConfigs
	dir := t.TempDir()
	if rules != "" {
		path := filepath.Join(dir, "infergate-rules.yml")
		if err := os.WriteFile(path, []byte(rules), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg["rule_files"] = []any{path}
	} else {
		delete(cfg, "rule_files")
	}
	if b, err = yaml.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	startTool(t, "prometheus", "--config.file="+path, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--enable-feature="+features)
	waitHTTP(t, "http://"+addr+"/-/ready", 60*time.Second)
	return addr
}

// promSample is one element of an instant vector from the HTTP API: a
// float value or a native histogram.
type promSample struct {
	Metric    map[string]string `json:"metric"`
	Value     []json.RawMessage `json:"value"`     // [time, "float"]
	Histogram []json.RawMessage `json:"histogram"` // [time, {count, sum, buckets}]
}

// Float is the sample's float value (NaN-aware parsing of Prometheus'
// quoted numbers).
func (s promSample) Float() (float64, error) {
	if len(s.Value) != 2 {
		return 0, fmt.Errorf("%v is not a float sample", s.Metric)
	}
	var v string
	if err := json.Unmarshal(s.Value[1], &v); err != nil {
		return 0, err
	}
	return strconv.ParseFloat(v, 64)
}

// promBucket is one native bucket: boundary rule, lower, upper, count.
type promBucket struct{ Lower, Upper, Count float64 }

// Buckets are the sample's native histogram buckets.
func (s promSample) Buckets() ([]promBucket, error) {
	if len(s.Histogram) != 2 {
		return nil, fmt.Errorf("%v is not a histogram sample", s.Metric)
	}
	var h struct {
		Buckets [][]json.RawMessage `json:"buckets"`
	}
	if err := json.Unmarshal(s.Histogram[1], &h); err != nil {
		return nil, err
	}
	out := make([]promBucket, 0, len(h.Buckets))
	for _, b := range h.Buckets {
		if len(b) != 4 {
			return nil, fmt.Errorf("bucket %s", b)
		}
		var f [3]float64
		for i := range f {
			var v string
			err := json.Unmarshal(b[i+1], &v)
			if err == nil {
				f[i], err = strconv.ParseFloat(v, 64)
			}
			if err != nil {
				return nil, err
			}
		}
		out = append(out, promBucket{f[0], f[1], f[2]})
	}
	return out, nil
}

// promGet calls a Prometheus HTTP API endpoint (path, with v) and decodes
// its data into data; an error names the query and Prometheus' own
// message.
func promGet(addr, path, query string, v url.Values, data any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path+"?"+v.Encode(), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", query, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("%s: HTTP %d: %s", query, resp.StatusCode, body)
	}
	if r.Status != "success" {
		return fmt.Errorf("%s: %s", query, r.Error)
	}
	if err := json.Unmarshal(r.Data, data); err != nil {
		return fmt.Errorf("%s: data: %w", query, err)
	}
	return nil
}

// promQuery runs an instant query at time at (now when zero) and returns
// its vector; an error names the query and Prometheus' own message.
func promQuery(addr, query string, at time.Time) ([]promSample, error) {
	v := url.Values{"query": {query}}
	if !at.IsZero() {
		v.Set("time", strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64))
	}
	var d struct {
		ResultType string       `json:"resultType"`
		Result     []promSample `json:"result"`
	}
	if err := promGet(addr, "/api/v1/query", query, v, &d); err != nil {
		return nil, err
	}
	if d.ResultType != "vector" {
		return nil, fmt.Errorf("%s: result type %s, want vector", query, d.ResultType)
	}
	return d.Result, nil
}
