package monitor

import (
	"sync"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// HDR geometry: values are microseconds from 1 µs to one hour at three
// significant figures (0.1% relative error). A dense histogram of this shape
// holds 23,552 counts (about 184 KiB), which is why only the hot recorders
// are dense and every stored slice is packed.
const (
	hdrLowest  = 1
	hdrHighest = int64(time.Hour / time.Microsecond)
	hdrSigFigs = 3
)

// toMicros converts a duration to the histogram's unit, rounding to the
// nearest microsecond and clamping to the trackable range rather than
// dropping the value (RecordValue errors out of range).
func toMicros(d time.Duration) int64 {
	us := (int64(d) + 500) / 1000
	return min(max(us, 0), hdrHighest)
}

// fromMicros converts a histogram value back to a duration.
func fromMicros(us int64) time.Duration { return time.Duration(us) * time.Microsecond }

// densePool recycles the hot recorders: a shard takes one at its first call
// in a slice, Rotate resets it and puts it back.
var densePool = sync.Pool{New: func() any { return newDense() }}

func newDense() *hdr.Histogram { return hdr.New(hdrLowest, hdrHighest, hdrSigFigs) }

func newPacked() *hdr.PackedHistogram { return hdr.NewPacked(hdrLowest, hdrHighest, hdrSigFigs) }

// packedFree is a free list of empty packed histograms, owned by the
// registry and used only under its window lock, so that an idle series gives
// its storage back and a busy one reuses it.
type packedFree struct {
	list []*hdr.PackedHistogram
}

// maxFreePacked bounds the free list so a burst of traffic does not pin
// memory forever.
const maxFreePacked = 4096

func (f *packedFree) get() *hdr.PackedHistogram {
	if n := len(f.list); n > 0 {
		p := f.list[n-1]
		f.list[n-1] = nil
		f.list = f.list[:n-1]
		return p
	}
	return newPacked()
}

func (f *packedFree) put(p *hdr.PackedHistogram) {
	if p == nil || len(f.list) >= maxFreePacked {
		return
	}
	p.Reset()
	f.list = append(f.list, p)
}
