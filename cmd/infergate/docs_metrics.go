package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/infergate/infergate/batcher"
	"github.com/infergate/infergate/internal/memlimit"
	"github.com/infergate/infergate/monitor"
	"github.com/infergate/infergate/proto/kservepb"
	"github.com/infergate/infergate/proto/methods"
)

// referenceYAML turns on every part that registers metrics: named
// upstreams with a breaker, a routed model with a fallback, batching and
// a GPU source. Nothing is dialled, scraped or served: newParts builds the
// parts and nothing runs them. Tracing is on, with tail-based sampling,
// for its sampler's metrics; its exporter connects only when a span is
// sent, and none is.
const referenceYAML = `
upstreams:
  - {name: primary, address: "127.0.0.1:1", breaker: {consecutive_failures: 3}}
  - {name: edge, address: "127.0.0.1:2"}
routes:
  - {model: reference, upstream: primary, fallback: {upstream: edge, model: reference_small}}
batching: {mode: static, models: {reference: {}}}
gpu: {sources: [{kind: prometheus, url: "http://127.0.0.1:1/metrics"}]}
business_metrics: [{name: conversion, query: "sum(rate(orders_total[5m]))", url: "http://127.0.0.1:1"}]
releases:
  - {model: reference, stable: {version: "1"}, candidate: {version: "2"}, steps: [10, 50, 100]}
tracing: {enabled: true, endpoint: "http://127.0.0.1:1", max_spans_per_second: 100}
`

// metricDoc is one metric of the reference page.
type metricDoc struct {
	name, typ, help string
	// labels are the label names, variable ones first; values holds the
	// values of a constant label that tells several collectors of one
	// name apart (infergate_rejected_calls_total's reason).
	labels []string
	values map[string][]string
	// byName says that typ was read from the name: no series of the
	// metric existed to read it from.
	byName bool
}

// recordingRegisterer registers on reg and keeps what it registered.
type recordingRegisterer struct {
	reg        *prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	if err := r.reg.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *recordingRegisterer) Unregister(c prometheus.Collector) bool { return r.reg.Unregister(c) }

// referenceMetrics builds the parts of referenceYAML on a fresh registry,
// as serve does, and describes every collector registered. Types come
// from a Gather after a few calls are recorded, else from the vector's Go
// type, else from the name.
func referenceMetrics() ([]metricDoc, error) {
	cfg := defaultConfigFrom(noEnv)
	dec := yaml.NewDecoder(strings.NewReader(referenceYAML))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("reference config: %w", err)
	}
	cfg.GPU = cfg.GPU.Resolved()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("reference config: %w", err)
	}
	rec := &recordingRegisterer{reg: prometheus.NewRegistry()}
	w, err := newParts(cfg, memlimit.Result{}, rec, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	defer w.Close()
	touchMonitor(w.mon)
	if err := touchBatcher(w.bat); err != nil {
		return nil, err
	}
	families, err := rec.reg.Gather()
	if err != nil {
		return nil, fmt.Errorf("gather: %w", err)
	}
	// promtool check metrics' own rules, on every family with a series;
	// the Go and process collectors' are client_golang's to keep clean.
	lint, err := promlint.NewWithMetricFamilies(families).Lint()
	if err != nil {
		return nil, fmt.Errorf("lint: %w", err)
	}
	var problems []error
	for _, p := range lint {
		if !runtimeMetric(p.Metric) {
			problems = append(problems, fmt.Errorf("metric %s: %s", p.Metric, p.Text))
		}
	}
	types := map[string]string{}
	for _, mf := range families {
		types[mf.GetName()] = strings.ToLower(mf.GetType().String())
	}

	byName := map[string]*metricDoc{}
	for _, c := range rec.collectors {
		ch := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			name, help, consts, vars, err := parseDesc(d.String())
			if err != nil {
				problems = append(problems, err)
				continue
			}
			if runtimeMetric(name) {
				continue
			}
			m := byName[name]
			if m == nil {
				m = &metricDoc{name: name, help: help, labels: vars, values: map[string][]string{}}
				m.typ = types[name]
				if m.typ == "" {
					m.typ = vectorType(c)
				}
				if m.typ == "" {
					m.typ, m.byName = typeFromName(name), true
				}
				byName[name] = m
			}
			for _, kv := range consts {
				if !slices.Contains(m.labels, kv[0]) {
					m.labels = append(m.labels, kv[0])
				}
				if !slices.Contains(m.values[kv[0]], kv[1]) {
					m.values[kv[0]] = append(m.values[kv[0]], kv[1])
				}
			}
		}
	}
	out := make([]metricDoc, 0, len(byName))
	for _, name := range sortedKeys(byName) {
		m := byName[name]
		for k, vs := range m.values {
			if len(vs) < 2 {
				// One collector's constant (the build's version): its
				// value is not a property of the metric.
				delete(m.values, k)
				continue
			}
			slices.Sort(vs)
		}
		problems = append(problems, metricProblems(*m)...)
		out = append(out, *m)
	}
	return out, errors.Join(problems...)
}

