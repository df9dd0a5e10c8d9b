package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func loadSeries(t *testing.T) []seriesDoc {
	t.Helper()
	f, err := os.Open("testdata/series.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	docs, err := parseSeries(f)
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

// squeeze collapses runs of spaces, so row checks do not depend on
// column widths.
func squeeze(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.Join(strings.Fields(l), " ")
	}
	return strings.Join(lines, "\n")
}

func TestRenderTable(t *testing.T) {
	var buf bytes.Buffer
	renderTable(&buf, loadSeries(t), 30*time.Second)
	got := buf.String()

	rows := []string{
		"MODEL PROTO METHOD CODE CALLS/1m REQ/S P50 ms P99 ms P999 ms MAX ms UP P99 ms OVH P50 µs OVH P99 µs",
		"resnet50 kserve ModelInfer ok 1800 60.0 6.52 33.71 45.06 50.12 33.50 95 312",
		"resnet50 tf Predict ok 600 20.0 6.10 31.20 40.00 41.50 31.00 110 290",
		"resnet50:1 kserve ModelInfer server_error 3 0.1 0.20 0.50 0.50 0.50 0.40 50 100",
		"simple kserve ModelInfer ok 1500 50.0 0.81 1.73 2.20 3.10 1.60 85 231",
	}
	sq := squeeze(got)
	for _, r := range rows {
		if !strings.Contains(sq, r+"\n") {
			t.Errorf("table lacks row %q; got:\n%s", r, got)
		}
	}
	// Sorted by model, then protocol: kserve resnet50 before tf resnet50,
	// simple last.
	if i, j := strings.Index(sq, "resnet50 kserve"), strings.Index(sq, "resnet50 tf"); i < 0 || j < i {
		t.Errorf("rows out of order:\n%s", got)
	}

	golden := "testdata/table.golden"
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("table differs from %s (go test -update rewrites it):\ngot:\n%s\nwant:\n%s", golden, got, want)
	}
}

func TestRenderTableRates(t *testing.T) {
	cases := []struct {
		name    string
		elapsed time.Duration
		want    string
	}{
		{"before a minute", 30 * time.Second, " 60.0 "},
		{"after a minute the window is full", 5 * time.Minute, " 30.0 "},
		{"first second is not divided by zero", 0, " 1800.0 "},
	}
	docs := loadSeries(t)[2:3] // resnet50 kserve, 1800 calls in 1m
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			renderTable(&buf, docs, tc.elapsed)
			if !strings.Contains(squeeze(buf.String())+" ", tc.want) {
				t.Errorf("want rate %q in:\n%s", tc.want, buf.String())
			}
		})
	}
}

func TestRenderTableEmpty(t *testing.T) {
	var buf bytes.Buffer
	renderTable(&buf, nil, time.Second)
	if !strings.Contains(buf.String(), "no series yet") {
		t.Errorf("got %q", buf.String())
	}
}

func TestRenderFrame(t *testing.T) {
	var buf bytes.Buffer
	renderFrame(&buf, frame{
		elapsed: 17*time.Second + 300*time.Millisecond,
		final:   true,
		guide:   guideText("127.0.0.1:9001", "127.0.0.1:9091", "127.0.0.1:8001", "127.0.0.1:8002") + legend,
		series:  loadSeries(t),
		gpuErr:  errors.New("demo: GET http://x/metrics: 500"),
		load: loadSnapshot{Sent: 10, OK: 7, Shed: 1, InFlight: 1,
			Errors: map[codes.Code]uint64{codes.Unavailable: 2, codes.Internal: 1}},
		events: []string{"[15s] FAULT: resnet50 slowed down"},
	})
	got := buf.String()
	for _, want := range []string{
		"http://127.0.0.1:9091/metrics",
		"http://127.0.0.1:9091/api/v1/series",
		"http://127.0.0.1:9091/readyz",
		"GPU metrics: http://127.0.0.1:8002/metrics",
		`curl -XPOST http://127.0.0.1:8002/api/v1/faults -d '{"model":"resnet50","slowdown":3}'`,
		"curl -XDELETE http://127.0.0.1:8002/api/v1/faults",
		"gRPC clients at 127.0.0.1:9001",
		"infergate demo, final, 17s after load start",
		"gpu:   demo: GET http://x/metrics: 500",
		"how to read the table",
		"  CODE server_error  ",
		"  gpu_saturated  ",
		"load:  sent 10  ok 7  errors 3 (Internal 1, Unavailable 2)  shed 1  in flight 1",
		"event: [15s] FAULT: resnet50 slowed down",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("frame lacks %q; got:\n%s", want, got)
		}
	}
}

