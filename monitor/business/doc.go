// Package business reads business metrics (conversion rate, orders per
// minute, ...) from Prometheus beside the proxy's own latency and finds,
// per model, how strongly the model's p99 and the metric move together
// and at which lag: "conversion falls 30 s after p99 rises, r = -0.9".
//
// Every metric has its own goroutine: it samples each model's p99 over
// the last interval from the monitor, then asks Prometheus for the
// metric's current value with a timeout. A Prometheus that is down or
// slow only costs that goroutine's time; nothing on the call path waits
// for it, and the failure is shown (Status) rather than retried faster.
package business
