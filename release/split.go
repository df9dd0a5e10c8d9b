package release

// Version says which side of a release a call went to.
type Version uint8

const (
	// Stable is the version calls went to before the release.
	Stable Version = iota
	// Candidate is the version being released.
	Candidate
)

// String returns "stable" or "candidate".
func (v Version) String() string {
	if v == Candidate {
		return "candidate"
	}
	return "stable"
}

// Choice is the release's answer at the pick: where one call goes.
type Choice struct {
	// Release is the model's release, to Observe the call's outcome on;
	// nil when the model has none or the client named its version.
	Release *Release
	// Version is the side the call goes to.
	Version Version
	// Target is where the call goes (its version, model or upstream
	// rewritten); nil means send it as it came.
	Target *Target
	// Shadow, when not nil, is where a copy of the call goes. The client
	// never waits for it; its outcome is Observed as the Candidate's and
	// its answer compared (ObserveShadow).
	Shadow *Target
	// AsAsked is true when the client named a version itself: the split
	// never overrides it, and the call is not judged (who pins a version
	// is not a random share of the traffic).
	AsAsked bool
}

// The sequences behind non-sticky splits: n times the fractional part of
// the golden ratio (and of √2 for shadows), modulo 2^64. Calls n = 1, 2,
// 3, ... spread over [0, 1) more evenly than coin flips: after any
// number of calls the share below w differs from w by O(log n / n), so a
// 1% weight is 1% over a few hundred calls, not ±0.2 points by chance.
const (
	goldenFrac = 0x9E3779B97F4A7C15
	sqrt2Frac  = 0x6A09E667F3BCC909
)

// route is one model's split in the table the pick reads. It is never
// changed once published: a new weight publishes a new table.
type route struct {
	rel          *Release
	stable, cand *Target
	shadow       *Target // nil: no shadow
	threshold    uint64  // candidate iff u < threshold ...
	all          bool    // ... or all calls (weight 100)
	shadowAt     uint64  // shadow iff v < shadowAt ...
	shadowAll    bool    // ... or every stable call (fraction 1)
	sticky       string
}

// Route is a model's split as the pick sees it (see Set.Route).
type Route route

// Sticky returns what keeps a caller on one version: a header name,
// StickySequence, or "" (none). The proxy passes that value to Choose.
func (r *Route) Sticky() string { return r.sticky }

// Choose splits one call. key is the sticky header's value or the
// sequence id (nil or empty: split the call on its own). named says the
// client named a version itself: it keeps it (AsAsked). Choose never
// blocks and allocates nothing.
func (r *Route) Choose(key []byte, named bool) Choice {
	if named {
		return Choice{AsAsked: true}
	}
	var u uint64
	if r.sticky != "" && len(key) > 0 {
		u = stickyHash(key)
	} else {
		u = r.rel.seq.Add(1) * goldenFrac
	}
	if r.all || u < r.threshold {
		return Choice{Release: r.rel, Version: Candidate, Target: r.cand}
	}
	c := Choice{Release: r.rel, Version: Stable, Target: r.stable}
	if r.shadow != nil && (r.shadowAll || r.rel.shadowSeq.Add(1)*sqrt2Frac < r.shadowAt) {
		c.Shadow = r.shadow
	}
	return c
}

// cut returns the threshold of a share (0 to 1) of [0, 2^64), and
// whether the share is all of it.
func cut(share float64) (uint64, bool) {
	f := share * (1 << 64)
	if f >= 1<<64 {
		return 0, true
	}
	if !(f > 0) {
		return 0, false
	}
	return uint64(f), false
}

// stickyHash maps a key to [0, 2^64): FNV-1a, then the finaliser of
// MurmurHash3 so that keys differing in their last byte spread over the
// high bits the threshold compares. A key's place never changes, so a
// caller is on the candidate iff its place is below the weight: raising
// the weight moves only stable callers, lowering it only candidate ones.
func stickyHash(key []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range key {
		h ^= uint64(c)
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// table is what the pick reads: every model's route, replaced whole.
type table struct {
	routes map[string]*Route
}
