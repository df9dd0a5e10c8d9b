// Package batcher merges concurrent unary inference calls for the same model
// into one upstream call and splits the answer back, so a model server with a
// batch dimension does more work per execution.
//
// A Batcher keeps one queue per (upstream, method, model, version). Inside a
// queue, requests are grouped by their compatibility key (package
// batcher/merge decides it: same inputs, datatypes, non-batch dims, outputs,
// parameters); only requests with the same key are merged. A dispatcher
// goroutine per queue forms batches and hands each to its own goroutine for
// the upstream call, so no lock is held across I/O. Clients choose the
// versions, so queues are capped (512; past it a request goes unbatched)
// and a queue idle for a minute is freed with its dispatcher, its counters
// kept for the metrics.
//
// # Policies
//
// Both modes send at most Policy.Slots batches of a queue at once (the model
// server's execution slots, Triton's instance count): a batch is formed only
// when a slot is free, and requests accumulate while all slots are busy.
//
//   - Static follows Triton's dynamic batcher: dispatch when MaxSize requests
//     are queued or a preferred size can be formed, else wait up to MaxDelay
//     from the oldest request's arrival, then send what is there.
//   - Adaptive is work-conserving: when a slot is free and requests are
//     queued it dispatches at once, up to a target size. At low load this
//     means no wait at all; under load batches grow by themselves because
//     requests pile up while the slots are busy. The target size is the
//     largest batch whose predicted latency keeps a request within the SLO
//     (one batch of wait per slot plus its own batch), but never below the
//     size the measured arrival rate needs to keep the queue stable. The
//     upstream latency L(n) = a + b·n is learnt online by least squares over
//     recent batches (exponential forgetting, outliers clipped), and the
//     arrival rate by an exponentially decaying counter. When the backend
//     slows down, b rises and the target shrinks. Requests whose wait has
//     already used up the SLO (age + L(n) > SLO) go after the fresh ones,
//     oldest first: after one slow execution they are late whatever is
//     done, and serving them first would make every request behind them
//     late too. They are still sent, in the same batch when it has room,
//     and counted (infergate_batch_late_total); one whose deadline would
//     pass before another batch could answer it goes first instead.
//     With Policy.Shed the SLO bounds every answer instead: a request
//     whose predicted answer (the batches ahead of it at the fitted
//     latency, then its own) is past the SLO is refused at arrival, a
//     late one is refused when its batch forms rather than sent, and a
//     caller still waiting at its SLO (a slow execution) is answered
//     then; each gets ErrShed, which wraps ErrQueueFull
//     (RESOURCE_EXHAUSTED), counted with reason "slo".
//
// A request that finds its queue empty and a slot free, when the policy
// would send it alone at once (adaptive, or static without max delay), is
// sent by its caller's goroutine with its own context, metadata and bytes:
// light traffic goes upstream exactly as without batching, with no
// hand-off to the dispatcher. Any batch of one goes as the caller sent it,
// without merge and split.
//
// # Deadlines, cancellation, errors
//
// A full queue (QueueSize requests across its keys) rejects at once with
// RESOURCE_EXHAUSTED. A static queue never holds a request past its deadline
// minus the predicted upstream time; a request whose deadline has passed,
// or comes before its batch could be answered (the fitted latency), is
// answered DEADLINE_EXCEEDED without being sent: under overload the model's
// time goes to answers someone will read. A caller that gives up
// leaves the queue; if its batch was already sent, its share is dropped,
// and when every caller of a batch has gone the upstream call is cancelled.
// The merged call's deadline is the latest of its callers' deadlines (none
// when any caller has none).
//
// A request the codec finds malformed is not queued: Do returns
// ErrNotBatched (counted in infergate_batch_rejected_total with reason
// "invalid"), so the caller sends it to the upstream alone and unchanged,
// and the model server answers it with its own status, message and
// metadata. An upstream error for a batch goes to each of its callers, or,
// with Policy.RetryUnbatched, each request is retried alone. An upstream
// INVALID_ARGUMENT for a batch of several requests is always retried alone,
// so that one bad request cannot fail the others. When the upstream's
// response to a batch cannot be split by rows, each request is sent again
// alone, so every caller gets the server's own answer. None of these
// second sends happens for a model in Config.NonIdempotent (a route's
// idempotent: false): its callers get the batch's error instead.
//
// # Metadata
//
// The merged call carries the metadata keys whose values are identical in
// every request of the batch; keys that differ (request ids, trace
// parents) are dropped. Requests with different "authorization" values are
// never merged, so credentials are never mixed. The response headers and
// trailers of the merged call go to every caller.
//
// # Observability
//
// Register exports infergate_batch_size, infergate_batches_total,
// infergate_batch_late_total, infergate_batch_rejected_total, infergate_batch_target_size,
// infergate_batch_target_delay_seconds and infergate_batch_queue_length;
// Stats returns the controller's current view for the admin API. The queue
// wait of each call is returned to the caller (the proxy records it as
// monitor.Sample.Queue).
//
// Time-driven behaviour uses the time package directly and is tested under
// testing/synctest.
package batcher
