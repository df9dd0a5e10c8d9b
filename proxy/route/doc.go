// Package route decides where a model's calls go: the router and its
// table (each model's route, fallback, cascade, the modes an operator or
// an alert forces), the pick of one call's route and targets, the
// routing file's settings and their checks (Plan), circuit breakers (a
// transport breaker per upstream, a breaker per model there, each opened
// only by its own evidence), the retry budget that bounds hedges and
// retries, the hedge delay, and what /api/v1/routes and the route
// metrics show. It sees verdicts, never a call: package proxy asks it at
// the pick and makes the attempts (hedges, retries, cascades) itself.
package route
