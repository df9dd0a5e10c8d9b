// Package merge turns several compatible inference requests into one batched
// upstream request and cuts the batched response back into one response per
// caller, for KServe v2 ModelInfer (KServe) and TF-Serving Predict (TF).
//
// The batcher calls a Codec in three steps: Parse each caller's request into
// an Item (validating it and computing its compatibility Key), Merge the
// items that share a Key, and Split the upstream response by each item's
// Rows. Inputs are concatenated along dimension 0, the batch dimension, in
// the representation the callers used: KServe raw_input_contents and typed
// contents (BYTES raw elements keep their 4-byte length prefixes), TF
// tensor_content and the typed *_val fields. Raw bytes are only sliced and
// concatenated, never converted through typed values.
//
// Errors sort requests into three kinds, as the batching issue asks:
//
//   - ErrInvalid: the request is malformed (inconsistent dimension 0, data
//     length not matching shape and datatype, raw and typed data both set,
//     no inputs, ...). The batcher does not batch it: the caller sends it
//     alone, so the model server answers with its own status, message and
//     metadata, and the rest of its batch is unaffected.
//   - ErrUnbatchable: the request is valid but merging could change its
//     meaning, so it goes straight through. That is: a tensor without a
//     batch dimension (scalar), zero rows (or more than 2^31-1), unknown
//     protobuf fields (a newer protocol may give them meaning), KServe
//     sequence parameters
//     (sequence_id, sequence_start, sequence_end: the model keeps state per
//     sequence) and shared-memory parameters on inputs or outputs (the data
//     is not in the message), a TF tensor whose *_val holds fewer values than
//     elements (TF broadcasts the last value), a TF DT_STRING tensor_content,
//     TF dtypes outside the batchable set (complex, quantized, resource,
//     variant), and a TF request with client_id, request_options or
//     predict_streamed_options set (one merged request could carry only one
//     of each, so such requests reach the server as sent).
//   - ErrSplit: the upstream response does not have dimension 0 equal to the
//     batch's total rows, or its data does not match its shapes.
//
// A TF response *_val field shorter than its tensor (TF's repeat-the-last
// value shorthand) is split without expanding it: each caller gets its own
// values in the same shorthand.
//
// Every other request parameter (KServe priority, timeout, custom backend
// parameters; per-input and per-output parameters) is part of the Key, so
// only requests asking for the same thing are merged and the merged request
// carries exactly those parameters.
//
// Codecs are stateless and safe for concurrent use; an Item must not be
// changed after Parse.
package merge
