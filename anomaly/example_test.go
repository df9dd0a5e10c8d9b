package anomaly_test

import (
	"fmt"

	"github.com/infergate/infergate/anomaly"
)

func ExampleNew() {
	det, err := anomaly.New(anomaly.DefaultFeatures(), anomaly.WithSeed(1))
	if err != nil {
		panic(err)
	}
	x := make([]float64, len(det.Features())) // every feature at its baseline
	r := det.Observe(x, true)
	fmt.Println(r.Learning, r.Score)
	// Output: true 0
}
