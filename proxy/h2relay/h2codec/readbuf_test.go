package h2codec

import (
	"bytes"
	"io"
	"math/rand/v2"
	"testing"
)

// chunkReader returns its data in the chunk sizes given, then io.EOF.
type chunkReader struct {
	data   []byte
	chunks []int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := len(r.data)
	if len(r.chunks) > 0 {
		n = min(n, r.chunks[0])
		r.chunks = r.chunks[1:]
	}
	n = copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// The bytes that come out of Peek, Discard and Read are the stream's, in
// order, whatever sizes the reads return and whichever buffer is in use.
func TestReadBufKeepsTheStream(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 8<<20)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	var chunks []int
	for range 4000 {
		if rng.IntN(3) == 0 {
			chunks = append(chunks, 1+rng.IntN(200))
		} else {
			chunks = append(chunks, 1+rng.IntN(300<<10))
		}
	}
	b := newReadBuf(&chunkReader{data: data, chunks: chunks}, 4<<10)
	var got []byte
	sawBig := false
	for len(got) < len(data) {
		switch rng.IntN(3) {
		case 0:
			p := make([]byte, 1+rng.IntN(100))
			n, err := b.Read(p)
			if err != nil {
				t.Fatalf("read at %d: %v", len(got), err)
			}
			got = append(got, p[:n]...)
		default:
			n := min(1+rng.IntN(64<<10), len(data)-len(got))
			if n > b.Size() {
				n = b.Size()
			}
			p, err := b.Peek(n)
			if err != nil {
				t.Fatalf("peek %d at %d: %v", n, len(got), err)
			}
			got = append(got, p...)
			b.Discard(n)
		}
		sawBig = sawBig || b.big()
	}
	if !bytes.Equal(got, data) {
		t.Fatal("the bytes read differ from the stream's")
	}
	if !sawBig {
		t.Fatal("a stream of big reads never took a big buffer")
	}
	if _, err := b.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read past the end: %v, want EOF", err)
	}
	b.release()
	if n := bigOut.Load(); n != 0 {
		t.Fatalf("%d big buffers out after release", n)
	}
}

// A connection takes a big buffer when a read fills its small one, gives
// it back after a run of little reads, and takes none once maxBigBufs are
// out (then it reads as before, with its small buffer).
func TestReadBufGrowsShrinksAndIsBounded(t *testing.T) {
	const small = 4 << 10
	big := bytes.Repeat([]byte{1}, 2*BigBufSize)
	chunks := []int{small, BigBufSize}
	for range shrinkAfter + 2 {
		chunks = append(chunks, 100)
	}
	b := newReadBuf(&chunkReader{data: big, chunks: chunks}, small)
	read := func() { // exactly one read(2)
		t.Helper()
		b.Discard(b.Buffered())
		if _, err := b.Peek(1); err != nil {
			t.Fatal(err)
		}
	}
	read() // fills the small buffer
	if b.big() {
		t.Fatal("big before a read filled the small buffer")
	}
	read() // the peer has more: this read takes the big buffer
	if !b.big() || b.Buffered() != BigBufSize {
		t.Fatalf("big=%v buffered=%d after a full read", b.big(), b.Buffered())
	}
	for range shrinkAfter {
		read()
	}
	if !b.big() {
		t.Fatal("gave the big buffer back before shrinkAfter little reads")
	}
	read()
	if b.big() || b.Buffered() != 100 {
		t.Fatalf("still big after %d little reads", shrinkAfter)
	}
	if n := bigOut.Load(); n != 0 {
		t.Fatalf("%d big buffers out after shrinking", n)
	}

	// The budget: with maxBigBufs out, a full read keeps the small buffer.
	var held [][]byte
	for range maxBigBufs {
		held = append(held, takeBig())
	}
	c := newReadBuf(&chunkReader{data: big, chunks: []int{small, small, small}}, small)
	for range 3 {
		if _, err := c.Peek(1); err != nil {
			t.Fatal(err)
		}
		c.Discard(c.Buffered())
	}
	if c.big() {
		t.Fatal("took a big buffer beyond maxBigBufs")
	}
	for _, h := range held {
		giveBig(h)
	}
	if n := bigOut.Load(); n != 0 {
		t.Fatalf("%d big buffers out at the end", n)
	}
}
