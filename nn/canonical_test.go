package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// scramble applies a random permutation and random positive scaling to the
// hidden units of every ReLU layer: a different parameterisation of the same
// function.
func scramble(rng *rand.Rand, m *MLP) *MLP {
	c := m.Clone()
	for i := 0; i+1 < len(c.Layers); i++ {
		l, next := &c.Layers[i], &c.Layers[i+1]
		if l.Act != ReLU {
			continue
		}
		k := l.Out()
		perm := rng.Perm(k)
		W, N := mat.DenseCopyOf(l.Weight), mat.DenseCopyOf(next.Weight)
		var b []float64
		if l.Bias != nil {
			b = append([]float64(nil), l.Bias...)
		}
		r, _ := N.Dims()
		for j, p := range perm {
			s := math.Exp(2 * rng.NormFloat64())
			row := l.Weight.RawRowView(j)
			for a, v := range W.RawRowView(p) {
				row[a] = v * s
			}
			if b != nil {
				l.Bias[j] = b[p] * s
			}
			for a := 0; a < r; a++ {
				next.Weight.Set(a, j, N.At(a, p)/s)
			}
		}
	}
	return c
}

func TestCanonical(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	// Two-layer without bias, and a deeper net with biases, an identity
	// (factored) layer and a ReLU before it.
	nets := []*MLP{
		randMLP(rng, []int{5, 9, 3}, []Activation{ReLU, Identity}),
		randMLP(rng, []int{6, 10, 7, 4, 3}, []Activation{ReLU, ReLU, Identity, Identity}),
	}
	for ni, m := range nets {
		orig := m.Clone()
		x := randDense(rng, 300, m.In())
		c := m.Canonical()
		if d := maxRelDiff(c.Forward(x), m.Forward(x)); d > 1e-12 {
			t.Fatalf("net %d: Canonical changes the function by %g", ni, d)
		}
		for i := range m.Layers {
			if !mat.Equal(m.Layers[i].Weight, orig.Layers[i].Weight) {
				t.Fatalf("net %d: Canonical modified its receiver", ni)
			}
		}
		// The rule holds: unit rows of [W b], descending next-column norms.
		for i := 0; i+1 < len(c.Layers); i++ {
			l, next := c.Layers[i], c.Layers[i+1]
			if l.Act != ReLU {
				continue
			}
			prev := math.Inf(1)
			for j := 0; j < l.Out(); j++ {
				row := append([]float64(nil), l.Weight.RawRowView(j)...)
				if l.Bias != nil {
					row = append(row, l.Bias[j])
				}
				if n := mat.Norm(mat.NewVecDense(len(row), row), 2); math.Abs(n-1) > 1e-14 {
					t.Fatalf("net %d layer %d unit %d: row norm %v", ni, i, j, n)
				}
				cn := mat.Norm(next.Weight.ColView(j), 2)
				if cn > prev {
					t.Fatalf("net %d layer %d: unit %d has outgoing norm %v > previous %v", ni, i, j, cn, prev)
				}
				prev = cn
			}
		}
		// Any reparameterisation has the same canonical form.
		for trial := 0; trial < 3; trial++ {
			s := scramble(rng, m)
			if d := maxRelDiff(s.Forward(x), m.Forward(x)); d > 1e-12 {
				t.Fatalf("scramble changed the function by %g", d)
			}
			cs := s.Canonical()
			for i := range c.Layers {
				var diff mat.Dense
				diff.Sub(cs.Layers[i].Weight, c.Layers[i].Weight)
				if e := mat.Norm(&diff, math.Inf(1)) / mat.Norm(c.Layers[i].Weight, math.Inf(1)); e > 1e-12 {
					t.Fatalf("net %d trial %d layer %d: canonical forms differ by %g", ni, trial, i, e)
				}
				for j, b := range c.Layers[i].Bias {
					if math.Abs(cs.Layers[i].Bias[j]-b) > 1e-12*(1+math.Abs(b)) {
						t.Fatalf("net %d layer %d: canonical biases differ", ni, i)
					}
				}
			}
		}
	}
}

func TestCanonicalTiesAndDeadUnits(t *testing.T) {
	// Units 0 and 2 have equal outgoing norms: the incoming row decides
	// (lexicographically smaller first). Unit 1 is dead (zero row) and keeps
	// its scale.
	V := mat.NewDense(3, 2, []float64{
		0, 3,
		0, 0,
		4, 0,
	})
	U := mat.NewDense(1, 3, []float64{1.0 / 3, 5, 0.25})
	c := NewTwoLayer(V, U).Canonical()
	wantV := []float64{0, 0, 0, 1, 1, 0}
	wantU := []float64{5, 1, 1}
	for i, v := range c.Layers[0].Weight.RawMatrix().Data {
		if v != wantV[i] {
			t.Fatalf("V = %v, want %v", mat.Formatted(c.Layers[0].Weight), wantV)
		}
	}
	for i, v := range c.Layers[1].Weight.RawMatrix().Data {
		if math.Abs(v-wantU[i]) > 1e-15 {
			t.Fatalf("U = %v, want %v", mat.Formatted(c.Layers[1].Weight), wantU)
		}
	}
}
