package twolayer_test

import (
	"context"
	"fmt"
	"math"

	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/synth"
	"github.com/relurec/relurec/twolayer"
)

// FitICA recovers a network with orthonormal hidden weights exactly (Alg 3:
// FastICA on the outputs, then the exact polish).
func ExampleFitICA() {
	rng := synth.NewRand(1)
	teacher, _ := synth.TwoLayerTeacher(synth.TwoLayerConfig{D: 8, K: 3, M: 5, CondV: 1}, rng)
	X, _ := synth.GaussianInputs(20000, 8, nil, rng)
	Y, _, _ := synth.TwoLayerData(teacher, X, synth.Noise{}, rng)

	res, err := twolayer.FitICA(context.Background(), X, Y, twolayer.ICAOptions{Options: twolayer.Options{Seed: 1}})
	if err != nil {
		panic(err)
	}
	e, _ := metrics.CompareTwoLayer(teacher, res.Model)
	fmt.Println("route:", res.Route)
	fmt.Println("certified exact:", res.Certificate.Met)
	fmt.Println("weights within 1e-9:", e.MaxRelErr <= 1e-9)
	// Output:
	// route: ica+polish
	// certified exact: true
	// weights within 1e-9: true
}

// FitFPT recovers 4 hidden units from only 2 outputs (rank U* = 2 < k),
// with output weights at four angles including u and −u (Alg 7).
func ExampleFitFPT() {
	U, _ := synth.PlanarOutputWeights([]float64{0.3, 0.3 + math.Pi, 1.9, 4.4}, nil)
	rng := synth.NewRand(2)
	teacher, _ := synth.OrthonormalTeacher(10, U, rng)
	n := twolayer.FPTMinSamples(10, 4) // 4·d·2^k = 640
	X, _ := synth.GaussianInputs(n, 10, nil, rng)
	Y, _, _ := synth.TwoLayerData(teacher, X, synth.Noise{}, rng)

	res, err := twolayer.FitFPT(context.Background(), X, Y, twolayer.FPTOptions{Options: twolayer.Options{Hidden: 4}})
	if err != nil {
		panic(err)
	}
	e, _ := metrics.CompareTwoLayer(teacher, res.Model)
	fmt.Println("samples:", n)
	fmt.Println("certified exact:", res.Certificate.Met)
	fmt.Println("weights within 1e-10:", e.MaxRelErr <= 1e-10)
	// Output:
	// samples: 640
	// certified exact: true
	// weights within 1e-10: true
}