func TestProtocolAndShortMethod(t *testing.T) {
	cases := []struct{ method, proto, short string }{
		{"/inference.GRPCInferenceService/ModelInfer", "kserve", "ModelInfer"},
		{"/tensorflow.serving.PredictionService/Predict", "tf", "Predict"},
		{"/grpc.health.v1.Health/Check", "-", "Check"},
		{"other", "-", "other"},
	}
	for _, tc := range cases {
		if p := protocol(tc.method); p != tc.proto {
			t.Errorf("protocol(%q) = %q, want %q", tc.method, p, tc.proto)
		}
		if s := shortMethod(tc.method); s != tc.short {
			t.Errorf("shortMethod(%q) = %q, want %q", tc.method, s, tc.short)
		}
	}
}

func TestRenderFrameHints(t *testing.T) {
	var buf bytes.Buffer
	renderFrame(&buf, frame{
		series: loadSeries(t),
		gpu:    []gpuReading{{UUID: "GPU-sim-0", Util: 0.95, Hints: map[string]string{"resnet50": "gpu_saturated"}}},
	})
	if got := buf.String(); !strings.Contains(got, "gpu:   GPU-sim-0: util 95.0%") ||
		!strings.Contains(got, "\nhints: resnet50 gpu_saturated\n") {
		t.Errorf("frame lacks the gpu or hints line:\n%s", got)
	}
}

// TestLegend checks that the legend explains every column, CODE class and
// cause hint the demo can show.
func TestLegend(t *testing.T) {
	for _, want := range []string{
		"CALLS/1m ", "REQ/S ", "P50/P99/P999/MAX ", "UP P99 ", "OVH P50/P99 ",
		"proxy overhead = total - upstream - batch queue",
		"CODE ok ", "CODE client_error ", "CODE server_error ",
		"gpu_saturated ", "gpu_throttled ", "gpu_memory_pressure ", "not_gpu ", "unknown ", "none ",
	} {
		if !strings.Contains(legend, want) {
			t.Errorf("legend lacks %q", want)
		}
	}
	// Every column of the table has its line.
	for _, col := range tableHeader {
		name := strings.Fields(col)[0]
		if name == "MODEL" || name == "PROTO" || name == "METHOD" {
			continue
		}
		if !strings.Contains(legend, name) {
			t.Errorf("legend does not explain column %q", col)
		}
	}
}

// TestWidth checks that the demo's own lines (guide, load, fault plan,
// legend, announcements) fit a 100-column terminal.
func TestWidth(t *testing.T) {
	text := guideText("127.0.0.1:9001", "127.0.0.1:9091", "127.0.0.1:8001", "127.0.0.1:8002")
	for _, o := range []options{{maxInflight: 256}, {seconds: 25, maxInflight: 256}, {seconds: 35, maxInflight: 256}, {seconds: 70, maxInflight: 256}} {
		text += streamsText(demoStreams(nil, nil, 1), o)
	}
	text += legend
	text += wrap("hints: ", "half_plus_two unknown, mobilenet_v3 unknown, resnet50 gpu_memory_pressure, simple unknown", ", ")
	var announced []string
	synctest.Test(t, func(t *testing.T) {
		runFault(context.Background(), &fakeFaults{start: time.Now()}, demoFault, func(s string) {
			announced = append(announced, "event: [15s] "+s)
		})
	})
	text += strings.Join(announced, "\n")
	for _, l := range strings.Split(text, "\n") {
		if n := len([]rune(l)); n > screenWidth {
			t.Errorf("line of %d columns: %q", n, l)
		}
	}
}

