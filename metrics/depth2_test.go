package metrics

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/hermite"
	"github.com/relurec/relurec/nn"
)

// gl8 integrates f on [a, b] with composite 8-point Gauss–Legendre.
func gl8(f func(float64) float64, a, b float64, panels int) float64 {
	nodes := [8]float64{-0.9602898564975363, -0.7966664774136267, -0.5255324099163290, -0.1834346424956498,
		0.1834346424956498, 0.5255324099163290, 0.7966664774136267, 0.9602898564975363}
	weights := [8]float64{0.1012285362903763, 0.2223810344533745, 0.3137066458778873, 0.3626837833783620,
		0.3626837833783620, 0.3137066458778873, 0.2223810344533745, 0.1012285362903763}
	h := (b - a) / float64(panels)
	s := 0.0
	for p := 0; p < panels; p++ {
		mid := a + (float64(p)+0.5)*h
		for i := range nodes {
			s += weights[i] * f(mid+nodes[i]*h/2)
		}
	}
	return s * h / 2
}

// E[ReLU(X+b)·ReLU(Y+c)] = ∫ φ(x)·ReLU(x+b)·s·c_0((ρx + c)/s) dx, a 1-D
// integral with its kink at x = −b.
func reluCovQuad(b, c, rho float64) float64 {
	s := math.Sqrt(1 - rho*rho)
	f := func(x float64) float64 {
		return hermite.NormPDF(x) * math.Max(x+b, 0) * s * hermite.ReLUMean((rho*x+c)/s)
	}
	return gl8(f, -b, math.Max(-b, 0)+14, 2000)
}

// ReLUCovariance: the closed form matches a 1-D quadrature to 1e-12 and
// the ρ = ±1 limits are continuous.
func TestReLUCovarianceClosedForm(t *testing.T) {
	for _, bc := range [][2]float64{{0, 0}, {0.7, -0.4}, {-1.3, 2.1}, {2.5, 1.5}, {-2, -2.5}, {0.1, 3}} {
		b, c := bc[0], bc[1]
		for _, rho := range []float64{-0.99, -0.8, -0.3, 0, 0.2, 0.6, 0.93, 0.999} {
			got := reluCovUnit(b, c, rho)
			want := reluCovQuad(b, c, rho)
			if math.Abs(got-want) > 1e-12*math.Max(1, math.Abs(want)) {
				t.Errorf("b=%v c=%v ρ=%v: closed form %.15g, quadrature %.15g", b, c, rho, got, want)
			}
		}
		for _, lim := range []float64{1, -1} {
			near := reluCovUnit(b, c, lim*(1-1e-9))
			at := reluCovUnit(b, c, lim)
			if math.Abs(near-at) > 1e-4 {
				t.Errorf("b=%v c=%v: ρ→%v gives %v, the limit %v", b, c, lim, near, at)
			}
		}
	}
	// Scaling: non-unit rows.
	u, v := []float64{3, 4}, []float64{0, 2}
	want := 5 * 2 * reluCovUnit(1.0/5, -0.5/2, 0.8)
	if got := ReLUCovariance(u, 1, v, -0.5); math.Abs(got-want) > 1e-14 {
		t.Errorf("scaled covariance %v, want %v", got, want)
	}
}

func randomDepth2(d, m, p int, rng *rand.Rand) *nn.MLP {
	W := mat.NewDense(m, d, nil)
	A := mat.NewDense(p, m, nil)
	b := make([]float64, m)
	c := make([]float64, p)
	for i := range W.RawMatrix().Data {
		W.RawMatrix().Data[i] = rng.NormFloat64()
	}
	for i := range A.RawMatrix().Data {
		A.RawMatrix().Data[i] = rng.NormFloat64()
	}
	for i := range b {
		b[i] = rng.NormFloat64()
	}
	for i := range c {
		c[i] = rng.NormFloat64() * 0.3
	}
	return &nn.MLP{Layers: []nn.Layer{{Weight: W, Bias: b, Act: nn.ReLU}, {Weight: A, Bias: c, Act: nn.Identity}}}
}

