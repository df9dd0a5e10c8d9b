package scenario

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metric names read from infergate's /metrics by the batching scenario.
const (
	metricBatchSize    = "infergate_batch_size"
	metricBatchesTotal = "infergate_batches_total"
)

// BatchCounters are cumulative batching counters of one model, summed over
// every upstream, as scraped at one moment.
type BatchCounters struct {
	// Found is false when infergate exports no infergate_batch_size series
	// for the model (batching off, or not yet used).
	Found bool
	// Items is the histogram's _sum: requests (items) dispatched in batches.
	Items float64
	// Batches is the histogram's _count: batches dispatched.
	Batches float64
	// BatchesTotal is infergate_batches_total, when exported.
	BatchesTotal float64
}

// Sub returns c − before, the activity between two scrapes.
func (c BatchCounters) Sub(before BatchCounters) BatchCounters {
	return BatchCounters{
		Found:        c.Found,
		Items:        c.Items - before.Items,
		Batches:      c.Batches - before.Batches,
		BatchesTotal: c.BatchesTotal - before.BatchesTotal,
	}
}

// MeanBatch returns Items/Batches, or 0 when no batch was dispatched.
func (c BatchCounters) MeanBatch() float64 {
	if c.Batches <= 0 {
		return 0
	}
	return c.Items / c.Batches
}

// ParseBatchCounters reads Prometheus text exposition and sums model's
// infergate_batch_size histograms and infergate_batches_total counters.
func ParseBatchCounters(r io.Reader, modelName string) (BatchCounters, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return BatchCounters{}, fmt.Errorf("scenario: parse metrics: %w", err)
	}
	var c BatchCounters
	if f := fams[metricBatchSize]; f != nil {
		for _, m := range f.GetMetric() {
			h := m.GetHistogram()
			if h == nil || !hasLabel(m, "model", modelName) {
				continue
			}
			c.Found = true
			c.Items += h.GetSampleSum()
			c.Batches += float64(h.GetSampleCount())
		}
	}
	if f := fams[metricBatchesTotal]; f != nil {
		for _, m := range f.GetMetric() {
			if ctr := m.GetCounter(); ctr != nil && hasLabel(m, "model", modelName) {
				c.BatchesTotal += ctr.GetValue()
			}
		}
	}
	return c, nil
}

// hasLabel reports whether m has the label name=value. A series without
// that label at all also matches, so a build that labels by upstream only
// is still read.
func hasLabel(m *dto.Metric, name, value string) bool {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue() == value
		}
	}
	return true
}

// ScrapeBatchCounters fetches http://admin/metrics and parses it with
// ParseBatchCounters.
func ScrapeBatchCounters(ctx context.Context, admin, modelName string) (BatchCounters, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/metrics", nil)
	if err != nil {
		return BatchCounters{}, fmt.Errorf("scenario: scrape %s: %w", admin, err)
	}
	// Ask for the classic text format: the parser does not read OpenMetrics.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return BatchCounters{}, fmt.Errorf("scenario: scrape %s: %w", admin, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return BatchCounters{}, fmt.Errorf("scenario: scrape %s: status %s", admin, resp.Status)
	}
	return ParseBatchCounters(resp.Body, modelName)
}
