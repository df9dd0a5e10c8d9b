package proxy

import (
	"bytes"
	"sync"
	"testing"

	"google.golang.org/grpc/mem"
)

// TestFrameBytesConcurrent: a multi-buffer frame (a request over ~16 KiB)
// read as one slice by a hedge's goroutine and the primary's at once gives
// both the payload, without a data race on the cached copy (go test
// -race found none only because no test read it twice at once).
func TestFrameBytesConcurrent(t *testing.T) {
	a, b := bytes.Repeat([]byte{1}, 20000), bytes.Repeat([]byte{2}, 30000)
	want := append(append([]byte{}, a...), b...)
	for range 50 {
		f := &Frame{data: mem.BufferSlice{mem.SliceBuffer(a), mem.SliceBuffer(b)}}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if got := f.Bytes(); !bytes.Equal(got, want) {
					t.Errorf("Bytes: %d bytes, want the %d of both buffers", len(got), len(want))
				}
			})
		}
		wg.Wait()
	}
}
