// Package statuspage serves infergate's status page: one HTML page, its
// stylesheet and its script, embedded in the binary, that poll the admin
// listener's JSON API (/api/v1/models, series, routes, alerts, gpus) every
// two seconds and draw models with p50/p99 and traffic, routes and
// breakers, alerts with their evidence and GPU readings.
//
// The files are embedded (no CDN, no build step) because the people who
// open the page are often on a machine without internet access, next to
// the proxy. The page only reads: it sends GETs to the same origin, so it
// is as open as the other read endpoints (the admin listener binds to
// loopback unless told otherwise), and the handler answers GET and HEAD
// only.
//
// The package imports nothing of infergate: cmd/infergate mounts it with
// Register, and the page reads the API by its documented JSON, as any
// other client would.
package statuspage
