package release_test

import (
	"fmt"
	"time"

	"github.com/infergate/infergate/release"
)

func ExampleNew() {
	set, err := release.New([]release.Spec{{
		Model:     "resnet50",
		Stable:    release.Target{Version: "1"},
		Candidate: release.Target{Version: "2"},
		Steps:     []float64{1, 5, 25, 50, 100},
		Sticky:    "x-user",
	}})
	if err != nil {
		panic(err)
	}
	c := set.Choose("resnet50", []byte("alice"), false)
	fmt.Println(c.Version, c.Target)
	c.Release.Observe(c.Version, 0, 12*time.Millisecond, true)
	st := set.Status()[0]
	fmt.Println(st.State, st.Weight, st.Spec.Judgement.Alpha)

	_, err = release.New([]release.Spec{{Model: "bert", Stable: release.Target{Version: "1"}, Candidate: release.Target{Version: "2"}, Weight: 120}})
	fmt.Println(err)
	// Output:
	// stable version 1
	// running 1 0.01
	// release: releases[0].weight: must be between 0 and 100, got 120
}
