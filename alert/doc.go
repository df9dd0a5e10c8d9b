// Package alert decides, every second, whether a model (or a GPU) is in
// trouble, and tells someone: rules, the alert lifecycle and the
// notification pipeline between infergate's measurements and its actions.
//
// # Rules
//
// A Rule (compiled from a RuleConfig by Config.Validate) selects series
// by glob and evaluates one condition, or a compound of several (all / any),
// per model; rules whose conditions all read a GPU are evaluated per GPU.
// Kinds: threshold (a quantile, call rate or error ratio vs a value or the
// model's SLO), baseline (a quantile vs the shared seasonal baseline of
// monitor/baseline), trend (least-squares slope of a quantile), errors
// (ratio or rate of chosen gRPC codes), gpu (a GPU reading) and hint (the
// correlator's cause hint).
//
// Conditions are three-valued. A quantile "above T" needs its lower
// confidence bound (monitor.Bounds) above T; an error ratio its Wilson
// lower bound; a trend its slope less two standard errors. Too few calls,
// no baseline yet or too short a trend decide nothing: the alert keeps its
// state, and its evidence says why.
//
// # Lifecycle
//
// inactive → pending (condition true) → firing (true for For) → resolved
// (false for KeepFiringFor, or no verdict for five minutes), with a
// resolved notification for every firing one that was sent. Escalate
// raises an alert that stays firing. State, silences and what each group
// last sent go to Config.StateFile, so a restart neither forgets nor
// re-pages.
//
// # Notifications
//
// The dispatcher follows Alertmanager: inhibit (a firing source alert
// mutes matching targets with equal labels; by default a GPU alert mutes
// the latency alerts of the models on that GPU), silence (and
// acknowledgements), route (a tree of label matchers and weekly
// schedules), group by labels, wait group_wait, send one message per group
// when it changes (at most every group_interval) or every repeat_interval
// while it fires. Receivers (package notify) send without blocking the
// evaluation, retry with backoff and queue through outages.
//
// # Extension points
//
// LatencySource (a *monitor.Registry), Options.Models (the correlator),
// Options.GPU, Actuator (the proxy side of actions such as fallback) and
// Options.Send (a receiver stand-in for tests). API serves the admin
// endpoints; ExportPrometheus writes the rules a fleet's Prometheus can
// run.
package alert
