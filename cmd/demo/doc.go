// Command demo runs infergate end to end on one machine, for `make demo`:
// it starts bin/simserver (a simulated Triton / TF-Serving) and
// bin/infergate in front of it, drives an open-loop Poisson load through
// the proxy, injects one slowdown fault so the tail visibly moves, and
// redraws a per-model p50/p99 table from infergate's /api/v1/series every
// two seconds. Under its guide it prints when the fault starts and heals
// and a legend of the table's columns, CODE classes and cause hints.
//
//	demo [-seconds N] [-rate-scale F] [-no-fault] [-v] [-bin DIR]
//
// -seconds 0 (the default) runs until Ctrl-C or SIGTERM. Either way the run
// ends by stopping the load, printing a final table and stopping both
// children; it exits 1 if a child dies on its own.
package main
