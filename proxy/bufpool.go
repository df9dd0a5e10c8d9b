package proxy

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

// dirtyPool is a mem.BufferPool that does not zero buffers it hands out.
// gRPC's default pool clears every recycled buffer, which costs about a
// tenth of the proxy's CPU on 1 MiB tensors; the transport overwrites the
// whole requested length anyway (it reads exactly that many bytes into it),
// so no stale byte can leak into a message.
type dirtyPool struct {
	tiers [maxTier - minTier + 1]sync.Pool
}

const (
	minTier = 8  // 256 B
	maxTier = 24 // 16 MiB; larger buffers are allocated and dropped
)

func newDirtyPool() *dirtyPool { return &dirtyPool{} }

var _ mem.BufferPool = (*dirtyPool)(nil)

// tier returns the index of the smallest tier holding size bytes, or -1.
func tier(size int) int {
	if size <= 1<<minTier {
		return 0
	}
	t := bits.Len(uint(size - 1))
	if t > maxTier {
		return -1
	}
	return t - minTier
}

// Get returns a buffer of exactly length bytes with unspecified contents.
func (p *dirtyPool) Get(length int) *[]byte {
	t := tier(length)
	if t < 0 {
		b := make([]byte, length)
		return &b
	}
	if v, ok := p.tiers[t].Get().(*[]byte); ok {
		*v = (*v)[:length]
		return v
	}
	b := make([]byte, length, 1<<(t+minTier))
	return &b
}

// Put recycles buf if its capacity is exactly one tier's size.
func (p *dirtyPool) Put(buf *[]byte) {
	c := cap(*buf)
	t := tier(c)
	if t < 0 || c != 1<<(t+minTier) {
		return
	}
	p.tiers[t].Put(buf)
}
