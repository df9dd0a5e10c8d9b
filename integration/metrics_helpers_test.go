package integration

import (
	"context"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// metricsText fetches infergate's /metrics in the classic text format.
func metricsText(t *testing.T, admin string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/metrics", nil)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

// scrape fetches /metrics in the classic text format and parses it.
func scrape(t *testing.T, admin string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(metricsText(t, admin)))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// labelsMatch reports whether m carries every label in want.
func labelsMatch(m *dto.Metric, want map[string]string) bool {
	have := map[string]string{}
	for _, lp := range m.GetLabel() {
		have[lp.GetName()] = lp.GetValue()
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// find returns the metrics of family name carrying the given labels.
func find(fams map[string]*dto.MetricFamily, name string, labels map[string]string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range fams[name].GetMetric() {
		if labelsMatch(m, labels) {
			out = append(out, m)
		}
	}
	return out
}

// summaryQuantile reads quantile q of the first summary matching labels.
func summaryQuantile(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string, q float64) (float64, bool) {
	t.Helper()
	for _, m := range find(fams, name, labels) {
		for _, qq := range m.GetSummary().GetQuantile() {
			if qq.GetQuantile() == q {
				return qq.GetValue(), true
			}
		}
	}
	return 0, false
}

// counterSum adds up the counters of family name carrying labels.
func counterSum(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	var sum float64
	for _, m := range find(fams, name, labels) {
		if c := m.GetCounter(); c != nil {
			sum += c.GetValue()
		}
		if g := m.GetGauge(); g != nil {
			sum += g.GetValue()
		}
		if u := m.GetUntyped(); u != nil {
			sum += u.GetValue()
		}
	}
	return sum
}

// eventually polls cond up to a bounded number of times; the condition is
// about state another process reaches asynchronously, never about time.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 300; i++ {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

func dumpFamilies(fams map[string]*dto.MetricFamily, prefix string) string {
	var b strings.Builder
	for name, f := range fams {
		if strings.HasPrefix(name, prefix) {
			b.WriteString(f.String())
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// promtoolClean fetches infergate's /metrics in the classic text format,
// checks that each of families has its TYPE line, and runs Prometheus' own
// linter, promtool check metrics, over it: any output is a failure.
func promtoolClean(t *testing.T, admin string, families ...string) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not installed (Debian package prometheus; .ci/run installs it)")
	}
	body := metricsText(t, admin)
	for _, fam := range families {
		if !strings.Contains(body, "# TYPE "+fam+" ") {
			t.Errorf("/metrics lacks %s", fam)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "" {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}
