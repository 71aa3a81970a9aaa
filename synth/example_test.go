package synth_test

import (
	"fmt"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/synth"
)

// Example draws a teacher with κ(V*) = 5, Gaussian inputs and labels with
// noise at 10% of the output scale, all from explicit seeds.
func Example() {
	teacher, err := synth.TwoLayerTeacher(
		synth.TwoLayerConfig{D: 20, K: 5, M: 8, CondV: 5},
		synth.NewRand(1),
	)
	if err != nil {
		panic(err)
	}
	x, err := synth.GaussianInputs(10000, 20, nil, synth.NewRand(2))
	if err != nil {
		panic(err)
	}
	y, sigma, err := synth.TwoLayerData(teacher, x, synth.Noise{Kind: synth.NoiseGaussian, Level: 0.1}, synth.NewRand(3))
	if err != nil {
		panic(err)
	}
	v := teacher.Layers[0].Weight
	r, c := y.Dims()
	fmt.Printf("V* is %d×%d with κ(V*) = %.2f\n", v.RawMatrix().Rows, v.RawMatrix().Cols, mat.Cond(v, 2))
	fmt.Printf("Y is %d×%d, noise σ > 0: %v\n", r, c, sigma > 0)
	// Output:
	// V* is 5×20 with κ(V*) = 5.00
	// Y is 10000×8, noise σ > 0: true
}
