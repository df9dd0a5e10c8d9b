package sim

import (
	"context"
	"io"
	"slices"
	"testing"
)

func TestModelStreamInfer(t *testing.T) {
	h := start(t, Config{})
	stream, err := h.ks.ModelStreamInfer(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	a, b := simpleInputs()
	good := simpleRequest(a, b, true)

	// One at a time, so responses are in order.
	good.Id = "first"
	if err := stream.Send(good); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil || resp.ErrorMessage != "" || resp.InferResponse.GetId() != "first" {
		t.Fatalf("first: %v %v", resp, err)
	}
	if got := decodeInt32s(resp.InferResponse.RawOutputContents[0]); got[5] != 6 {
		t.Errorf("OUTPUT0[5] = %d, want 6", got[5])
	}

	bad := simpleRequest(a, b, true)
	bad.ModelName, bad.Id = "nope", "bad"
	if err := stream.Send(bad); err != nil {
		t.Fatal(err)
	}
	resp, err = stream.Recv()
	if err != nil {
		t.Fatalf("bad request broke the stream: %v", err)
	}
	if resp.ErrorMessage != "Request for unknown model: 'nope' is not found" || resp.InferResponse.GetId() != "bad" {
		t.Errorf("bad: %v", resp)
	}

	good.Id = "third"
	if err := stream.Send(good); err != nil {
		t.Fatal(err)
	}
	if resp, err = stream.Recv(); err != nil || resp.ErrorMessage != "" || resp.InferResponse.GetId() != "third" {
		t.Fatalf("third: %v %v", resp, err)
	}

	// Several in flight: every request gets exactly one response.
	ids := []string{"a", "b", "c", "d"}
	for _, id := range ids {
		good.Id = id
		if err := stream.Send(good); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, resp.InferResponse.GetId())
	}
	slices.Sort(got)
	if !slices.Equal(got, ids) {
		t.Errorf("responses %v, want %v", got, ids)
	}
}
