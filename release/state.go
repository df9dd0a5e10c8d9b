package release

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"
)

// StateVersion is the version of the Snapshot format; Restore refuses
// another.
const StateVersion = 1

// MaxStateBytes is the largest snapshot Restore reads: a release at its
// largest (every class of both versions, every bucket counted) takes
// about 400 KiB of JSON, a real one a few KiB.
const MaxStateBytes = 32 << 20

// stateFile is what survives a restart: each release's step, weight,
// decisions and the evidence of its tests and its step, so that a
// restarted proxy resumes the same step with the same evidence.
type stateFile struct {
	Version  int            `json:"version"`
	Saved    time.Time      `json:"saved"`
	Releases []savedRelease `json:"releases"`
}

type savedRelease struct {
	Spec      Spec       `json:"spec"`
	State     State      `json:"state"`
	Step      int        `json:"step"`
	Weight    float64    `json:"weight"`
	StepStart time.Time  `json:"step_start"`
	History   []Decision `json:"history"`
	Current   Decision   `json:"current"`
	Evidence  Evidence   `json:"evidence"`
	Assessed  time.Time  `json:"assessed"`
	Seq       uint64     `json:"seq"`
	// The tests' components (log likelihood ratios).
	Body     []float64 `json:"body_test"`
	Tail     []float64 `json:"tail_test"`
	Errors   []float64 `json:"error_test"`
	Pairs    uint64    `json:"pairs"`
	Disagree uint64    `json:"disagree"`
	// What the tests have seen of the step, and the shares of the next
	// tick.
	Prev       [MaxClasses]prevClass `json:"prev"`
	PrevFailed [2]uint64             `json:"prev_failed"`
	PrevPairs  uint64                `json:"prev_pairs"`
	PrevDis    uint64                `json:"prev_disagree"`
	Share      [MaxClasses]float64   `json:"share"`
	ErrShare   float64               `json:"error_share"`
	ErrPower   float64               `json:"error_power_done,omitempty"`
	Edges      [MaxClasses]*edges    `json:"edges"`
	// The step's counts.
	Classes      []savedClass `json:"classes"`
	Failed       [2]uint64    `json:"failed"`
	StepPairs    uint64       `json:"step_pairs"`
	StepDisagree uint64       `json:"step_disagree"`
}

type savedClass struct {
	Class int               `json:"class"`
	Calls [2]uint64         `json:"calls"`
	Hist  [2]map[int]uint64 `json:"hist"` // bucket: count, non-zero only
	Bins  [2][nBins]uint64  `json:"bins"`
}

// Snapshot returns the state of every release as JSON, to be written
// atomically (write a temporary file, rename) by the caller and given to
// Restore after a restart. The hot path is not stopped: calls observed
// during the snapshot may be in it or not.
func (s *Set) Snapshot(now time.Time) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sf := stateFile{Version: StateVersion, Saved: now}
	for _, m := range slices.Sorted(maps.Keys(s.rels)) {
		sf.Releases = append(sf.Releases, s.rels[m].save())
	}
	return json.Marshal(sf)
}

func (r *Release) save() savedRelease {
	j := &r.j
	sr := savedRelease{Spec: r.spec, State: r.state, Step: r.step, Weight: r.weight, StepStart: r.stepStart,
		History: r.history, Current: r.current, Evidence: r.evidence, Assessed: r.assessed, Seq: r.seq.Load(),
		Body: j.body.logM, Tail: j.tail.logM, Errors: j.errs.logM, Pairs: j.pairs, Disagree: j.disagree,
		Prev: j.prev, PrevFailed: j.prevFailed, PrevPairs: j.prevPairs, PrevDis: j.prevDis, Share: j.share, ErrShare: j.errShare, ErrPower: j.errDone}
	for c := range MaxClasses {
		sr.Edges[c] = r.edges[c].Load()
	}
	st := r.stats.Load()
	for c := range MaxClasses {
		cs := st.class[c].Load()
		if cs == nil {
			continue
		}
		sc := savedClass{Class: c}
		for v := range 2 {
			sc.Calls[v] = cs.calls[v].Load()
			sc.Hist[v] = map[int]uint64{}
			for i := range cs.hist[v] {
				if n := cs.hist[v][i].Load(); n > 0 {
					sc.Hist[v][i] = n
				}
			}
			for b := range nBins {
				sc.Bins[v][b] = cs.bins[v][b].Load()
			}
		}
		sr.Classes = append(sr.Classes, sc)
	}
	for v := range 2 {
		sr.Failed[v] = st.failed[v].Load()
	}
	sr.StepPairs, sr.StepDisagree = st.pairs.Load(), st.disagree.Load()
	return sr
}