func TestWrap(t *testing.T) {
	got := wrap("x: ", strings.Repeat("abcdefghi, ", 20)+"end", ", ")
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "x: abcdefghi, abcdefghi,") ||
		!strings.HasPrefix(lines[1], "   abcdefghi,") || !strings.HasSuffix(lines[2], "abcdefghi, end") {
		t.Errorf("wrap:\n%s", got)
	}
	for _, l := range lines {
		if len(l) > screenWidth || strings.HasSuffix(l, " ") {
			t.Errorf("line %q", l)
		}
	}
	if got := wrap("hints: ", "none", ", "); got != "hints: none\n" {
		t.Errorf("wrap = %q", got)
	}
}

// TestRenderFrameAlertHolds: while the latency alert holds after its
// model recovered, the hints line says so (and when it resolves, on the
// demo's clock) instead of "none (no model's latency is up ...)" beside
// a firing alert; the alerts line has the alert's summary.
func TestRenderFrameAlertHolds(t *testing.T) {
	now := time.Date(2026, 12, 8, 21, 51, 5, 0, time.UTC)
	summary := "resnet50: p99 31.2ms at 21:50:36, over its baseline bound 24.1ms; now 7.2ms, recovering (resolves at 21:51:20 if it stays below)"
	alert := alertDoc{Name: "ModelLatencyAboveBaseline", State: "firing", Severity: "warning",
		Labels:      map[string]string{"model": "resnet50", "kind": "latency"},
		Annotations: map[string]string{"summary": summary}, ResolvesAt: now.Add(15 * time.Second)}
	gpus := []gpuReading{{UUID: "GPU-sim-0", Util: 0.4}}
	render := func(a alertDoc, gs []gpuReading) string {
		var buf bytes.Buffer
		renderFrame(&buf, frame{elapsed: 65 * time.Second, now: now, series: loadSeries(t), gpu: gs, alerts: []alertDoc{a}})
		return buf.String()
	}
	got := render(alert, gpus)
	if !strings.Contains(got, "\nhints: resnet50 recovering: alert holds until 1m20s\n") ||
		strings.Contains(got, "no model's latency is up") {
		t.Errorf("hints line while the alert holds:\n%s", got)
	}
	if !strings.Contains(got, "1m5s after load start, 21:51:05") {
		t.Errorf("title lacks the clock the summaries use:\n%s", got)
	}
	if alerts := got[strings.Index(got, "\nalerts: "):]; !strings.Contains(strings.Join(strings.Fields(alerts), " "),
		"alerts: FIRING ModelLatencyAboveBaseline "+summary) {
		t.Errorf("alerts line lacks the summary:\n%s", got)
	}
	for _, l := range strings.Split(got[strings.Index(got, "\ngpu:"):], "\n") {
		if n := len([]rune(l)); n > screenWidth {
			t.Errorf("line of %d columns: %q", n, l)
		}
	}
	// A hint and a recovering alert: both, side by side.
	gpus[0].Hints = map[string]string{"resnet50": "not_gpu"}
	if got := render(alert, gpus); !strings.Contains(got, "\nhints: resnet50 not_gpu (recovering: alert holds until 1m20s)\n") {
		t.Errorf("hint and recovering alert:\n%s", got)
	}
	// Still over, no hint yet.
	gpus[0].Hints = nil
	alert.ResolvesAt = time.Time{}
	if got := render(alert, gpus); !strings.Contains(got, "\nhints: resnet50 alert ModelLatencyAboveBaseline firing\n") {
		t.Errorf("firing alert, no hint:\n%s", got)
	}
}
