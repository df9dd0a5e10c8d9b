package release

import (
	"math/rand/v2"
	"testing"
)

// The rate bounds hold at every moment at once: over 300 sequences of
// 3,000 trials read every 100 trials, the true rate leaves them in at
// most alpha (1%, with room for chance: 2%) of the sequences.
func TestPropBoundsHoldAtEveryLook(t *testing.T) {
	const rate, alpha = 0.03, 0.01
	missed := 0
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 1))
		var s uint64
		for n := uint64(1); n <= 3000; n++ {
			if rng.Float64() < rate {
				s++
			}
			if n%100 == 0 {
				if lo, hi := propBounds(s, n, alpha); lo > rate || hi < rate {
					missed++
					break
				}
			}
		}
	}
	if missed > 6 {
		t.Errorf("the true rate left the bounds in %d of 300 sequences", missed)
	}
	// And they narrow: 90 of 3,000 is told from 1% and from 6%.
	if lo, hi := propBounds(90, 3000, alpha); lo < 0.01 || hi > 0.06 {
		t.Errorf("bounds of 90/3000: %g-%g", lo, hi)
	}
}

// The quantile ranks hold the true p99's rank at every look.
func TestRankBoundsHoldAtEveryLook(t *testing.T) {
	const q, alpha = 0.99, 0.01
	missed := 0
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 2))
		var below int64 // draws at or below the true quantile
		for n := int64(1); n <= 5000; n++ {
			if rng.Float64() <= q {
				below++
			}
			if n%250 == 0 {
				if kmin, kmax := rankBounds(uint64(n), q, alpha); below < kmin || below > kmax {
					missed++
					break
				}
			}
		}
	}
	if missed > 6 {
		t.Errorf("the true quantile left its ranks in %d of 300 sequences", missed)
	}
}
