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
// (false for KeepFiringFor; for a model's traffic alert, no call at all
// for a minute; or no verdict for five minutes, held meanwhile without a
// re-page), with a
// resolved notification for every firing one that was sent. Escalate
// raises an alert that stays firing. State, silences and what each group
// last sent go to Config.StateFile, so a restart neither forgets nor
// re-pages.
//
// # Stages
//
// Every tick, Engine.Step reads the data once and runs one evaluation
// through its stages, in order, under the engine's lock, at one instant
// (the step's now travels in the context, as Alertmanager's WithNow):
//
//   - evaluate (stage_evaluate.go): every rule, per model or per GPU,
//     into verdicts.
//   - lifecycle (stage_lifecycle.go): pending, firing, resolved,
//     escalated; the rule's action starts and stops (Actuator).
//   - mute (stage_mute.go): one muteStage per muter, the inhibitor (a
//     firing source alert mutes matching targets with equal labels; by
//     default a GPU alert mutes the latency alerts of the models on that
//     GPU), then the silences (and acknowledgements).
//   - group (stage_group.go): route (a tree of label matchers and weekly
//     schedules) and group by labels, as Alertmanager's dispatcher.
//   - flush (stage_flush.go): wait group_wait, send one message per group
//     when it changes (at most every group_interval) or every
//     repeat_interval while it fires.
//   - persist (stage_persist.go): the state file.
//
// Receivers (package notify) send without blocking the evaluation, retry
// with backoff and queue through outages.
//
// # Condition kinds
//
// Each kind is one type in one file, cond_<kind>.go, holding its parsing
// and checks, its evaluation, its evidence and, if Prometheus can run it,
// its export; cond_compound.go combines several. To add a condition kind,
// write one file cond_<kind>.go with a type implementing condition (and
// deviceCondition if it can judge a GPU alone, promCondition if it can be
// exported) and a parse function, and add its line to conditionKinds in
// conditions.go. A kind with new YAML fields adds them to Condition too.
//
// # Extension points
//
// LatencySource (a *monitor.Registry), Options.Models (the correlator),
// Options.GPU, Actuator (the proxy side of actions such as fallback) and
// Options.Send (a receiver stand-in for tests). API serves the admin
// endpoints; ExportPrometheus writes the rules a fleet's Prometheus can
// run.
package alert
