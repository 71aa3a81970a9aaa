package compress

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/nn"
)

func TestRankGrid(t *testing.T) {
	cases := map[int][]int{
		0:   nil,
		1:   {1},
		2:   {1, 2},
		9:   {1, 2, 3, 4, 6, 8, 9},
		309: {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 309},
	}
	for top, want := range cases {
		if got := rankGrid(top); !slices.Equal(got, want) {
			t.Errorf("rankGrid(%d) = %v, want %v", top, got, want)
		}
	}
}

// TestMeasuredAllocationsWithinBudget: every measured allocation stays
// within the budget, reports what it stores, and the measured ones carry
// their profiles.
func TestMeasuredAllocationsWithinBudget(t *testing.T) {
	net, x, _ := teacher(1)
	ctx := context.Background()
	for _, alloc := range []Allocation{AllocSensitivity, AllocASVD, AllocSVDLLM2} {
		for _, method := range []Method{MethodData, MethodSVD} {
			for _, keep := range []float64{0.12, 0.3, 0.7, 1} {
				for _, seq := range []bool{false, true} {
					res, err := CompressMLP(ctx, net, x, Options{Method: method, Keep: keep, Sequential: seq, Allocation: alloc})
					if err != nil {
						t.Fatalf("%s %s keep %g: %v", alloc, method, keep, err)
					}
					if res.Params > res.Budget {
						t.Fatalf("%s %s keep %g: %d parameters for a budget of %d", alloc, method, keep, res.Params, res.Budget)
					}
					if got := res.Model.NumParams(); got != res.Params {
						t.Fatalf("%s: model has %d parameters, report says %d", alloc, got, res.Params)
					}
					if (alloc != AllocSVDLLM2) != (len(res.Profiles) > 0) {
						t.Fatalf("%s: %d profiles", alloc, len(res.Profiles))
					}
					// The budget is spent: no layer could take one more
					// rank (or turn dense) within it, except where the
					// rule stops by design (ASVD's threshold).
					if alloc == AllocSensitivity && keep < 1 {
						for _, l := range res.Layers {
							if l.Dense {
								continue
							}
							if l.Rank < l.MaxRank && res.Params+(l.In+l.Out) <= res.Budget && (l.Rank+1)*(l.In+l.Out)+l.Out < l.DenseParams {
								t.Fatalf("keep %g: layer %d left at rank %d with %d parameters spare", keep, l.Layer, l.Rank, res.Budget-res.Params)
							}
						}
					}
				}
			}
		}
	}
}

func TestUnknownAllocationRefused(t *testing.T) {
	net, x, _ := teacher(2)
	for _, a := range []Allocation{"sensitive", "ASVD", "svd-llm"} {
		o := Options{Keep: 0.3, Allocation: a}
		if err := o.Validate(); !errors.Is(err, ErrInput) {
			t.Errorf("Validate(%q) = %v, want ErrInput", a, err)
		}
		if _, err := CompressMLP(context.Background(), net, x, o); !errors.Is(err, ErrInput) {
			t.Errorf("CompressMLP(%q) = %v, want ErrInput", a, err)
		}
	}
	if _, _, err := allocateMeasured([]layerCost{{perRank: 10, dense: 100, maxRank: 5}}, nil, nil, 50, AllocGlobal); !errors.Is(err, ErrInput) {
		t.Errorf("allocateMeasured(global) = %v, want ErrInput", err)
	}
}

