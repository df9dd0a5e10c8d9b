// Bench is infergate's load generator and scenario runner.
//
// Usage:
//
//	bench load -target 127.0.0.1:8001 -proto kserve -model simple -c 8 -d 10s
//	bench load -target 127.0.0.1:8500 -proto tf -model half_plus_two -rate 2000 -arrival poisson
//	bench overhead [-quick] [-repeat N] [-open-base direct|slowest] [-out DIR]
//	bench batching [-quick] [-static 64:2ms,32:5ms] [-out DIR]
//
// load runs one closed-loop (-c) or open-loop (-rate) measurement against a
// loopback model server or proxy and prints a Markdown table (and writes
// JSON with -out, Markdown with -md). overhead starts simserver, infergate
// and nginx itself and compares the three paths for a small and a 1 MiB
// payload. batching compares batching off, static and adaptive against
// offered load and draws a plot. Run "bench <command> -h" for the flags.
package main
