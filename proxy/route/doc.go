// Package route holds what decides where a model's calls go when its
// upstream is in trouble: circuit breakers (a transport breaker per
// upstream, a breaker per model there, each opened only by its own
// evidence) and the retry budget that bounds hedges and retries. It sees
// verdicts, never a call; package proxy's router asks it at the pick.
// (Routes, fallbacks and hedging follow it here.)
package route