// sensitiveNet is a 30-30-30-30 ReLU network in which spectral energy and
// relevance to the logits disagree. Layer 0 has a decaying output spectrum
// (s_k = 0.8^k along orthonormal directions u_k), and layer 1 reads only its
// minor directions u_8 … u_11 (weights 1/s_k) into four relevant outputs of
// unit scale, plus its top directions u_0 … u_7 into eight outputs of
// smaller scale (0.6) that layer 2 ignores: layer 2 reads the four relevant
// outputs only. So layer 0 needs rank 12 although its energy sits in a few
// directions, and layer 1 needs rank 4 although a spectral rule sees eight
// more directions worth keeping. Biases of +3 keep the hidden ReLUs active
// on the calibration inputs (the network is affine there), and the logits
// are centred on the calibration rows.
func sensitiveNet(seed uint64) (*nn.MLP, *mat.Dense, *mat.Dense) {
	rng := rand.New(rand.NewPCG(seed, 17))
	const d = 30
	orth := func() *mat.Dense {
		var qr mat.QR
		qr.Factorize(testutil.RandDense(rng, d, d))
		var q mat.Dense
		qr.QTo(&q)
		return &q
	}
	s := make([]float64, d)
	read := make([]float64, d)
	for k := range s {
		s[k] = math.Pow(0.8, float64(k))
		switch {
		case k < 8:
			read[k] = 0.6 / s[k] // → outputs v_4 … v_11, ignored downstream
		case k < 12:
			read[k] = 1 / s[k] // → outputs v_0 … v_3, the relevant ones
		}
	}
	// Row convention W (in×out); the layer weight is Wᵀ.
	a, u, v, c := orth(), orth(), orth(), orth()
	w0 := mul(mul(a, mat.NewDiagDense(d, s)), u.T())
	// Input direction u_k goes to output direction v_perm(k).
	perm := mat.NewDense(d, d, nil)
	for k := 0; k < d; k++ {
		switch {
		case k < 8:
			perm.Set(k, k+4, 1)
		case k < 12:
			perm.Set(k, k-8, 1)
		default:
			perm.Set(k, k, 1)
		}
	}
	w1 := mul(mul(mul(u, mat.NewDiagDense(d, read)), perm), v.T())
	keep4 := make([]float64, d)
	for k := 0; k < 4; k++ {
		keep4[k] = 1
	}
	w2 := mul(mul(v, mat.NewDiagDense(d, keep4)), c)
	bias := func(b float64) []float64 {
		out := make([]float64, d)
		for i := range out {
			out[i] = b
		}
		return out
	}
	net := &nn.MLP{Layers: []nn.Layer{
		{Weight: mat.DenseCopyOf(w0.T()), Bias: bias(3), Act: nn.ReLU},
		{Weight: mat.DenseCopyOf(w1.T()), Bias: bias(3), Act: nn.ReLU},
		{Weight: mat.DenseCopyOf(w2.T()), Bias: bias(0), Act: nn.Identity},
	}}
	x, h := testutil.RandDense(rng, 600, d), testutil.RandDense(rng, 400, d)
	mean := colMeans(net.Forward(x))
	for i := range mean {
		net.Layers[2].Bias[i] = -mean[i]
	}
	return net, x, h
}

