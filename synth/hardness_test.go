package synth

import (
	"errors"
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/nn"
)

func forward(t *testing.T, net *nn.MLP, X *mat.Dense) *mat.Dense {
	t.Helper()
	Y, _, err := TwoLayerData(net, X, Noise{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return Y
}

// [BJW19, Lemma 16], with V²'s first row (1, 2a) where the paper prints
// (1, a): both networks have unit rows and κ(V¹) = 1/a; they agree exactly
// on every sample with |x₁| > 2a|x₂| and differ on the others, whose
// frequency among Gaussian samples is (2/π)·arctan(2a).
func TestLemma16Pair(t *testing.T) {
	const n = 100_000
	for _, a := range []float64{0.05, 0.2, 1} {
		n1, n2, err := Lemma16Pair(a)
		if err != nil {
			t.Fatal(err)
		}
		for i, net := range []*nn.MLP{n1, n2} {
			V := net.Layers[0].Weight
			for r := 0; r < 2; r++ {
				if nr := math.Hypot(V.At(r, 0), V.At(r, 1)); math.Abs(nr-1) > 1e-15 {
					t.Errorf("a=%g network %d row %d has norm %v (erratum: (1, 2a)/√(1+4a²))", a, i+1, r, nr)
				}
			}
		}
		if c := linalg.Cond(n1.Layers[0].Weight); math.Abs(c*a-1) > 1e-12 {
			t.Errorf("a=%g: κ(V¹) = %v, want 1/a", a, c)
		}
		X, err := GaussianInputs(n, 2, nil, NewRand(uint64(1000*a)))
		if err != nil {
			t.Fatal(err)
		}
		Y1, Y2 := forward(t, n1, X), forward(t, n2, X)
		differ := 0
		for q := 0; q < n; q++ {
			x1, x2 := X.At(q, 0), X.At(q, 1)
			d := math.Abs(Y1.At(q, 0) - Y2.At(q, 0))
			// Both compute (f(x1 + a x2) + f(x1 − a x2))/2 — check the form.
			want := (math.Max(x1+a*x2, 0) + math.Max(x1-a*x2, 0)) / 2
			if math.Abs(Y1.At(q, 0)-want) > 1e-12*(1+math.Abs(want)) {
				t.Fatalf("a=%g sample %d: output %v, want %v", a, q, Y1.At(q, 0), want)
			}
			if math.Abs(x1) > 2*a*math.Abs(x2) {
				if d > 1e-12*(1+math.Abs(x1)) {
					t.Fatalf("a=%g sample %d (|x1| > 2a|x2|): outputs differ by %v", a, q, d)
				}
			} else if d > 1e-12 {
				differ++
			}
			if Lemma16Distinguishes(x1, x2, a) != (d > 1e-12) && math.Abs(math.Abs(x1)-2*a*math.Abs(x2)) > 1e-9 {
				t.Fatalf("a=%g sample %d: Lemma16Distinguishes disagrees with the outputs", a, q)
			}
		}
		p := Lemma16DistinguishProb(a)
		sd := math.Sqrt(p * (1 - p) / n)
		got := float64(differ) / n
		if math.Abs(got-p) > 4*sd {
			t.Errorf("a=%g: %d of %d samples distinguish (%.4f), want (2/π)arctan(2a) = %.4f ± %.4f", a, differ, n, got, p, 4*sd)
		}
	}
	for _, a := range []float64{0, -1, 1.5, math.NaN(), math.Inf(1)} {
		if _, _, err := Lemma16Pair(a); !errors.Is(err, ErrConfig) {
			t.Errorf("a=%v: err %v", a, err)
		}
	}
}

func TestPlantedReversible6SAT(t *testing.T) {
	f, plant, err := PlantedReversible6SAT(10, 12, NewRand(3))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Clauses) != 24 || f.Check(6) != nil || !f.ClosedUnderComplement() {
		t.Fatalf("formula %+v: check %v, closed %v", f, f.Check(6), f.ClosedUnderComplement())
	}
	comp := make([]bool, len(plant))
	for i, b := range plant {
		comp[i] = !b
	}
	if !f.Satisfies(plant) || !f.Satisfies(comp) || !f.Complement().Satisfies(plant) {
		t.Fatal("the plant, its complement or the complemented formula fails")
	}
	g, plant2, _ := PlantedReversible6SAT(10, 12, NewRand(3))
	if clauseKey(g.Clauses[5]) != clauseKey(f.Clauses[5]) || plant2[3] != plant[3] {
		t.Fatal("not reproducible from the seed")
	}
	// Dropping a complement breaks closure.
	h := Formula{Vars: f.Vars, Clauses: f.Clauses[:3]}
	if h.ClosedUnderComplement() {
		t.Fatal("an odd clause list reported closed")
	}
	if _, _, err := PlantedReversible6SAT(5, 1, NewRand(1)); !errors.Is(err, ErrConfig) {
		t.Fatalf("5 variables: %v", err)
	}
	if err := (Formula{Vars: 6, Clauses: []Clause{{1, 2, 3, 4, 5, -5}}}).Check(6); !errors.Is(err, ErrConfig) {
		t.Fatalf("repeated variable: %v", err)
	}
}

// The reduction behind [BJW19, Thm 2] (§3): for a formula closed under
// complementation and a satisfying assignment ξ, V = [x; y] with x = (ξ, 1,
// −1/2), y = (−ξ, −1/2, 1) gives [1, 1]·f(VX) = A exactly; with the
// variable-α rows, V = [[x, 1], [y, −1]]. An assignment that falsifies a
// clause does not.
func TestSATReduction(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		f, plant, err := PlantedReversible6SAT(8, 6, NewRand(seed))
		if err != nil {
			t.Fatal(err)
		}
		for _, varAlpha := range []bool{false, true} {
			h, err := SATReduction(f, varAlpha)
			if err != nil {
				t.Fatal(err)
			}
			rows, d := h.X.Dims()
			wantD, wantRows := 10, 12+2*8+5
			if varAlpha {
				wantD, wantRows = 11, wantRows+2
			}
			if d != wantD || rows != wantRows || h.NumP != 12 {
				t.Fatalf("X is %d×%d with %d clause rows, want %d×%d with 12", rows, d, h.NumP, wantRows, wantD)
			}
			net, err := h.Witness(plant)
			if err != nil {
				t.Fatal(err)
			}
			if Y := forward(t, net, h.X); !mat.Equal(Y, h.Y) {
				t.Fatalf("seed %d varAlpha %v: the witness does not reproduce A exactly", seed, varAlpha)
			}
			if varAlpha {
				// α may be any positive pair: rescale the rows.
				V := mat.DenseCopyOf(net.Layers[0].Weight)
				for j := 0; j < d; j++ {
					V.Set(0, j, V.At(0, j)*2)
					V.Set(1, j, V.At(1, j)*0.25)
				}
				Y := forward(t, nn.NewTwoLayer(V, mat.NewDense(1, 2, []float64{0.5, 4})), h.X)
				if !mat.EqualApprox(Y, h.Y, 1e-15) {
					t.Fatal("rescaled (α, V) does not reproduce A'")
				}
			}

			// Falsify clause 0: each of its literals false.
			bad := append([]bool(nil), plant...)
			for _, l := range f.Clauses[0] {
				bad[abs(l)-1] = l < 0
			}
			net, _ = h.Witness(bad)
			if Y := forward(t, net, h.X); Y.At(0, 0) == h.Y.At(0, 0) {
				t.Fatalf("seed %d: an assignment falsifying clause 0 still fits its row", seed)
			}
		}
	}
	f, _, _ := PlantedReversible6SAT(8, 3, NewRand(1))
	f.Clauses = f.Clauses[:5]
	if _, err := SATReduction(f, false); !errors.Is(err, ErrConfig) {
		t.Fatalf("not closed: %v", err)
	}
	h, _ := SATReduction(Formula{Vars: 6, Clauses: []Clause{{1, 2, 3, 4, 5, 6}, {-1, -2, -3, -4, -5, -6}}}, false)
	if _, err := h.Witness([]bool{true}); !errors.Is(err, ErrShape) {
		t.Fatalf("short assignment: %v", err)
	}
}