// touchMonitor records one call of every kind, so that the monitor's
// metrics have series and Gather reads their types.
func touchMonitor(mon *monitor.Registry) {
	key := monitor.SeriesKey{Model: "reference", Method: "/inference.GRPCInferenceService/ModelInfer", Upstream: "primary",
		CodeClass: monitor.CodeClassOK, Route: monitor.RoutePrimary, SizeClass: monitor.SizeClass4KiB}
	mon.Record(key, monitor.Sample{Total: 3 * time.Millisecond, Upstream: 2 * time.Millisecond, Queue: time.Millisecond, Code: "OK", BytesIn: 1, BytesOut: 1})
	mon.RecordStream(key, monitor.StreamSample{Response: true, First: true, Wait: time.Millisecond, Done: true, Responses: 1})
	mon.StreamDropped(monitor.StreamDropOutstanding)
	mon.InFlight("primary")
	mon.Rotate()
}

// touchBatcher hands the batcher one call, which its upstream refuses:
// the call's queue gives the batch metrics series (the batch size is a
// histogram, which its name cannot tell).
func touchBatcher(b *batcher.Batcher) error {
	payload, err := proto.Marshal(&kservepb.ModelInferRequest{
		ModelName:        "reference",
		Inputs:           []*kservepb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 1}}},
		RawInputContents: [][]byte{make([]byte, 4)},
	})
	if err != nil {
		return err
	}
	refuse := func(context.Context, string, []byte, metadata.MD) ([]byte, metadata.MD, metadata.MD, error) {
		return nil, nil, nil, status.Error(codes.Unavailable, "reference page: no upstream")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = b.Do(ctx, batcher.Request{Upstream: "primary", Invoke: refuse, Method: methods.ModelInfer, Model: "reference", Payload: payload})
	if status.Code(err) != codes.Unavailable {
		return fmt.Errorf("reference page: the batcher did not send the call to its upstream: %v", err)
	}
	return nil
}

// runtimeMetric reports whether name is one of client_golang's Go or
// process collectors' metrics: the page lists them as one group, since
// their set follows the Go version and the OS.
func runtimeMetric(name string) bool {
	return strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_")
}

// vectorType is the type of a client_golang vector, known without a
// series; "" for any other collector.
func vectorType(c prometheus.Collector) string {
	switch c.(type) {
	case *prometheus.CounterVec:
		return "counter"
	case *prometheus.GaugeVec:
		return "gauge"
	case *prometheus.HistogramVec:
		return "histogram"
	case *prometheus.SummaryVec:
		return "summary"
	}
	return ""
}

// typeFromName is the type the project's naming rule gives: counters end
// in _total, and so does nothing else (promtool check metrics).
func typeFromName(name string) string {
	if strings.HasSuffix(name, "_total") {
		return "counter"
	}
	return "gauge"
}

var (
	snakeCase = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	// nonBaseUnits are the units a name must not use: Prometheus wants
	// seconds and bytes.
	nonBaseUnits = []string{"_milliseconds", "_microseconds", "_nanoseconds", "_ms", "_us", "_minutes", "_hours",
		"_kilobytes", "_megabytes", "_gigabytes", "_kib", "_mib", "_percent"}
)

// metricProblems are the conventions of DESIGN.md a metric breaks, each
// naming the metric.
func metricProblems(m metricDoc) []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("metric %s: %s", m.name, fmt.Sprintf(format, args...)))
	}
	if !strings.HasPrefix(m.name, "infergate_") {
		bad("not under the infergate_ prefix")
	}
	if !snakeCase.MatchString(m.name) {
		bad("not snake_case")
	}
	if (m.typ == "counter") != strings.HasSuffix(m.name, "_total") {
		bad("a %s; counters and only counters end in _total", m.typ)
	}
	for _, u := range nonBaseUnits {
		if strings.Contains(m.name+"_", u+"_") {
			bad("unit %s is not a base unit (seconds, bytes, ratio)", strings.TrimPrefix(u, "_"))
		}
	}
	if strings.TrimSpace(m.help) == "" {
		bad("no help text")
	}
	for _, l := range m.labels {
		if !snakeCase.MatchString(l) {
			bad("label %q is not snake_case", l)
		}
	}
	return errs
}