// L2Depth2 (the oracle behind the Parseval test of [ATV21, Proposition
// B.1]) agrees with Monte
// Carlo within 4 standard errors, is zero for equal networks and symmetric.
func TestL2Depth2MonteCarlo(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for trial := 0; trial < 4; trial++ {
		d, p := 3+trial, 1+trial%2
		f := randomDepth2(d, 3+trial, p, rng)
		g := randomDepth2(d, 2+trial, p, rng)
		exact, err := L2Depth2(f, g)
		if err != nil {
			t.Fatal(err)
		}
		n := 200000
		X := mat.NewDense(n, d, nil)
		for i := range X.RawMatrix().Data {
			X.RawMatrix().Data[i] = rng.NormFloat64()
		}
		F, G := f.Forward(X), g.Forward(X)
		var sum, sum2 float64
		for q := 0; q < n; q++ {
			s := 0.0
			for j := 0; j < p; j++ {
				x := F.At(q, j) - G.At(q, j)
				s += x * x
			}
			sum += s
			sum2 += s * s
		}
		mean := sum / float64(n)
		se := math.Sqrt((sum2/float64(n) - mean*mean) / float64(n))
		if math.Abs(mean-exact) > 4*se {
			t.Errorf("trial %d: closed form %.5g, Monte Carlo %.5g ± %.2g", trial, exact, mean, se)
		}
		if z, _ := L2Depth2(f, f); z > 1e-12 {
			t.Errorf("L2(f, f) = %v", z)
		}
		if r, _ := L2Depth2(g, f); math.Abs(r-exact) > 1e-12*exact {
			t.Errorf("not symmetric: %v vs %v", r, exact)
		}
	}
	bad := &nn.MLP{Layers: []nn.Layer{{Weight: mat.NewDense(2, 3, nil), Act: nn.Identity}, {Weight: mat.NewDense(1, 2, nil), Act: nn.Identity}}}
	if _, err := L2Depth2(bad, bad); !errors.Is(err, ErrNotDepth2) {
		t.Errorf("identity activations: %v", err)
	}
}

func TestCompareDepth2(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	truth := randomDepth2(4, 5, 2, rng)
	// A permuted, rescaled copy with two units flipped.
	est := &nn.MLP{Layers: []nn.Layer{
		{Weight: mat.NewDense(5, 4, nil), Bias: make([]float64, 5), Act: nn.ReLU},
		{Weight: mat.NewDense(2, 5, nil), Bias: append([]float64(nil), truth.Layers[1].Bias...), Act: nn.Identity},
	}}
	perm := []int{3, 0, 4, 1, 2}
	for i, j := range perm {
		s := 0.5 + rng.Float64()
		xi := 1.0
		if i < 2 {
			xi = -1
		}
		row := mat.Row(nil, i, truth.Layers[0].Weight)
		for l := range row {
			row[l] *= s * xi
		}
		est.Layers[0].Weight.SetRow(j, row)
		est.Layers[0].Bias[j] = s * xi * truth.Layers[0].Bias[i]
		for t2 := 0; t2 < 2; t2++ {
			est.Layers[1].Weight.Set(t2, j, truth.Layers[1].Weight.At(t2, i)/s)
		}
	}
	e, err := CompareDepth2(truth, est, true)
	if err != nil {
		t.Fatal(err)
	}
	if e.MaxErr > 1e-12 {
		t.Errorf("flip-allowed error %v", e.MaxErr)
	}
	for i, j := range perm {
		if e.Perm[i] != j || e.Flipped[i] != (i < 2) {
			t.Errorf("unit %d matched %d (flipped %v), want %d (%v)", i, e.Perm[i], e.Flipped[i], j, i < 2)
		}
	}
	if e2, _ := CompareDepth2(truth, est, false); e2.MaxErr < 0.1 {
		t.Errorf("without flips the error should be large, got %v", e2.MaxErr)
	}
	// Fewer estimate units: the rest are missing.
	small := &nn.MLP{Layers: []nn.Layer{
		{Weight: mat.DenseCopyOf(truth.Layers[0].Weight.Slice(0, 3, 0, 4)), Bias: truth.Layers[0].Bias[:3], Act: nn.ReLU},
		{Weight: mat.DenseCopyOf(truth.Layers[1].Weight.Slice(0, 2, 0, 3)), Bias: truth.Layers[1].Bias, Act: nn.Identity},
	}}
	e3, err := CompareDepth2(truth, small, false)
	if err != nil {
		t.Fatal(err)
	}
	if e3.Missing != 2 || e3.MaxErr > 1e-12 || e3.Perm[3] != -1 || e3.Perm[4] != -1 {
		t.Errorf("missing units: %+v", e3)
	}
	// A dead unit (zero row) in the estimate is ignored, indices refer to
	// the networks as given.
	dead := &nn.MLP{Layers: []nn.Layer{
		{Weight: mat.NewDense(6, 4, nil), Bias: make([]float64, 6), Act: nn.ReLU},
		{Weight: mat.NewDense(2, 6, nil), Bias: append([]float64(nil), truth.Layers[1].Bias...), Act: nn.Identity},
	}}
	for i := 0; i < 5; i++ {
		dead.Layers[0].Weight.SetRow(i+1, truth.Layers[0].Weight.RawRowView(i))
		dead.Layers[0].Bias[i+1] = truth.Layers[0].Bias[i]
		dead.Layers[1].Weight.SetCol(i+1, mat.Col(nil, i, truth.Layers[1].Weight))
	}
	e4, err := CompareDepth2(truth, dead, false)
	if err != nil || e4.MaxErr > 1e-12 || e4.Extra != 0 || e4.Perm[0] != 1 || e4.Perm[4] != 5 {
		t.Errorf("dead unit: %+v, %v", e4, err)
	}
}
