package release

import (
	"fmt"
	"math"
	"testing"
)

func mustSet(t testing.TB, specs ...Spec) *Set {
	t.Helper()
	s, err := New(specs)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Weights hold to ±1 point over 10,000 calls at any weight, and over
// every prefix of them after the first 1,000.
func TestWeightsHoldOverTenThousandCalls(t *testing.T) {
	for _, w := range []float64{1, 10, 50, 99.5} {
		t.Run(fmt.Sprint(w), func(t *testing.T) {
			s := mustSet(t, canary(w))
			cand := 0
			for n := 1; n <= 10000; n++ {
				c := s.Choose("resnet50", nil, false)
				if c.Version == Candidate {
					cand++
					if *c.Target != (Target{Version: "2"}) {
						t.Fatalf("candidate call sent to %v", c.Target)
					}
				} else if *c.Target != (Target{Version: "1"}) {
					t.Fatalf("stable call sent to %v", c.Target)
				}
				if n >= 1000 && math.Abs(100*float64(cand)/float64(n)-w) > 1 {
					t.Fatalf("after %d calls %d went to the candidate (%.2f%%), want %g%% ±1", n, cand, 100*float64(cand)/float64(n), w)
				}
			}
		})
	}
}

// 100 users × 50 calls each: every user always lands on one version, and
// raising the weight from 10% to 25% moves users only from the stable
// version to the candidate.
func TestStickyUsersStayAndOnlyMoveToTheCandidate(t *testing.T) {
	spec := canary(10)
	spec.Sticky = "x-user"
	s := mustSet(t, spec)
	side := func() map[string]Version {
		got := map[string]Version{}
		for u := range 100 {
			key := []byte(fmt.Sprintf("user-%d", u))
			for call := range 50 {
				v := s.Choose("resnet50", key, false).Version
				if call > 0 && v != got[string(key)] {
					t.Fatalf("user %s went to %s after %s", key, v, got[string(key)])
				}
				got[string(key)] = v
			}
		}
		return got
	}
	at10 := side()
	spec.Weight = 25
	if err := s.Apply([]Spec{spec}); err != nil {
		t.Fatal(err)
	}
	at25 := side()
	n10, n25, moved := 0, 0, 0
	for u, v := range at10 {
		if v == Candidate {
			n10++
			if at25[u] != Candidate {
				t.Errorf("%s moved from the candidate back to stable when the weight rose", u)
			}
		}
		if at25[u] == Candidate {
			n25++
			if v == Stable {
				moved++
			}
		}
	}
	t.Logf("candidate users: %d at 10%%, %d at 25%% (%d moved)", n10, n25, moved)
	if n10 < 3 || n10 > 20 || n25 < 15 || n25 > 38 || moved == 0 {
		t.Errorf("candidate users %d at 10%% and %d at 25%%: not near the weights", n10, n25)
	}
}

// A call without the sticky key is split on its own; a client that
// names its version keeps it and is not judged.
func TestChooseWithoutKeyAndNamedVersion(t *testing.T) {
	spec := canary(50)
	spec.Sticky = StickySequence
	s := mustSet(t, spec)
	if rt := s.Route("resnet50"); rt == nil || rt.Sticky() != StickySequence {
		t.Fatalf("route %+v, want sticky on %s", rt, StickySequence)
	}
	seen := map[Version]int{}
	for range 100 {
		seen[s.Choose("resnet50", nil, false).Version]++
	}
	if seen[Stable] != 50 || seen[Candidate] != 50 {
		t.Errorf("calls without a key split %v, want 50/50", seen)
	}
	if c := s.Choose("resnet50", []byte("7"), true); !c.AsAsked || c.Release != nil || c.Target != nil || c.Shadow != nil {
		t.Errorf("a named version gave %+v, want it as asked, unjudged", c)
	}
	if c := s.Choose("bert", nil, false); c != (Choice{}) {
		t.Errorf("a model without a release gave %+v", c)
	}
}

// Shadow copies go with a deterministic fraction of the stable calls
// and never with a candidate call.
func TestShadowFraction(t *testing.T) {
	spec := canary(10)
	spec.Shadow = &Shadow{Target: Target{Upstream: "gpu-b"}, Fraction: 0.2}
	s := mustSet(t, spec)
	stable, copies := 0, 0
	for range 10000 {
		c := s.Choose("resnet50", nil, false)
		if c.Shadow != nil {
			if c.Version != Stable || c.Shadow.Upstream != "gpu-b" {
				t.Fatalf("shadow %+v with a %s call", c.Shadow, c.Version)
			}
			copies++
		}
		if c.Version == Stable {
			stable++
		}
	}
	if got := float64(copies) / float64(stable); math.Abs(got-0.2) > 0.005 {
		t.Errorf("%d copies of %d stable calls (%.3f), want 0.2", copies, stable, got)
	}
}
