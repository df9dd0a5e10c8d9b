package merge

import (
	"encoding/binary"
	"math"
)

// maxElems bounds element counts so that count*8 bytes always fits in an
// int; larger tensors cannot arrive in a gRPC message anyway.
const maxElems = 1 << 56

// maxRows bounds Item.Rows so that summing a batch's rows cannot overflow;
// only a request of empty rows (shape [n, 0, ...]) can get near it, and such
// a degenerate request simply goes upstream alone.
const maxRows = 1<<31 - 1

// mulElems multiplies two element counts, reporting false past maxElems.
func mulElems(a, b int64) (int64, bool) {
	if a < 0 || b < 0 {
		return 0, false
	}
	if a == 0 || b == 0 {
		return 0, true
	}
	if a > maxElems/b {
		return 0, false
	}
	return a * b, true
}

// rowElems returns the number of elements in one row of a tensor whose
// dimensions after dimension 0 are dims, or false for a negative or
// overflowing dimension.
func rowElems(dims []int64) (int64, bool) {
	n := int64(1)
	for _, d := range dims {
		var ok bool
		if n, ok = mulElems(n, d); !ok {
			return 0, false
		}
	}
	return n, true
}

// bytesRowEnds walks KServe raw BYTES data (4-byte little-endian length then
// the bytes, per element) and returns the end offset of each part, where
// part i holds rows[i]*perRow elements. It reports false unless the data
// holds exactly that many well-formed elements.
func bytesRowEnds(data []byte, perRow int64, rows []int) ([]int, bool) {
	var total int64
	for _, r := range rows {
		total += int64(r)
	}
	count, ok := mulElems(total, perRow)
	// Every element takes at least its 4-byte prefix: reject impossible
	// counts before walking, so a huge shape cannot loop for long.
	if !ok || count > int64(len(data))/4 {
		return nil, false
	}
	ends := make([]int, len(rows))
	off := 0
	for i, r := range rows {
		for n := int64(r) * perRow; n > 0; n-- {
			if len(data)-off < 4 {
				return nil, false
			}
			l := binary.LittleEndian.Uint32(data[off:])
			off += 4
			if uint64(l) > uint64(len(data)-off) {
				return nil, false
			}
			off += int(l)
		}
		ends[i] = off
	}
	return ends, off == len(data)
}

// bytesElemsOK reports whether data holds exactly count raw BYTES elements.
func bytesElemsOK(data []byte, count int64) bool {
	_, ok := bytesRowEnds(data, count, []int{1})
	return ok
}

// clampInt converts a validated element count to int.
func clampInt(n int64) int {
	if n > math.MaxInt {
		return math.MaxInt
	}
	return int(n)
}
