package depth2

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/vec"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/synth"
)

// The same seed gives bit-identical results at any GOMAXPROCS.
func TestFitDeterministicAcrossGOMAXPROCS(t *testing.T) {
	rng := synth.NewRand(11)
	teacher, _ := synth.Depth2Teacher(synth.Depth2Config{D: 5, M: 2}, rng)
	X, _ := synth.GaussianInputs(40000, 5, nil, rng)
	Y, _, _ := synth.Depth2Data(teacher, X, synth.Noise{Kind: "gaussian", Level: 0.05}, rng)
	fit := func(procs int) *Result {
		prev := runtime.GOMAXPROCS(procs)
		defer runtime.GOMAXPROCS(prev)
		res, err := Fit(context.Background(), X, Y, Options{Hidden: 2, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a, b := fit(1), fit(2)
	for _, pair := range [][2]*mat.Dense{{a.Model.W, b.Model.W}, {a.Model.A, b.Model.A}, {a.Moment.W, b.Moment.W}} {
		if !slices.Equal(pair[0].RawMatrix().Data, pair[1].RawMatrix().Data) {
			t.Fatal("GOMAXPROCS changes the result")
		}
	}
	if !slices.Equal(a.Model.B, b.Model.B) {
		t.Fatal("GOMAXPROCS changes the biases")
	}
}

// ResolveSigns undoes arbitrary sign flips of a full-rank network exactly.
func TestResolveSignsFullRank(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 1))
	net := randomNet(6, 4, []float64{0.3, -0.8, 1.2, 0}, rng)
	net.C = []float64{0}
	flipped := net.FlipUnit(1).FlipUnit(3)
	out, which, rest, ties := ResolveSigns(flipped)
	if rest > 1e-12 || ties != 1 || !slices.Equal(which, []int{1, 3}) {
		t.Fatalf("flipped %v, rest %v, ties %d", which, rest, ties)
	}
	for i := 0; i < 4; i++ {
		if d := vec.Dot(out.W.RawRowView(i), net.W.RawRowView(i)); math.Abs(d-1) > 1e-14 || math.Abs(out.B[i]-net.B[i]) > 1e-14 {
			t.Errorf("unit %d not restored", i)
		}
	}
}

// Bad input gets errors wrapping ErrInput.
func TestFitBadInput(t *testing.T) {
	rng := synth.NewRand(12)
	X, _ := synth.GaussianInputs(3000, 4, nil, rng)
	Y := mat.NewDense(3000, 1, nil)
	for i := 0; i < 3000; i++ {
		Y.Set(i, 0, math.Max(X.At(i, 0), 0))
	}
	bad := mat.DenseCopyOf(Y)
	bad.Set(10, 0, math.NaN())
	cases := []struct {
		name string
		X, Y *mat.Dense
		opt  Options
	}{
		{"nan", X, bad, Options{}},
		{"rows", X, mat.NewDense(10, 1, nil), Options{}},
		{"few samples", X, Y, Options{Hidden: 4}},
		{"too wide for ℓ=2", X, Y, Options{Hidden: 11, Order: 2}},
		{"order", X, Y, Options{Order: 3}},
		{"route", X, Y, Options{Route: "magic"}},
		{"overcomplete without width", X, Y, Options{Order: 2}},
	}
	for _, c := range cases {
		if _, err := Fit(context.Background(), c.X, c.Y, c.opt); !errors.Is(err, ErrInput) {
			t.Errorf("%s: error %v, want ErrInput", c.name, err)
		}
	}
}

// Several outputs with output biases (a trained MLP's logits): exact.
func TestFitMultiOutput(t *testing.T) {
	rng := synth.NewRand(13)
	cfg := synth.Depth2Config{D: 6, M: 3, Outputs: 3, OutputBias: true}
	teacher, err := synth.Depth2Teacher(cfg, rng)
	if err != nil {
		t.Fatal(err)
	}
	X, _ := synth.GaussianInputs(100000, 6, nil, rng)
	Y, _, _ := synth.Depth2Data(teacher, X, synth.Noise{}, rng)
	res, err := Fit(context.Background(), X, Y, Options{Hidden: 3, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Certificate.Met || res.Model.L != nil {
		t.Fatalf("certificate %+v, affine %v: %s %v", res.Certificate, res.Model.L != nil, res.Reason, res.Warnings)
	}
	truth, _ := nn.Depth2FromMLP(teacher)
	truth = truth.Normalize()
	got := res.Model
	for i := 0; i < 3; i++ {
		j := 0
		for j = 0; j < 3; j++ {
			if vec.Dot(got.W.RawRowView(j), truth.W.RawRowView(i)) > 1-1e-9 {
				break
			}
		}
		if j == 3 {
			t.Fatalf("unit %d not found", i)
		}
		for o := 0; o < 3; o++ {
			if math.Abs(got.A.At(o, j)-truth.A.At(o, i)) > 1e-9 {
				t.Errorf("A[%d,%d] = %v, want %v", o, i, got.A.At(o, j), truth.A.At(o, i))
			}
		}
	}
	for o := 0; o < 3; o++ {
		if math.Abs(got.C[o]-truth.C[o]) > 1e-9 {
			t.Errorf("C[%d] = %v, want %v", o, got.C[o], truth.C[o])
		}
	}
}

// Options.Validate accepts the zero value and every route, and names the
// option it refuses.
func TestOptionsValidate(t *testing.T) {
	if err := (Options{}).Validate(); err != nil {
		t.Errorf("zero Options: %v", err)
	}
	for _, r := range Routes {
		if err := (Options{Route: r}).Validate(); err != nil {
			t.Errorf("route %q: %v", r, err)
		}
	}
	for _, c := range []struct {
		opt  Options
		name string
	}{
		{Options{Route: "magic"}, "Options.Route"},
		{Options{Hidden: -1}, "Options.Hidden"},
		{Options{Order: 3}, "Options.Order"},
		{Options{CertTol: -1}, "Options.CertTol"},
		{Options{CertTol: math.NaN()}, "Options.CertTol"},
		{Options{CertTol: math.Inf(1)}, "Options.CertTol"},
		{Options{MaxIter: -1}, "Options.MaxIter"},
		{Options{Thresholds: Thresholds{Rank: math.Inf(1)}}, "Options.Thresholds.Rank"},
	} {
		err := c.opt.Validate()
		if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%+v: error %v, want ErrInput naming %s", c.opt, err, c.name)
		}
	}
}
