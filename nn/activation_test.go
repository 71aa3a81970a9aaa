package nn

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func TestParseActivation(t *testing.T) {
	for in, want := range map[string]Activation{
		"relu": ReLU, " ReLU ": ReLU, "identity": Identity, "reluexp": RectExp, "RELUEXP": RectExp,
		"relupow2": "relupow2", "relupow2.0": "relupow2", "relupow3": "relupow3", "relupow0.5": "relupow0.5",
		"relupow.5": "relupow0.5", "relupow1": ReLU, "relupow1e-1": "relupow0.1",
	} {
		got, err := ParseActivation(in)
		if err != nil || got != want {
			t.Errorf("ParseActivation(%q) = %q, %v; want %q", in, got, err, want)
		}
		if !got.Valid() {
			t.Errorf("%q is not Valid", got)
		}
	}
	for _, in := range []string{"", "tanh", "relupow", "relupow0", "relupow-2", "relupowinf", "relupownan", "relupow2x"} {
		if a, err := ParseActivation(in); err == nil {
			t.Errorf("ParseActivation(%q) = %q, want an error", in, a)
		}
	}
	// Non-canonical spellings are not Valid: == must mean the same function.
	for _, a := range []Activation{"relupow2.0", "relupow1", "ReLU", "relupow-1"} {
		if a.Valid() {
			t.Errorf("%q is Valid, want not", a)
		}
	}
	if RectPow(2) != "relupow2" || RectPow(0.5) != "relupow0.5" || RectPow(1) != ReLU {
		t.Fatal("RectPow names")
	}
}

func TestActivationFunctions(t *testing.T) {
	acts := []Activation{ReLU, RectPow(2), RectPow(3), RectPow(0.5), RectPow(1.7), RectExp}
	closed := map[Activation]func(float64) float64{
		ReLU:         func(x float64) float64 { return x },
		RectPow(2):   func(x float64) float64 { return x * x },
		RectPow(3):   func(x float64) float64 { return x * x * x },
		RectPow(0.5): math.Sqrt,
		RectPow(1.7): func(x float64) float64 { return math.Pow(x, 1.7) },
		RectExp:      func(x float64) float64 { return math.Exp(x) - 1 },
	}
	for _, a := range acts {
		f, df, inv := a.Func(), a.Deriv(), a.Inverse()
		if !a.Rectified() {
			t.Fatalf("%s not rectified", a)
		}
		for _, x := range []float64{-3, -1e-9, 0, math.NaN()} {
			if v := f(x); v != 0 {
				t.Errorf("%s(%v) = %v, want 0", a, x, v)
			}
		}
		for _, x := range []float64{1e-3, 0.3, 1, 2.5} {
			if got, want := f(x), closed[a](x); math.Abs(got-want) > 1e-14*math.Max(1, want) {
				t.Errorf("%s(%v) = %v, want %v", a, x, got, want)
			}
			if got := a.Apply(x); got != f(x) {
				t.Errorf("%s.Apply(%v) = %v, Func gives %v", a, x, got, f(x))
			}
			h := 1e-6 * x
			num := (f(x+h) - f(x-h)) / (2 * h)
			if d := df(x); math.Abs(d-num) > 1e-6*math.Max(1, math.Abs(d)) {
				t.Errorf("%s′(%v) = %v, finite difference %v", a, x, d, num)
			}
			if back := inv(f(x)); math.Abs(back-x) > 1e-13*math.Max(1, x) {
				t.Errorf("%s⁻¹(%s(%v)) = %v", a, a, x, back)
			}
		}
	}
	if deg, ok := RectPow(3).Homogeneity(); !ok || deg != 3 {
		t.Fatal("relupow3 homogeneity")
	}
	if deg, ok := ReLU.Homogeneity(); !ok || deg != 1 {
		t.Fatal("relu homogeneity")
	}
	if _, ok := RectExp.Homogeneity(); ok {
		t.Fatal("reluexp claims a scaling symmetry")
	}
	if Identity.Rectified() {
		t.Fatal("identity is not rectified")
	}
}

