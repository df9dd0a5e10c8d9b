// Package flow decides who waits when a model server is full: an adaptive
// concurrency limit per replica and model (Limiter, TCP Vegas's rule on
// infergate's own latency measurements), and, in front of a pool, a Gate
// per model that lets calls go at once while the replicas have room and,
// when they are full, orders the waiting ones: criticality bands in
// strict order with a minimum share for the lower ones, tenants within a
// band by deficit round robin (Shreedhar and Varghese) with weights, a
// call whose deadline cannot be met refused at once, and the least
// critical shed first when too many wait.
//
// It imports nothing of the module: the proxy feeds it latencies and
// asks it for turns.
package flow
