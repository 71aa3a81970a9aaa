package twolayer_test

import (
	"context"
	"fmt"

	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/synth"
	"github.com/relurec/relurec/twolayer"
)

// Recover a 3-unit network exactly from 20000 noiseless samples.
func Example() {
	rng := synth.NewRand(1)
	teacher, _ := synth.TwoLayerTeacher(synth.TwoLayerConfig{D: 8, K: 3, M: 5, CondV: 2}, rng)
	X, _ := synth.GaussianInputs(20000, 8, nil, rng)
	Y, _, _ := synth.TwoLayerData(teacher, X, synth.Noise{}, rng)

	res, err := twolayer.Fit(context.Background(), X, Y, twolayer.Options{Seed: 1})
	if err != nil {
		panic(err)
	}
	e, _ := metrics.CompareTwoLayer(teacher, res.Model)
	fmt.Println("route:", res.Route)
	fmt.Println("certified exact:", res.Certificate.Met)
	fmt.Println("weights within 1e-9:", e.MaxRelErr <= 1e-9)
	// Output:
	// route: tensor+polish
	// certified exact: true
	// weights within 1e-9: true
}
