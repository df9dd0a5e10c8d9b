package batcher_test

import (
	"fmt"
	"time"

	"github.com/infergate/infergate/batcher"
	"github.com/infergate/infergate/proto/methods"
)

func ExampleNew() {
	b, err := batcher.New(batcher.Config{Models: map[string]batcher.Policy{
		"resnet50":     {Mode: batcher.Adaptive, MaxSize: 64, SLO: 50 * time.Millisecond},
		"mobilenet_v3": {Mode: batcher.Static, MaxDelay: 500 * time.Microsecond, PreferredSizes: []int{8, 16}, Slots: 4},
	}})
	if err != nil {
		panic(err)
	}
	defer b.Close()
	p := b.Policies()["mobilenet_v3"]
	fmt.Println(p.Mode, p.MaxSize, p.MaxDelay, p.QueueSize, p.Slots)
	fmt.Println(b.Handles(methods.ModelInfer, "resnet50"), b.Handles(methods.ModelInfer, "bert"))

	_, err = batcher.New(batcher.Config{Models: map[string]batcher.Policy{"m": {Mode: batcher.Static, MaxSize: -1}}})
	fmt.Println(err)
	// Output:
	// static 32 500µs 1024 4
	// true false
	// batcher: model "m": max_size: must be between 1 and 4096, got -1
}
