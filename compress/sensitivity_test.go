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
	if _, _, err := allocateMeasured([]layerCost{{perRank: 10, dense: 100, maxRank: 5}}, nil, 50, AllocGlobal); !errors.Is(err, ErrInput) {
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

// ASVD's rule on hand-made measurements: a common threshold.
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
		ranks, total, err := allocateMeasured(costs, curves, budget, AllocASVD)
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
}

// SVD-LLM V2's heterogeneous compression ratio allocation [WAWSZ25]
// on hand-made losses: the classifier stays dense, a layer alone of its
// type keeps the uniform rank, and within a group of same-type layers the
// removed fractions are the paper's |G|·R·(1/log L_i)/Σ_j 1/log L_j, the
// group keeping what the uniform rule gives it.
func TestSVDLLM2Allocation(t *testing.T) {
	same := layerCost{perRank: 200, fixed: 100, dense: 10100, maxRank: 100} // 100×100 with a bias
	costs := []layerCost{same, same, same, same,
		{perRank: 300, fixed: 100, dense: 20100, maxRank: 100}, // 200×100, alone of its type
		{perRank: 110, fixed: 10, dense: 1010, maxRank: 10}}    // the classifier
	types := []string{"q", "q", "q", "k", "fc", "head"}
	// L_i = √Target (no singular values given): 1/log L_i ∝ 1/(ln L_i²).
	losses := []float64{1e2, 1e4, 1e8, 1e6, 1e3, 1e3}
	fits := make([]*Fit, len(losses))
	for i, l := range losses {
		fits[i] = &Fit{Target: l}
	}
	budget := 30000
	ranks, total, err := allocateSVDLLM2(costs, fits, types, budget)
	if err != nil {
		t.Fatal(err)
	}
	if total > budget || ranks[5] != 0 {
		t.Fatalf("ranks %v, %d parameters of %d: over the budget or the classifier factored", ranks, total, budget)
	}
	// The uniform rule on the budget left by the dense classifier.
	uni, _, err := allocate(costs[:5], nil, budget-costs[5].dense, AllocUniform)
	if err != nil {
		t.Fatal(err)
	}
	if ranks[3] != uni[3] || ranks[4] != uni[4] {
		t.Fatalf("ranks %v, uniform %v: the layers alone of their type moved", ranks, uni)
	}
	kept, group := 0, 0
	for i := 0; i < 3; i++ {
		kept += costs[i].factoredParams(ranks[i])
		group += costs[i].factoredParams(uni[i])
	}
	if kept > group || kept < group-3*same.perRank {
		t.Fatalf("the q group keeps %d parameters, the uniform rule %d", kept, group)
	}
	if !(ranks[0] < ranks[1] && ranks[1] < ranks[2]) {
		t.Fatalf("ranks %v: a larger truncation loss must keep a larger rank", ranks)
	}
	// The paper's fractions at the group's target ratio R.
	r := 1 - float64(group)/float64(3*same.dense)
	var sum float64
	for i := 0; i < 3; i++ {
		sum += 1 / math.Log(math.Sqrt(losses[i]))
	}
	for i := 0; i < 3; i++ {
		removed := 3 * r * (1 / math.Log(math.Sqrt(losses[i]))) / sum
		want := ((1-removed)*float64(same.dense) - float64(same.fixed)) / float64(same.perRank)
		if math.Abs(float64(ranks[i])-want) > 2 {
			t.Errorf("layer %d: rank %d, the paper's fraction %.3f removed gives rank %.2f", i, ranks[i], removed, want)
		}
	}
	t.Logf("ranks %v (uniform %v), %d parameters of %d", ranks, uni, total, budget)
}

// matrixTypes groups the matrices of one type across blocks: same name but
// for the block index, and same shape.
func TestMatrixTypes(t *testing.T) {
	w := func(d, d2 int) *mat.Dense { return mat.NewDense(d, d2, nil) }
	got := matrixTypes([]sourceLayer{
		{w: w(8, 8), name: `node "/blocks.0/attn/q/MatMul"`},
		{w: w(8, 8), name: `node "/blocks.1/attn/q/MatMul"`},
		{w: w(8, 8), name: `node "/blocks.0/attn/k/MatMul"`},
		{w: w(8, 8), name: `node "/blocks.12/mlp/fc1/MatMul"`},
		{w: w(8, 8), name: `node "/blocks.12/mlp/fc2/MatMul"`},
		{w: w(8, 8), name: `node "/blocks_7/mlp/fc2/MatMul"`},
		{w: w(8, 8)}, {w: w(8, 8)}, {w: w(8, 4)},
	})
	want := []int{0, 0, 2, 3, 4, 5, 6, 6, 8} // the first layer of each type
	for i, j := range want {
		for k := range got {
			if (got[k] == got[i]) != (want[k] == j) {
				t.Fatalf("types %q: layers %d and %d", got, i, k)
			}
		}
	}
}

// AllocSVDLLM2 ranks by the theoretical truncation loss whatever method
// then fits the layers. In a 40-30-30-30-5 ReLU network whose first layer
// has 3 live units, the 30×30 layers form a group; the first of them sees
// rank-3 inputs, so its loss ‖XW − XŴ‖ at the uniform rank is nil and the
// rule cuts it the most, while its weight error ‖W − Ŵ‖ (MethodSVD's
// residual) is as large as the other's. The ranks with MethodSVD are those
// with MethodSVDLLM2.
func TestSVDLLM2LossIsTheoretical(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	sizes := []int{40, 30, 30, 30, 5}
	net := &nn.MLP{}
	for i := 0; i+1 < len(sizes); i++ {
		w := testutil.RandDense(rng, sizes[i+1], sizes[i])
		act := nn.ReLU
		if i == 0 {
			for j := 3; j < sizes[1]; j++ {
				w.SetRow(j, make([]float64, sizes[0]))
			}
		}
		if i+2 == len(sizes) {
			act = nn.Identity
		}
		net.Layers = append(net.Layers, nn.Layer{Weight: w, Bias: make([]float64, sizes[i+1]), Act: act})
	}
	x := testutil.RandDense(rng, 500, sizes[0])
	ranks := map[Method][]int{}
	for _, m := range []Method{MethodSVDLLM2, MethodSVD} {
		res, err := CompressMLP(context.Background(), net, x, Options{Keep: 0.5, Method: m, Allocation: AllocSVDLLM2})
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range res.Layers {
			ranks[m] = append(ranks[m], l.Rank)
		}
	}
	if !slices.Equal(ranks[MethodSVD], ranks[MethodSVDLLM2]) || ranks[MethodSVD][1] != 1 || ranks[MethodSVD][2] <= 1 {
		t.Fatalf("ranks %v", ranks)
	}
	t.Logf("ranks %v", ranks[MethodSVD])
}
