package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/infergate/infergate/proto/methods"
)

// maxBody bounds what the demo reads from an admin endpoint.
const maxBody = 8 << 20

// windowStats is one component of one window in infergate's
// /api/v1/series, in seconds.
type windowStats struct {
	Count uint64  `json:"count"`
	P50   float64 `json:"p50_seconds"`
	P90   float64 `json:"p90_seconds"`
	P99   float64 `json:"p99_seconds"`
	P999  float64 `json:"p999_seconds"`
	Max   float64 `json:"max_seconds"`
	Mean  float64 `json:"mean_seconds"`
}

// seriesDoc is one series of infergate's /api/v1/series.
type seriesDoc struct {
	Model     string `json:"model"`
	Version   string `json:"version"`
	Method    string `json:"method"`
	Upstream  string `json:"upstream"`
	CodeClass string `json:"code_class"`
	Route     string `json:"route"`
	Calls     uint64 `json:"calls"`
	// Windows maps "1m", "5m", "15m" to components "total", "upstream",
	// "overhead" (and "queue").
	Windows map[string]map[string]windowStats `json:"windows"`
}

// stats returns the window's component, zero when absent.
func (d seriesDoc) stats(window, component string) windowStats {
	return d.Windows[window][component]
}

// protocol names the inference protocol of a full gRPC method.
func protocol(method string) string {
	switch {
	case strings.HasPrefix(method, methods.KServeService):
		return "kserve"
	case strings.HasPrefix(method, methods.TFServingService):
		return "tf"
	default:
		return "-"
	}
}

// shortMethod returns the last element of a full gRPC method
// ("/inference.GRPCInferenceService/ModelInfer" → "ModelInfer").
func shortMethod(method string) string {
	if i := strings.LastIndexByte(method, '/'); i >= 0 && i < len(method)-1 {
		return method[i+1:]
	}
	return method
}

// parseSeries decodes a /api/v1/series body.
func parseSeries(r io.Reader) ([]seriesDoc, error) {
	var docs []seriesDoc
	if err := json.NewDecoder(r).Decode(&docs); err != nil {
		return nil, fmt.Errorf("demo: decode series: %w", err)
	}
	return docs, nil
}

// fetchSeries reads infergate's /api/v1/series from the admin address.
func fetchSeries(ctx context.Context, hc *http.Client, admin string) ([]seriesDoc, error) {
	body, err := httpGet(ctx, hc, "http://"+admin+"/api/v1/series")
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return parseSeries(body)
}

// httpGet returns the body of a 200 answer to GET url.
func httpGet(ctx context.Context, hc *http.Client, url string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("demo: GET %s: %w", url, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("demo: GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, fmt.Errorf("demo: GET %s: %s", url, resp.Status)
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(resp.Body, maxBody), resp.Body}, nil
}
