package nn

import (
	"errors"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// A GraphRun advanced node by node gives the rows InputRows gives, also
// after the graph is rewritten at the pause point (the next weight
// replaced, as a sequential compression does), over several chunks of
// samples; it keeps only the values later nodes read, and refuses to go
// back.
func TestGraphRunAdvance(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	g := &Graph{
		Input: "x", InputShape: []int{4, 5}, Output: "y",
		Consts: map[string]*GraphTensor{"W1": randTensor(rng, 5, 6), "W2": randTensor(rng, 6, 6), "W3": randTensor(rng, 6, 3)},
		Nodes: []GraphNode{
			{Name: "t", Op: "Transpose", Inputs: []string{"x"}, Outputs: []string{"xt"}, Attrs: map[string]GraphAttr{"perm": {Kind: "ints", Ints: []int64{1, 0, 2}}}},
			{Name: "mm1", Op: "MatMul", Inputs: []string{"xt", "W1"}, Outputs: []string{"a"}},
			{Name: "r1", Op: "Relu", Inputs: []string{"a"}, Outputs: []string{"h"}},
			{Name: "mm2", Op: "MatMul", Inputs: []string{"h", "W2"}, Outputs: []string{"b"}},
			{Name: "r2", Op: "Relu", Inputs: []string{"b"}, Outputs: []string{"h2"}},
			{Name: "mm3", Op: "MatMul", Inputs: []string{"h2", "W3"}, Outputs: []string{"c"}},
			{Name: "tb", Op: "Transpose", Inputs: []string{"c"}, Outputs: []string{"y"}, Attrs: map[string]GraphAttr{"perm": {Kind: "ints", Ints: []int64{1, 0, 2}}}},
		},
	}
	n := 2*evalChunk + 37 // three chunks
	x := mat.NewDense(n, g.In(), nil)
	for i := range x.RawMatrix().Data {
		x.RawMatrix().Data[i] = rng.NormFloat64()
	}
	pick := func(total int) []int { // every third row
		var rows []int
		for i := 0; i < total; i += 3 {
			rows = append(rows, i)
		}
		return rows
	}
	run, err := g.Start(x)
	if err != nil {
		t.Fatal(err)
	}
	if len(run.chunks) != 3 {
		t.Fatalf("%d chunks, want 3", len(run.chunks))
	}
	got, err := run.Advance(g, 3, pick)
	if err != nil {
		t.Fatal(err)
	}
	want, err := g.InputRows(x, []int{3}, func(_, total int) []int { return pick(total) })
	if err != nil {
		t.Fatal(err)
	}
	if !mat.Equal(got, want[0]) {
		t.Fatal("rows of mm2's input differ from InputRows'")
	}

	h := *g // mm2 rewritten with another weight
	h.Consts = map[string]*GraphTensor{"W1": g.Consts["W1"], "W2b": randTensor(rng, 6, 6), "W3": g.Consts["W3"]}
	h.Nodes = append([]GraphNode(nil), g.Nodes...)
	h.Nodes[3].Inputs = []string{"h", "W2b"}
	got, err = run.Advance(&h, 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err = h.InputRows(x, []int{5}, func(int, int) []int { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !mat.Equal(got, want[0]) {
		t.Fatal("rows of mm3's input after the rewrite differ from InputRows'")
	}
	for c, env := range run.chunks {
		if len(env) != 1 || env["h2"].data == nil {
			t.Fatalf("chunk %d keeps %d values, want only mm3's input h2", c, len(env))
		}
	}
	if _, err := run.Advance(&h, 3, nil); !errors.Is(err, ErrInput) {
		t.Fatalf("advancing back to node 3: %v, want ErrInput", err)
	}
}
