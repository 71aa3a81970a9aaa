package twolayer

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/synth"
)

// The exact route holds one n×k buffer: the basis of col(Y) is computed in
// the memory of the released reduced outputs and the activations in the
// basis's, each with the bits of a freshly allocated matrix.
func TestExactRouteReusesOneBuffer(t *testing.T) {
	in := newInstance(t, 2, synth.TwoLayerConfig{D: 12, K: 4, M: 6, CondV: 3}, 20000, nil, synth.Noise{})
	p, err := newProblem(in.X, in.Y)
	if err != nil {
		t.Fatal(err)
	}
	st, err := tensorStart(context.Background(), p, Options{Seed: 1}.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	red := st.moments.red.RawMatrix().Data
	svd, err := p.svdY()
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := (&Start{p: p, K: st.K}).basis() // in a new buffer
	if err != nil {
		t.Fatal(err)
	}
	// The basis is Y·V_k·Σ_k⁻¹: U's first k columns, signs included.
	var diff mat.Dense
	diff.Sub(fresh, svd.UCols(st.K))
	if e := mat.Norm(&diff, math.Inf(1)); e > 1e-12 {
		t.Errorf("the basis is %.1e from the SVD's U_k", e)
	}
	st.releaseMoments()
	B, err := st.basis()
	if err != nil {
		t.Fatal(err)
	}
	if &B.RawMatrix().Data[0] != &red[0] {
		t.Error("the basis did not take the reduced outputs' memory")
	}
	if !mat.Equal(B, fresh) {
		t.Error("the basis computed in a used buffer differs from a fresh one")
	}
	if len(st.work) != 0 {
		t.Error("the start still offers the buffer the basis holds")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, act := range []nn.Activation{nn.ReLU, nn.RectPow(2), nn.RectExp} {
		buf := make([]float64, len(red))
		for i := range buf {
			buf[i] = rng.NormFloat64()
		}
		F := activationsTo(buf, in.X, in.V, act)
		if &F.RawMatrix().Data[0] != &buf[0] || !mat.Equal(F, activationsOf(in.X, in.V, act)) {
			t.Errorf("%s: activations computed in a used buffer differ from fresh ones (or were not computed there)", act)
		}
	}
	if z := makeLarge(3 << 20); len(z) != 3<<20 || z[0] != 0 || z[len(z)-1] != 0 {
		t.Error("makeLarge did not return a zeroed slice of the length asked")
	}
}