// TestSensitivityFindsTheSensitiveLayer is the claim behind
// AllocSensitivity: where one layer's error is amplified downstream, the
// measured rule gives that layer more rank than the spectral (global) rule
// and the network's output is closer to the original at the same budget,
// on the calibration rows and on held-out rows.
func TestSensitivityFindsTheSensitiveLayer(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		net, x, h := sensitiveNet(seed)
		ref := net.Forward(h)
		refCal := net.Forward(x)
		relErr := func(a, b *mat.Dense) float64 { return diffNorm(a, b) / mat.Norm(b, 2) }
		for _, keep := range []float64{0.47, 0.55} {
			errs := map[Allocation][2]float64{}
			ranks := map[Allocation][]int{}
			for _, alloc := range []Allocation{AllocGlobal, AllocSensitivity} {
				res, err := CompressMLP(context.Background(), net, x, Options{Keep: keep, Allocation: alloc})
				if err != nil {
					t.Fatal(err)
				}
				errs[alloc] = [2]float64{relErr(res.Model.Forward(x), refCal), relErr(res.Model.Forward(h), ref)}
				for _, l := range res.Layers {
					r := l.Rank
					if l.Dense {
						r = l.MaxRank
					}
					ranks[alloc] = append(ranks[alloc], r)
				}
			}
			g, s := errs[AllocGlobal], errs[AllocSensitivity]
			t.Logf("seed %d keep %g: ranks global %v sensitivity %v; output error (calibration, held-out) global %.4f %.4f, sensitivity %.4f %.4f",
				seed, keep, ranks[AllocGlobal], ranks[AllocSensitivity], g[0], g[1], s[0], s[1])
			if ranks[AllocSensitivity][0] <= ranks[AllocGlobal][0] {
				t.Errorf("seed %d keep %g: the sensitive first layer gets rank %d from the sensitivity rule, %d from the global rule",
					seed, keep, ranks[AllocSensitivity][0], ranks[AllocGlobal][0])
			}
			if !(s[0] < 0.5*g[0] && s[1] < 0.5*g[1]) {
				t.Errorf("seed %d keep %g: output error with the sensitivity rule (%.4f, %.4f) not half the global rule's (%.4f, %.4f)",
					seed, keep, s[0], s[1], g[0], g[1])
			}
		}
	}
}

// The two baselines' rules, on hand-made measurements: ASVD's common
// threshold and SVD-LLM V2's 1/log-loss fractions.
func TestBaselineRules(t *testing.T) {
	costs := []layerCost{
		{perRank: 20, fixed: 10, dense: 110, maxRank: 10},  // worth factoring up to rank 4
		{perRank: 20, fixed: 10, dense: 2010, maxRank: 50}, // up to rank 49
	}
	curve := func(top int, f func(r int) float64) []float64 {
		c := make([]float64, top)
		for r := 1; r <= top; r++ {
			c[r-1] = f(r)
		}
		return c
	}
	curves := [][]float64{
		curve(4, func(r int) float64 { return math.Pow(0.5, float64(r)) }),
		curve(49, func(r int) float64 { return 0.2 * math.Pow(0.9, float64(r)) }),
	}
	for _, budget := range []int{60, 300, 700, 1500} {
		ranks, total, err := allocateMeasured(costs, curves, nil, budget, AllocASVD)
		if err != nil {
			t.Fatal(err)
		}
		if total > budget {
			t.Fatalf("budget %d: %d parameters", budget, total)
		}
		// The threshold is the largest error among the chosen steps; every
		// layer must be at the smallest rank whose error is at or below it.
		errAt := func(i, r int) float64 {
			if r == 0 {
				return 0
			}
			return curves[i][r-1]
		}
		th := math.Max(errAt(0, ranks[0]), errAt(1, ranks[1]))
		for i, r := range ranks {
			if r > 1 && errAt(i, r-1) <= th {
				t.Fatalf("budget %d: layer %d at rank %d although rank %d is under the threshold %g", budget, i, r, r-1, th)
			}
		}
		t.Logf("asvd-search budget %d: ranks %v, %d parameters, threshold %.4f", budget, ranks, total, th)
	}
	// SVD-LLM V2: the layer with the larger truncation loss keeps the
	// larger fraction of its parameters.
	fits := []*Fit{{S: []float64{3, 2, 1, 0.5}, Target: 1e6}, {S: []float64{3, 2, 1, 0.5}, Target: 1e2}}
	big := []layerCost{{perRank: 20, fixed: 10, dense: 2010, maxRank: 50}, {perRank: 20, fixed: 10, dense: 2010, maxRank: 50}}
	ranks, total, err := allocateMeasured(big, nil, fits, 1200, AllocSVDLLM2)
	if err != nil {
		t.Fatal(err)
	}
	if total > 1200 || !(ranks[0] > ranks[1]) || total < 1200-2*20 {
		t.Fatalf("svd-llm-v2: ranks %v, %d parameters of 1200 (the layer losing 1e6 should keep more than the one losing 1e2)", ranks, total)
	}
}
