package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// clearScreen moves the cursor home and clears the terminal, so each
// frame redraws in place.
const clearScreen = "\x1b[H\x1b[2J"

// frame is everything one screen shows.
type frame struct {
	// elapsed is the time since the load started, at now (the wall
	// clock the alerts' summaries use).
	elapsed time.Duration
	now     time.Time
	final   bool
	// guide is the "where to look" block, shown on top when non-empty.
	guide     string
	series    []seriesDoc
	seriesErr error
	gpu       []gpuReading
	gpuErr    error
	load      loadSnapshot
	alerts    []alertDoc
	alertsErr error
	// events are recent announcements (fault injected, cleared), oldest
	// first.
	events []string
}

// renderFrame writes f: title, table, GPU, cause hints, load and events.
func renderFrame(w io.Writer, f frame) {
	if f.guide != "" {
		io.WriteString(w, f.guide)
		io.WriteString(w, "\n")
	}
	title := "live"
	if f.final {
		title = "final"
	}
	clock := ""
	if !f.now.IsZero() {
		clock = ", " + f.now.Format("15:04:05")
	}
	fmt.Fprintf(w, "infergate demo, %s, %s after load start%s (latency windows: 1m)\n\n", title, f.elapsed.Truncate(time.Second), clock)
	if f.seriesErr != nil {
		fmt.Fprintf(w, "series: %v\n", f.seriesErr)
	} else {
		renderTable(w, f.series, f.elapsed)
	}
	io.WriteString(w, "\n")
	if f.gpuErr != nil {
		fmt.Fprintf(w, "gpu:   %v\n", f.gpuErr)
	} else {
		fmt.Fprintf(w, "gpu:   %s\n", gpuLine(f.gpu))
		elapsed := func(t time.Time) time.Duration { return f.elapsed + t.Sub(f.now) }
		io.WriteString(w, wrap("hints: ", hintLine(f.gpu, recovering(f.alerts, elapsed)), ", "))
	}
	if f.alertsErr != nil {
		fmt.Fprintf(w, "alerts: %v\n", f.alertsErr)
	} else {
		io.WriteString(w, alertLines(f.alerts))
	}
	fmt.Fprintf(w, "load:  %s\n", f.load)
	for _, e := range f.events {
		io.WriteString(w, wrap("event: ", e, " "))
	}
}

// tableHeader names the table's columns; the first four are text (left
// aligned), the rest numbers (right aligned).
var tableHeader = []string{
	"MODEL", "PROTO", "METHOD", "CODE", "CALLS/1m", "REQ/S",
	"P50 ms", "P99 ms", "P999 ms", "MAX ms", "UP P99 ms", "OVH P50 µs", "OVH P99 µs",
}

const textColumns = 4

// renderTable writes one row per series from its 1m window: total
// latency quantiles in ms, the upstream p99 in ms and the proxy overhead
// in µs. Rates divide the 1m count by min(60s, elapsed).
func renderTable(w io.Writer, series []seriesDoc, elapsed time.Duration) {
	if len(series) == 0 {
		io.WriteString(w, "(no series yet: waiting for the first requests to pass infergate)\n")
		return
	}
	span := min(elapsed, time.Minute)
	if span < time.Second {
		span = time.Second
	}
	sorted := append([]seriesDoc(nil), series...)
	sort.SliceStable(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if a.Model != b.Model {
			return a.Model < b.Model
		}
		if pa, pb := protocol(a.Method), protocol(b.Method); pa != pb {
			return pa < pb
		}
		if a.Method != b.Method {
			return a.Method < b.Method
		}
		if a.Route != b.Route {
			return a.Route > b.Route // primary before fallback
		}
		return a.CodeClass < b.CodeClass
	})
	rows := [][]string{tableHeader}
	for _, s := range sorted {
		total := s.stats("1m", "total")
		up := s.stats("1m", "upstream")
		ovh := s.stats("1m", "overhead")
		model := s.Model
		if s.Version != "" {
			model += ":" + s.Version
		}
		if s.Route != "" && s.Route != "primary" {
			// Calls of this model another model answered (see the ROUTE
			// lines): the name the client asked for, and the route.
			model += " (" + s.Route + ")"
		}
		rows = append(rows, []string{
			model, protocol(s.Method), shortMethod(s.Method), s.CodeClass,
			fmt.Sprintf("%d", total.Count),
			fmt.Sprintf("%.1f", float64(total.Count)/span.Seconds()),
			ms(total.P50), ms(total.P99), ms(total.P999), ms(total.Max),
			ms(up.P99), us(ovh.P50), us(ovh.P99),
		})
	}
	writeColumns(w, rows, textColumns)
}

func ms(sec float64) string { return fmt.Sprintf("%.2f", sec*1e3) }
func us(sec float64) string { return fmt.Sprintf("%.0f", sec*1e6) }

