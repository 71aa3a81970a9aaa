package compress_test

import (
	"context"
	"fmt"
	"math/rand/v2"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/compress"
	"github.com/relurec/relurec/nn"
)

// Compress a small random ReLU network to 40% of its parameters from 500
// unlabelled calibration inputs, fitting each layer on the compressed
// network's own inputs (Alg 3).
func Example() {
	net, _ := nn.NewMLP([]int{20, 64, 32, 5}, 1)
	rng := rand.New(rand.NewPCG(1, 2))
	x := mat.NewDense(500, 20, nil)
	x.Apply(func(_, _ int, _ float64) float64 { return rng.NormFloat64() }, x)

	res, err := compress.CompressMLP(context.Background(), net, x, compress.Options{Keep: 0.4, Sequential: true})
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d of %d parameters (budget %d)\n", res.Params, res.DenseParams, res.Budget)
	for _, l := range res.Layers {
		fmt.Printf("layer %d: %d→%d rank %d dense %v\n", l.Layer, l.In, l.Out, l.Rank, l.Dense)
	}
	fmt.Println("layers in the model file:", len(res.Model.Layers))
	// Output:
	// 1413 of 3589 parameters (budget 1435)
	// layer 0: 20→64 rank 8 dense false
	// layer 1: 64→32 rank 5 dense false
	// layer 2: 32→5 rank 0 dense true
	// layers in the model file: 5
}
