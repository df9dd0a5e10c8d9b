package anomaly

import (
	"fmt"
	"sort"
	"testing"
)

func TestProbe(t *testing.T) {
	for _, mode := range []int{0} {
		for _, mu := range []float64{4} {
			_, _ = mode, mu
			det, _ := New(DefaultFeatures(), WithSeed(3))
			s := newSim(11)
			var sc []float64
			run, longest, above := 0, 0, 0
			for i := 0; i < 200000; i++ {
				r := det.Observe(s.next(), true)
				if !r.Learning {
					sc = append(sc, r.Score)
					if r.Score >= Threshold {
						above++
						run++
						longest = max(longest, run)
					} else {
						run = 0
					}
				}
			}
			sort.Float64s(sc)
			n := len(sc)
			fmt.Printf("mode %d maxU %v noise q50 %.3f q99 %.3f q999 %.3f max %.4f above %.5f longest %d\n", mode, mu, sc[n/2], sc[n*99/100], sc[n*999/1000], sc[n-1], float64(above)/float64(n), longest)
			for _, sh := range shifts {
				det, _ := New(DefaultFeatures(), WithSeed(3))
				s := newSim(12)
				for i := 0; i < 2000; i++ {
					det.Observe(s.next(), true)
				}
				mn, ok := 1.0, 0
				for i := 0; i < 10; i++ {
					x := s.next()
					for k, v := range sh.add {
						x[featureIndex(k)] += v
					}
					r := det.Observe(x, true)
					mn = min(mn, r.Score)
					if len(r.Top) > 0 && DefaultFeatures()[r.Top[0]].Name == sh.first[0] && r.Pattern == sh.pattern {
						ok++
					}
				}
				fmt.Printf("   %-24s min %.3f rightfirst %d/10\n", sh.name, mn, ok)
			}
		}
	}
}
