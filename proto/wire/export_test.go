package wire

// RewriteModelInferName is RewriteModelInferTarget that keeps the versions
// the request has: only the name fields are replaced.
func RewriteModelInferName(b []byte, name string) ([]byte, error) {
	return rewriteKServe(b, name, "", false)
}

// RewritePredictName is RewritePredictTarget that keeps the version fields
// of the merged model_spec: only the name is replaced.
func RewritePredictName(b []byte, name string) ([]byte, error) {
	return rewriteSpec(b, &specEdit{name: name})
}
