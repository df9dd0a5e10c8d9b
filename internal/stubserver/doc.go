// Package stubserver is a tiny in-process KServe v2 / TF-Serving server for
// the bench tests: ModelInfer and Predict echo their inputs, and hooks let a
// test fail or stall chosen requests through channels instead of sleeps.
package stubserver