// Restore loads a Snapshot into the Set's releases (call it after New,
// before serving). A saved release whose model has no release now is
// dropped; one whose split changed (another candidate, other steps)
// leaves the release fresh, and its Status says why. A snapshot of
// another version or one that does not parse is an error and changes
// nothing: the caller starts without it.
func (s *Set) Restore(b []byte) error {
	if len(b) > MaxStateBytes {
		return fmt.Errorf("release: state of %d bytes, over %d", len(b), MaxStateBytes)
	}
	var sf stateFile
	if err := json.Unmarshal(b, &sf); err != nil {
		return fmt.Errorf("release: parse state: %w", err)
	}
	if sf.Version != StateVersion {
		return fmt.Errorf("release: state version %d, want %d", sf.Version, StateVersion)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sr := range sf.Releases {
		r := s.rels[sr.Spec.Model]
		if r == nil {
			continue
		}
		if why := specChange(sr.Spec, r.spec); why != "" {
			r.reset = "the saved release differs from the configured one (" + why + "): started afresh"
			continue
		}
		if err := r.load(sr); err != nil {
			r.reset = "the saved release was unusable (" + err.Error() + "): started afresh"
		}
	}
	s.publish()
	return nil
}

// load restores one release, checking what could make it misbehave.
func (r *Release) load(sr savedRelease) error {
	j := newJudge(r.spec)
	for _, t := range []struct {
		dst *shareTest
		src []float64
	}{{&j.body, sr.Body}, {&j.tail, sr.Tail}, {&j.errs, sr.Errors}} {
		if len(t.src) != len(t.dst.logM) {
			return fmt.Errorf("a test has %d components, want %d", len(t.src), len(t.dst.logM))
		}
		copy(t.dst.logM, t.src)
	}
	if sr.State > Promoted || sr.Weight < 0 || sr.Weight > 100 || sr.Step < -1 || sr.Step >= max(len(r.spec.Steps), 0) && sr.Step != -1 {
		return fmt.Errorf("state %s at step %d weight %g", sr.State, sr.Step, sr.Weight)
	}
	for _, e := range sr.Edges {
		if e != nil && slices.ContainsFunc(e[:], func(i int32) bool { return i < 0 || i >= nBuckets }) {
			return fmt.Errorf("a bin edge out of range")
		}
	}
	st := new(stepStats)
	for _, sc := range sr.Classes {
		if sc.Class < 0 || sc.Class >= MaxClasses {
			return fmt.Errorf("size class %d", sc.Class)
		}
		cs := st.classOf(sc.Class)
		for v := range 2 {
			cs.calls[v].Store(sc.Calls[v])
			for i, n := range sc.Hist[v] {
				if i < 0 || i >= nBuckets {
					return fmt.Errorf("bucket %d", i)
				}
				cs.hist[v][i].Store(n)
			}
			for b := range nBins {
				cs.bins[v][b].Store(sc.Bins[v][b])
			}
		}
	}
	for v := range 2 {
		st.failed[v].Store(sr.Failed[v])
	}
	st.pairs.Store(sr.StepPairs)
	st.disagree.Store(sr.StepDisagree)
	j.pairs, j.disagree = sr.Pairs, sr.Disagree
	j.prev, j.prevFailed, j.prevPairs, j.prevDis = sr.Prev, sr.PrevFailed, sr.PrevPairs, sr.PrevDis
	j.share, j.errShare, j.errDone = sr.Share, sr.ErrShare, sr.ErrPower
	r.j = j
	r.stats.Store(st)
	for c := range MaxClasses {
		r.edges[c].Store(sr.Edges[c])
	}
	r.state, r.step, r.weight, r.stepStart = sr.State, sr.Step, sr.Weight, sr.StepStart
	r.history = sr.History
	r.current, r.evidence, r.assessed = sr.Current, sr.Evidence, sr.Assessed
	if len(r.history) > maxHistory {
		r.history = r.history[len(r.history)-maxHistory:]
	}
	r.seq.Store(sr.Seq)
	r.reset = ""
	return nil
}
