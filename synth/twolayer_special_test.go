package synth

import (
	"errors"
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func TestOrthonormalRows(t *testing.T) {
	v, err := OrthonormalRows(6, 20, NewRand(1))
	if err != nil {
		t.Fatal(err)
	}
	var g mat.Dense
	g.Mul(v, v.T())
	for i := 0; i < 6; i++ {
		for j := 0; j < 6; j++ {
			want := 0.0
			if i == j {
				want = 1
			}
			if math.Abs(g.At(i, j)-want) > 1e-14 {
				t.Fatalf("V·Vᵀ[%d,%d] = %g, want %g", i, j, g.At(i, j), want)
			}
		}
	}
	w, _ := OrthonormalRows(6, 20, NewRand(1))
	if !mat.Equal(v, w) {
		t.Error("same seed gave different rows")
	}
	for _, c := range [][2]int{{0, 3}, {4, 3}} {
		if _, err := OrthonormalRows(c[0], c[1], NewRand(1)); !errors.Is(err, ErrConfig) {
			t.Errorf("k=%d d=%d: err = %v", c[0], c[1], err)
		}
	}
	if _, err := OrthonormalRows(2, 3, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("nil rng: err = %v", err)
	}
}

func TestPlanarOutputWeights(t *testing.T) {
	u, err := PlanarOutputWeights([]float64{0, math.Pi / 2, math.Pi}, []float64{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	want := mat.NewDense(2, 3, []float64{1, 0, -3, 0, 2, 0})
	if !mat.EqualApprox(u, want, 1e-15) {
		t.Errorf("U = %v, want %v", mat.Formatted(u), mat.Formatted(want))
	}
	for name, c := range map[string]struct {
		a, n []float64
		want error
	}{
		"empty":    {nil, nil, ErrConfig},
		"norms":    {[]float64{0, 1}, []float64{1}, ErrShape},
		"zero":     {[]float64{0}, []float64{0}, ErrConfig},
		"negative": {[]float64{0}, []float64{-1}, ErrConfig},
		"nan":      {[]float64{math.NaN()}, nil, ErrNotFinite},
	} {
		if _, err := PlanarOutputWeights(c.a, c.n); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", name, err, c.want)
		}
	}
}

func TestOrthonormalTeacher(t *testing.T) {
	u, _ := PlanarOutputWeights([]float64{0.3, 1.9, 0.3 + math.Pi, 4.4}, nil)
	m, err := OrthonormalTeacher(10, u, NewRand(2))
	if err != nil {
		t.Fatal(err)
	}
	if r, c := m.Layers[0].Weight.Dims(); r != 4 || c != 10 {
		t.Errorf("V is %d×%d, want 4×10", r, c)
	}
	if !mat.Equal(m.Layers[1].Weight, u) {
		t.Error("U was not kept")
	}
	if _, err := OrthonormalTeacher(3, u, NewRand(2)); !errors.Is(err, ErrConfig) {
		t.Errorf("k > d: err = %v", err)
	}
	if _, err := OrthonormalTeacher(10, nil, NewRand(2)); !errors.Is(err, ErrShape) {
		t.Errorf("nil U: err = %v", err)
	}
}
