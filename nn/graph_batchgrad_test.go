package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// The gradient of a batch, run in chunks of gradChunk samples, is
// Gradient's on the whole batch.
func TestGraphBatchGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	g := residualGraph(rng)
	n := 2*gradChunk + 5
	x := mat.NewDense(n, g.In(), randValue(rng, 0, n*g.In()).data)
	labels := make([]int, n)
	for i := range labels {
		labels[i] = rng.IntN(g.Out())
	}
	idx := rng.Perm(n)
	xs := mat.NewDense(n, g.In(), nil)
	ls := make([]int, n)
	for r, i := range idx {
		xs.SetRow(r, x.RawRowView(i))
		ls[r] = labels[i]
	}
	names := []string{"W1", "b1", "W2", "Wh"}
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := g.CheckConstants("TestGraphBatchGradient", names); err != nil {
		t.Fatal(err)
	}
	got := make([][]float64, len(names))
	for j, name := range names {
		got[j] = make([]float64, len(g.Consts[name].Data))
	}
	err := g.BatchGradient(x, idx, names, func(z, dz *mat.Dense) { SoftmaxCrossEntropy(z, ls, dz) }, got)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := g.Values(xs)
	if err != nil {
		t.Fatal(err)
	}
	z, _ := g.ForwardFrom(vals, len(g.Nodes))
	dz := mat.NewDense(n, g.Out(), nil)
	SoftmaxCrossEntropy(z, ls, dz)
	want, err := g.Gradient(vals, dz, names)
	if err != nil {
		t.Fatal(err)
	}
	for j := range names {
		for k, v := range got[j] {
			if math.Abs(v-want[j][k]) > 1e-12*(1+math.Abs(want[j][k])) {
				t.Fatalf("%s[%d]: chunked gradient %g, whole-batch %g", names[j], k, v, want[j][k])
			}
		}
	}
	if err := g.CheckConstants("TestGraphBatchGradient", []string{"h"}); err == nil {
		t.Error("CheckConstants accepts a computed value")
	}
}
