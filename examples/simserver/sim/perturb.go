package sim

import (
	"bytes"
	"encoding/binary"
	"hash/fnv"
	"math"
)

// weyl is 2^64/φ, the step of the low-discrepancy sequence that picks the
// flipped calls: the points c + n·weyl (mod 2^64) fill [0, 2^64) so evenly
// that the count below p·2^64 among any n calls is within a few of p·n,
// without the period of a plain counter.
const weyl = 0x9e3779b97f4a7c15

// faultSeed keys a fault's flip and perturb draws: the server's seed, the
// model and the version, so a run with the same seed repeats them.
func faultSeed(seed uint64, model, version string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(model))
	h.Write([]byte{0})
	h.Write([]byte(version))
	return splitmix64(seed ^ h.Sum64())
}

// flips reports whether the fault's call number n (from 0) is one whose
// answer flips: the n-th point of the sequence falls below flip_rate.
func (f *activeFault) flips(n uint64) bool {
	switch {
	case f.FlipRate <= 0:
		return false
	case f.FlipRate >= 1:
		return true
	}
	return f.seed+n*weyl < uint64(f.FlipRate*(1<<64))
}

// alter applies f's flip_rate and perturb to outs, the outputs of one
// answered call to m (in Outputs order), and returns them. A nil fault, or
// one without either, returns outs as they are; otherwise every output is
// rewritten into a new buffer (an identity model's output shares the
// request's bytes), with the same shape, datatype and size.
func (f *activeFault) alter(m *model, outs []tensor) []tensor {
	if f == nil || (f.FlipRate == 0 && f.Perturb == 0) {
		return outs
	}
	n := f.calls.Add(1) - 1
	flip := f.flips(n)
	for j := range outs {
		intType := m.cfg.Outputs[j].Datatype == "INT32"
		raw := bytes.Clone(outs[j].raw)
		if flip {
			flipRows(raw, outs[j].shape, intType)
		}
		if f.Perturb > 0 {
			perturb(raw, intType, f.Perturb, splitmix64(f.seed^splitmix64(n<<8|uint64(j))))
		}
		outs[j].raw = raw
	}
	return outs
}

// element reads the i-th 4-byte element of raw as a float64.
func element(raw []byte, i int, intType bool) float64 {
	b := binary.LittleEndian.Uint32(raw[4*i:])
	if intType {
		return float64(int32(b))
	}
	return float64(math.Float32frombits(b))
}

// flipRows swaps, in each row (the last dimension) of a tensor whose rows
// hold two or more elements, the top element (first of the largest) with
// the runner-up (first of the largest strictly below it): the row's argmax
// moves and its values stay a permutation. A row whose elements are all
// equal (or NaN) is left as it is: it has no other class to move to.
func flipRows(raw []byte, shape []int64, intType bool) {
	if len(shape) == 0 || shape[len(shape)-1] < 2 {
		return
	}
	c := int(shape[len(shape)-1])
	for r := 0; (r+1)*c*4 <= len(raw); r++ {
		row := raw[r*c*4 : (r+1)*c*4]
		top, second := -1, -1
		var topV, secondV float64
		for i := range c {
			if v := element(row, i, intType); !math.IsNaN(v) && (top < 0 || v > topV) {
				top, topV = i, v
			}
		}
		for i := range c {
			if v := element(row, i, intType); v < topV && (second < 0 || v > secondV) {
				second, secondV = i, v
			}
		}
		if top < 0 || second < 0 {
			continue
		}
		var tmp [4]byte
		copy(tmp[:], row[4*top:])
		copy(row[4*top:4*top+4], row[4*second:4*second+4])
		copy(row[4*second:4*second+4], tmp[:])
	}
}

// perturb multiplies every element x of raw by 1+p·u, u uniform in [-1,1]
// and drawn per element from key (INT32 rounded to the nearest and
// saturated at its bounds).
func perturb(raw []byte, intType bool, p float64, key uint64) {
	for i := 0; 4*i+4 <= len(raw); i++ {
		u := 2*unit(splitmix64(key+uint64(i)*weyl)) - 1
		y := element(raw, i, intType) * (1 + p*u)
		if intType {
			y = math.Max(math.MinInt32, math.Min(math.MaxInt32, math.Round(y)))
			binary.LittleEndian.PutUint32(raw[4*i:], uint32(int32(y)))
			continue
		}
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(float32(y)))
	}
}
