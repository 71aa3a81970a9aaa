package synth

import (
	"testing"

	"gonum.org/v1/gonum/mat"
)

// The problem drawers are the one place that fixes the draw order: the same
// seed gives the same problem, and another seed a different one.
func TestDrawProblemsDeterministic(t *testing.T) {
	cfg := TwoLayerProblemConfig{Teacher: TwoLayerConfig{D: 5, K: 3, M: 4}, N: 50, CovCond: 3, Noise: Noise{Kind: "gaussian", Level: 0.1}}
	p1, err := DrawTwoLayerProblem(cfg, 7)
	if err != nil {
		t.Fatal(err)
	}
	p2, _ := DrawTwoLayerProblem(cfg, 7)
	p3, _ := DrawTwoLayerProblem(cfg, 8)
	if !mat.Equal(p1.X, p2.X) || !mat.Equal(p1.Y, p2.Y) || p1.Sigma != p2.Sigma {
		t.Error("same seed, different two-layer problems")
	}
	if mat.Equal(p1.X, p3.X) {
		t.Error("different seeds, same inputs")
	}
	l1, err := DrawLemma16Problem(0.1, false, 40, 3)
	if err != nil {
		t.Fatal(err)
	}
	l2, _ := DrawLemma16Problem(0.1, true, 40, 3)
	if !mat.Equal(l1.X, l2.X) || l1.A != 0.1 || l2.A != 0.2 || l1.Distinguishing != l2.Distinguishing {
		t.Errorf("lemma16: the pair must share X and the distinguishing count; a = %g, %g", l1.A, l2.A)
	}
	s1, err := DrawSAT6Problem(8, 6, false, 5)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := DrawSAT6Problem(8, 6, false, 5)
	if !mat.Equal(s1.X, s2.X) || !mat.Equal(s1.Y, s2.Y) {
		t.Error("sat6: same seed, different instances")
	}
}
