package scenario

import (
	"math/rand/v2"
	"testing"
)

// syntheticRelease makes a synthetic run: 100 calls/s for secs seconds, a share
// w of them on the candidate from canaryAt on; the candidate's latency is
// scaled by slow and it fails with probability fail.
func syntheticRelease(seed uint64, secs, canaryAt, w, slow, fail float64) []ReleaseCall {
	rng := rand.New(rand.NewPCG(seed, 1))
	var calls []ReleaseCall
	for i := 0; float64(i) < secs*100; i++ {
		at := float64(i) / 100
		c := ReleaseCall{At: at, OK: true, Latency: 10 + 20*rng.ExpFloat64()*0.2}
		if at >= canaryAt && rng.Float64() < w {
			c.Candidate = true
			c.Latency *= slow
			c.OK = rng.Float64() >= fail
		}
		calls = append(calls, c)
	}
	return calls
}

func TestFlaggerRollsBackAfterThresholdFailedChecks(t *testing.T) {
	calls := syntheticRelease(1, 600, 60, 0.1, 1.3, 0)
	maxP99, minOK, err := FlaggerThresholds(calls, 60, 1.2)
	if err != nil {
		t.Fatal(err)
	}
	if minOK != 99 {
		t.Errorf("success bound %.2f, want 99 (a stable version that never fails)", minOK)
	}
	r := FlaggerRule{Interval: 60, Threshold: 5, MinSuccess: minOK, MaxP99: maxP99}
	v := r.Flagger(calls, 60, 600)
	// Every interval's candidate p99 is 1.3x the stable's, over the 1.2x
	// bound: the fifth check, at 5 minutes, rolls back.
	if v.Decision != "rollback" || v.At != 300 || v.Failed != 5 {
		t.Errorf("1.3x candidate: %+v, want rollback at 300 s after 5 failed checks", v)
	}
}

func TestFlaggerPromotesAHealthyCanaryAndMissesASmallRegression(t *testing.T) {
	same := syntheticRelease(2, 600, 60, 0.1, 1, 0)
	maxP99, minOK, err := FlaggerThresholds(same, 60, 1.2)
	if err != nil {
		t.Fatal(err)
	}
	r := FlaggerRule{Interval: 60, Threshold: 5, MinSuccess: minOK, MaxP99: maxP99, Checks: 4}
	if v := r.Flagger(same, 60, 600); v.Decision != "promote" || v.At != 240 {
		t.Errorf("identical candidate: %+v, want promote after 4 passing checks (240 s)", v)
	}
	// +2 points of errors is under a 99% bound that a user with a
	// never-failing stable version sets: caught; with a stable version at
	// 98%, its bound is 97% and the same regression passes every check.
	failing := syntheticRelease(3, 600, 60, 0.1, 1, 0.02)
	if v := r.Flagger(failing, 60, 600); v.Decision != "rollback" || v.At < 300 {
		t.Errorf("+2 points against a 99%% bound: %+v, want rollback, at 300 s or later", v)
	}
	r.MinSuccess = 97
	if v := r.Flagger(failing, 60, 600); v.Decision != "promote" {
		t.Errorf("+2 points against a 97%% bound: %+v, want promote (Flagger's fixed bound misses it)", v)
	}
}

func TestFlaggerFailsACheckWithoutCandidateCalls(t *testing.T) {
	calls := syntheticRelease(4, 400, 60, 0, 1, 0) // the canary never gets a call
	r := FlaggerRule{Interval: 60, Threshold: 5, MinSuccess: 99, MaxP99: 1e9, Checks: 1}
	if v := r.Flagger(calls, 60, 400); v.Decision != "rollback" || v.At != 300 {
		t.Errorf("no candidate calls: %+v, want rollback at 300 s (no values found fails each check)", v)
	}
}

func TestFlaggerThresholdsWantStableCalls(t *testing.T) {
	if _, _, err := FlaggerThresholds(syntheticRelease(5, 0.5, 0, 0, 1, 0), 1, 1.2); err == nil {
		t.Error("50 stable calls gave thresholds; want an error asking for 100")
	}
}
