package load

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"
)

func TestRawCodec(t *testing.T) {
	c := rawCodec{}
	if c.Name() != "proto" {
		t.Errorf("Name() = %q, want proto so servers accept the content-type", c.Name())
	}
	body := []byte("hello")
	for _, v := range []any{body, &body} {
		bs, err := c.Marshal(v)
		if err != nil || !bytes.Equal(bs.Materialize(), body) {
			t.Errorf("Marshal(%T) = %q, %v", v, bs.Materialize(), err)
		}
	}
	if _, err := c.Marshal("str"); err == nil {
		t.Error("Marshal accepted a string")
	}
	in := mem.BufferSlice{mem.SliceBuffer([]byte("abc")), mem.SliceBuffer([]byte("de"))}
	var s sink
	if err := c.Unmarshal(in, &s); err != nil || s.n != 5 {
		t.Errorf("Unmarshal(sink) n=%d err=%v", s.n, err)
	}
	var out []byte
	if err := c.Unmarshal(in, &out); err != nil || string(out) != "abcde" {
		t.Errorf("Unmarshal(bytes) = %q, %v", out, err)
	}
	if err := c.Unmarshal(in, new(int)); err == nil {
		t.Error("Unmarshal accepted *int")
	}
}
