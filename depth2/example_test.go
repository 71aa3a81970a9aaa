package depth2_test

import (
	"context"
	"fmt"

	"github.com/relurec/relurec/depth2"
	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/synth"
)

// Learn a network with biases exactly from 100 000 noiseless samples.
func Example() {
	rng := synth.NewRand(3)
	teacher, _ := synth.Depth2Teacher(synth.Depth2Config{D: 6, M: 3}, rng)
	X, _ := synth.GaussianInputs(100000, 6, nil, rng)
	Y, _, _ := synth.Depth2Data(teacher, X, synth.Noise{}, rng)

	res, err := depth2.Fit(context.Background(), X, Y, depth2.Options{Seed: 1})
	if err != nil {
		panic(err)
	}
	moment, _ := metrics.CompareDepth2(teacher, res.Moment.MLP(), false)
	refined, _ := metrics.CompareDepth2(teacher, res.Model.MLP(), false)
	fmt.Println("route:", res.Route)
	fmt.Println("hidden units:", res.Model.Hidden())
	fmt.Println("certified exact:", res.Certificate.Met)
	fmt.Println("moment estimate within 0.2:", moment.MaxErr < 0.2)
	fmt.Println("refined within 1e-9:", refined.MaxErr < 1e-9)
	// Output:
	// route: moments+refine
	// hidden units: 3
	// certified exact: true
	// moment estimate within 0.2: true
	// refined within 1e-9: true
}

// Algorithm 1 on exact population moments: a unit with b = 0 is invisible
// in the order-3 moment (He_1(0) = 0) and found in the order-4 one.
func ExampleRecoverExact() {
	teacher, _ := synth.Depth2Teacher(synth.Depth2Config{D: 5, M: 3, Biases: []float64{0, 0.5, -1.2}}, synth.NewRand(1))
	net, _ := nn.Depth2FromMLP(teacher)
	mo, _ := depth2.PopulationMoments(net, 4)
	rec, _ := depth2.RecoverExact(mo, 1, 1)
	fmt.Println("ranks of the order-3 and order-4 flattenings:", rec.Ranks)
	fmt.Println("units:", len(rec.Units), "signs fixed:", rec.SignsFixed)
	// Output:
	// ranks of the order-3 and order-4 flattenings: [2 3]
	// units: 3 signs fixed: true
}
