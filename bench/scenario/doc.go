// Package scenario runs complete bench scenarios: it starts the processes a
// scenario needs on loopback (simserver, infergate, nginx, HAProxy), drives them with
// the load generator and summarises the runs.
//
// The overhead scenario (RunOverhead) sends the same load straight to
// simserver, through infergate, nginx and HAProxy, for a small and a large
// payload, and reports what each proxy adds to p50/p99 and takes from
// throughput, all measured in one run on one machine: closed loop at each
// caller count on each connection count, open loop on each connection
// count, with ghz (a standard client) measuring every run again right
// after the project's load generator when it is installed.
//
// The batching scenario (RunBatching) sweeps offered load against
// simserver's resnet50 through infergate with batching off, static
// configurations and adaptive, and checks throughput, goodput within the
// SLO and p99 against the batching issue's criteria.
//
// The uploads scenario (RunUploads) has many callers, each on its own
// connection, send big ModelInfer requests through infergate, nginx and
// HAProxy in interleaved rounds, and reports calls, throughput, latency
// and each proxy's peak RSS.
package scenario
