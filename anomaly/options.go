package anomaly

// Option configures a Detector (and every detector of a Registry).
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	seed         uint64
	window       int
	trees        int
	depth        int
	learnBelow   float64
	explainAbove float64
}

func defaultOptions() options {
	return options{
		seed:         1,
		window:       256,
		trees:        32,
		depth:        7,
		learnBelow:   0.8,
		explainAbove: 0.75,
	}
}

// WithSeed sets the seed of the trees' random structure (default 1). Two
// detectors with the same seed, features and options fed the same seconds
// give the same results. A Registry mixes the model's name into it.
func WithSeed(seed uint64) Option {
	return optionFunc(func(o *options) { o.seed = seed })
}

// WithWindow sets how many learnt seconds the detector remembers (default
// 256, clamped to [64, 4096]). The trees are recounted from them every
// window/4 learnt seconds; the detector is learning until it has learnt
// 3/4 of a window (192 s by default). Memory grows by 4 bytes per feature
// per second of window.
func WithWindow(seconds int) Option {
	return optionFunc(func(o *options) { o.window = min(max(seconds, 64), maxWindow) })
}

// WithTrees sets the number of trees (default 32, clamped to [4, 128]).
// Cost and memory grow in proportion.
func WithTrees(n int) Option {
	return optionFunc(func(o *options) { o.trees = min(max(n, 4), 128) })
}

// WithDepth sets the number of splits from a tree's root to a leaf
// (default 7, clamped to [3, 10]). Memory doubles with each step.
func WithDepth(n int) Option {
	return optionFunc(func(o *options) { o.depth = min(max(n, 3), 10) })
}

// WithLearnBelow sets the score at and above which a second is not learnt
// even when the caller says it may be (default 0.8), so that the first
// seconds of an incident the caller has not yet recognised do not become
// normal. A value ≥ 1 learns every second the caller allows.
func WithLearnBelow(score float64) Option {
	return optionFunc(func(o *options) { o.learnBelow = score })
}

// WithExplainAbove sets the score from which Observe writes the
// explanation in words (default 0.75). Below it, Result.Explanation is
// empty and Observe does not allocate; Explain gives the words on demand.
func WithExplainAbove(score float64) Option {
	return optionFunc(func(o *options) { o.explainAbove = score })
}
