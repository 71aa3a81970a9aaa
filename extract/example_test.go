package extract_test

import (
	"context"
	"fmt"

	"github.com/relurec/relurec/extract"
	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/synth"
)

// Extract a 30-8-3 network with biases from queries alone.
func Example() {
	teacher, _ := synth.Depth2Teacher(synth.Depth2Config{D: 30, M: 8, Outputs: 3, OutputBias: true}, synth.NewRand(1))
	res, err := extract.Extract(context.Background(), extract.FromMLP(teacher), 30, extract.Options{Seed: 1})
	if err != nil {
		panic(err)
	}
	cmp, _ := metrics.CompareDepth2(teacher, res.Model.MLP(), false)
	fmt.Println("units:", res.Units)
	fmt.Println("certified exact:", res.Certificate.Met)
	fmt.Println("parameters within 1e-9:", cmp.MaxErr < 1e-9)
	fmt.Println("fewer than 2000 queries:", res.Queries < 2000)
	// Output:
	// units: 8
	// certified exact: true
	// parameters within 1e-9: true
	// fewer than 2000 queries: true
}