// parseDesc reads what Desc.String shows (client_golang exports no
// getters): `Desc{fqName: "n", help: "h", unit: "u", constLabels:
// {k="v",...}, variableLabels: {a,c(b),...}}`. A format it does not know
// is an error, so a client_golang upgrade that changes it fails the
// reference test rather than the page.
func parseDesc(s string) (name, help string, consts [][2]string, vars []string, err error) {
	rest := s
	fail := func() error { return fmt.Errorf("metric descriptor %s: format not understood", s) }
	quoted := func(prefix string) (string, bool) {
		var ok bool
		if rest, ok = strings.CutPrefix(rest, prefix); !ok {
			return "", false
		}
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return "", false
		}
		rest = rest[len(q):]
		v, err := strconv.Unquote(q)
		return v, err == nil
	}
	var ok bool
	if name, ok = quoted("Desc{fqName: "); !ok {
		return "", "", nil, nil, fail()
	}
	if help, ok = quoted(", help: "); !ok {
		return "", "", nil, nil, fail()
	}
	if strings.HasPrefix(rest, ", unit: ") {
		if _, ok = quoted(", unit: "); !ok {
			return "", "", nil, nil, fail()
		}
	}
	if rest, ok = strings.CutPrefix(rest, ", constLabels: {"); !ok {
		return "", "", nil, nil, fail()
	}
	for !strings.HasPrefix(rest, "}") {
		k, after, found := strings.Cut(rest, "=")
		if !found {
			return "", "", nil, nil, fail()
		}
		rest = after
		v, ok := quoted("")
		if !ok {
			return "", "", nil, nil, fail()
		}
		consts = append(consts, [2]string{k, v})
		rest = strings.TrimPrefix(rest, ",")
	}
	list, ok := strings.CutPrefix(rest, "}, variableLabels: {")
	if !ok || !strings.HasSuffix(list, "}}") {
		return "", "", nil, nil, fail()
	}
	if list = strings.TrimSuffix(list, "}}"); list != "" {
		for _, l := range strings.Split(list, ",") {
			if c, ok := strings.CutPrefix(l, "c("); ok {
				l = strings.TrimSuffix(c, ")") // a constrained label
			}
			vars = append(vars, l)
		}
	}
	return name, help, consts, vars, nil
}

// metricsPage writes docs/reference/metrics.md.
func metricsPage(w io.Writer) error {
	ms, err := referenceMetrics()
	if err != nil {
		return err
	}
	p := &pageWriter{w: w}
	p.line("# infergate metrics")
	p.line("")
	p.line("<!-- Generated by `infergate docs` (make docs) from the collectors infergate registers; do not edit. TestReferencePagesMatchBinary fails when this page is stale. -->")
	p.line("")
	p.line("Every metric `/metrics` on the admin listener can show. The list is read from the collectors `infergate` registers with every optional part on " +
		"(routes with fallbacks and breakers, batching, GPU telemetry, alerting); a metric of a part that is off is absent, " +
		"and a labelled metric shows a series only once something has happened to it (a model called, a GPU sampled).")
	p.line("")
	p.line("| metric | type | labels | help |")
	p.line("|---|---|---|---|")
	footnote := false
	for _, m := range ms {
		typ := m.typ
		if m.byName {
			typ += " ¹"
			footnote = true
		}
		labels := make([]string, 0, len(m.labels))
		for _, l := range m.labels {
			s := "`" + l + "`"
			if vs := m.values[l]; len(vs) > 0 {
				s += " (" + strings.Join(vs, ", ") + ")"
			}
			labels = append(labels, s)
		}
		p.line(fmt.Sprintf("| `%s` | %s | %s | %s |", m.name, typ, strings.Join(labels, ", "), cell(m.help)))
	}
	if footnote {
		p.line("")
		p.line("¹ Type read from the name (counters, and only they, end in `_total`): the generator had no series of the metric to read its type from.")
	}
	p.line("")
	p.line("## Go runtime and process")
	p.line("")
	p.line("`go_*` and `process_*`: the Go runtime and process metrics of client_golang's " +
		"[Go and process collectors](https://github.com/prometheus/client_golang/tree/main/prometheus/collectors). " +
		"Their set follows the Go version infergate was built with and the operating system.")
	return p.err
}