// writeColumns pads rows into columns two spaces apart: the first
// leftCols columns left aligned, the rest right aligned. Widths count
// runes, so "µs" lines up.
func writeColumns(w io.Writer, rows [][]string, leftCols int) {
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i, c := range r {
			pad := strings.Repeat(" ", widths[i]-len([]rune(c)))
			if i > 0 {
				b.WriteString("  ")
			}
			if i < leftCols {
				b.WriteString(c)
				if i < len(r)-1 {
					b.WriteString(pad)
				}
			} else {
				b.WriteString(pad)
				b.WriteString(c)
			}
		}
		b.WriteByte('\n')
	}
	io.WriteString(w, b.String())
}

// guideText is the "where to look" block for the children's addresses.
func guideText(gateGRPC, gateAdmin, simGRPC, simAdmin string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "infergate  grpc=%s  admin=%s   (upstream: simserver grpc=%s)\n", gateGRPC, gateAdmin, simGRPC)
	fmt.Fprintf(&b, "  status:    http://%s/status/  (live page: models, routes, alerts, GPUs)\n", gateAdmin)
	fmt.Fprintf(&b, "  metrics:   http://%s/metrics\n", gateAdmin)
	fmt.Fprintf(&b, "  series:    http://%s/api/v1/series\n", gateAdmin)
	fmt.Fprintf(&b, "  gpu:       http://%s/api/v1/gpus\n", gateAdmin)
	fmt.Fprintf(&b, "  models:    http://%s/api/v1/models  (baselines, cause hints)\n", gateAdmin)
	fmt.Fprintf(&b, "  ready:     http://%s/readyz\n", gateAdmin)
	fmt.Fprintf(&b, "  clients:   point KServe/Triton or TF-Serving gRPC clients at %s\n", gateGRPC)
	fmt.Fprintf(&b, "simserver  GPU metrics: http://%s/metrics\n", simAdmin)
	fmt.Fprintf(&b, "  slow down: curl -XPOST http://%s/api/v1/faults -d '{\"model\":\"resnet50\",\"slowdown\":3}'\n", simAdmin)
	fmt.Fprintf(&b, "  throttle:  curl -XPOST http://%s/api/v1/faults -d '{\"model\":\"*\",\"throttle\":\"thermal\"}'\n", simAdmin)
	fmt.Fprintf(&b, "  heal:      curl -XDELETE http://%s/api/v1/faults\n", simAdmin)
	return b.String()
}

// screenWidth is the terminal width the demo's own lines fit in (the
// table's rows are as wide as their columns).
const screenWidth = 100

// wrap writes prefix and the items of list (joined by sep) on lines of at
// most screenWidth runes, breaking after a sep; continuation lines are
// indented to line up under the first item. It ends with a newline.
func wrap(prefix, list, sep string) string {
	indent := strings.Repeat(" ", len([]rune(prefix)))
	var b strings.Builder
	line := prefix
	items := strings.Split(list, sep)
	for i, it := range items {
		if i < len(items)-1 {
			it += strings.TrimRight(sep, " ")
		}
		if line != prefix && line != indent && len([]rune(line))+1+len([]rune(it)) > screenWidth {
			b.WriteString(strings.TrimRight(line, " ") + "\n")
			line = indent
		} else if line != prefix && line != indent {
			line += " "
		}
		line += it
	}
	b.WriteString(line + "\n")
	return b.String()
}

// legend explains the table's columns, the CODE classes and the cause
// hints on the "hints:" line, one line each; it is printed under the guide.
const legend = `how to read the table (one row per model, protocol, method and CODE; all over the last minute):
  CALLS/1m           calls that finished in the last minute
  REQ/S              calls per second: CALLS/1m over the seconds of that minute so far
  P50/P99/P999/MAX   total latency the client sees through the proxy, ms: median, 99%, 99.9%, max
  UP P99             99th percentile of the time spent in the upstream model server, ms
  OVH P50/P99        proxy overhead = total - upstream - batch queue: infergate's own time, µs
  CODE ok            the call succeeded
  CODE client_error  the request was wrong or given up (InvalidArgument, NotFound, Canceled, ...)
  CODE server_error  the server or the proxy failed (Unavailable, Internal, DeadlineExceeded, ...)
hints: infergate's guess at the cause, for each model whose latency is up against its baseline:
  gpu_saturated        the GPU is at least 90% busy and latency rises with it: the GPU is the limit
  gpu_throttled        the GPU's clock is cut by heat or a power cap: the GPU itself got slower
  gpu_memory_pressure  the GPU's memory is at least 95% full
  not_gpu              the GPU is under 50% busy: look at the server's CPU, its queue, the network
  unknown              latency is up, but GPU data is missing or points at no cause (busy, not full)
  none                 latency is normal (such models are not listed)
  recovering           the model's latency alert still fires, kept firing after its condition
                       cleared so a recovering model does not flap: "holds until" is when it
                       resolves if the latency stays down (the alert's summary says the same)
`