// scrambleDeg permutes the hidden units of a two-layer network and scales
// unit j's row by s_j and its output column by s_j^{−deg}.
func scrambleDeg(rng *rand.Rand, m *MLP, deg float64) *MLP {
	c := m.Clone()
	V, U := c.Layers[0].Weight, c.Layers[1].Weight
	V0, U0 := mat.DenseCopyOf(V), mat.DenseCopyOf(U)
	k := V.RawMatrix().Rows
	r, _ := U.Dims()
	for j, p := range rng.Perm(k) {
		s := math.Exp(0.7 * rng.NormFloat64())
		row := V.RawRowView(j)
		for a, v := range V0.RawRowView(p) {
			row[a] = v * s
		}
		for a := 0; a < r; a++ {
			U.Set(a, j, U0.At(a, p)*math.Pow(s, -deg))
		}
	}
	return c
}

func TestCanonicalRectified(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	x := randDense(rng, 200, 6)
	for _, act := range []Activation{RectPow(2), RectPow(3), RectPow(0.5)} {
		m := NewTwoLayerAct(randDense(rng, 4, 6), randDense(rng, 3, 4), act)
		c := m.Canonical()
		if d := maxRelDiff(c.Forward(x), m.Forward(x)); d > 1e-12 {
			t.Fatalf("%s: Canonical changes the function by %g", act, d)
		}
		for j := 0; j < 4; j++ {
			if n := mat.Norm(c.Layers[0].Weight.RowView(j), 2); math.Abs(n-1) > 1e-14 {
				t.Fatalf("%s: row %d has norm %v", act, j, n)
			}
		}
		deg, _ := act.Homogeneity()
		s := scrambleDeg(rng, m, deg)
		if d := maxRelDiff(s.Forward(x), m.Forward(x)); d > 1e-12 {
			t.Fatalf("%s: scramble changed the function by %g", act, d)
		}
		cs := s.Canonical()
		for i := range c.Layers {
			if d := maxAbsDiff(cs.Layers[i].Weight, c.Layers[i].Weight); d > 1e-12 {
				t.Fatalf("%s layer %d: canonical forms differ by %g", act, i, d)
			}
		}
		// Scaling with the ReLU's degree 1 instead of c is a different
		// function: the test can fail.
		wrong := scrambleDeg(rng, m, 1)
		if d := maxRelDiff(wrong.Forward(x), m.Forward(x)); d < 1e-3 {
			t.Fatalf("%s: degree-1 scaling left the function unchanged (%g)", act, d)
		}
	}

	// reluexp: no scaling symmetry. Canonical keeps the row norms (the
	// function depends on them) and only sorts the units.
	V := randDense(rng, 4, 6)
	m := NewTwoLayerAct(V, randDense(rng, 3, 4), RectExp)
	c := m.Canonical()
	if d := maxRelDiff(c.Forward(x), m.Forward(x)); d > 1e-12 {
		t.Fatalf("reluexp: Canonical changes the function by %g", d)
	}
	norms := func(W *mat.Dense) []float64 {
		var out []float64
		for j := 0; j < W.RawMatrix().Rows; j++ {
			out = append(out, mat.Norm(W.RowView(j), 2))
		}
		return out
	}
	got, want := norms(c.Layers[0].Weight), norms(V)
	for _, g := range got {
		found := false
		for _, w := range want {
			found = found || math.Abs(g-w) < 1e-15*w
		}
		if !found {
			t.Fatalf("reluexp: Canonical changed a row norm: %v vs %v", got, want)
		}
	}
	p := m.Clone()
	p.Layers[0].Weight = mat.NewDense(4, 6, nil)
	p.Layers[1].Weight = mat.NewDense(3, 4, nil)
	for j, q := range []int{2, 0, 3, 1} {
		p.Layers[0].Weight.SetRow(j, m.Layers[0].Weight.RawRowView(q))
		p.Layers[1].Weight.SetCol(j, mat.Col(nil, q, m.Layers[1].Weight))
	}
	cp := p.Canonical()
	for i := range c.Layers {
		if !mat.Equal(cp.Layers[i].Weight, c.Layers[i].Weight) {
			t.Fatalf("reluexp: a permuted network has another canonical form (layer %d)", i)
		}
	}
	// Halving every row (and doubling U) changes an exp network: its
	// canonical form must not hide that.
	h := m.Clone()
	h.Layers[0].Weight.Scale(0.5, h.Layers[0].Weight)
	h.Layers[1].Weight.Scale(2, h.Layers[1].Weight)
	if d := maxRelDiff(h.Forward(x), m.Forward(x)); d < 1e-3 {
		t.Fatalf("reluexp: rescaling left the function unchanged (%g)", d)
	}
	if d := maxAbsDiff(h.Canonical().Layers[0].Weight, c.Layers[0].Weight); d < 1e-3 {
		t.Fatal("reluexp: Canonical identified two different networks")
	}
}
