package depth2

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
)

// BiasZTol is the |z| above which TestBiases reports biases. With m·(d+1)
// statistics per test, 8 keeps the false alarm of a bias-free network far
// below 1e-9 even with heavy-tailed products, while PyTorch's default
// nn.Linear biases (U(−1/√fan_in, 1/√fan_in)) give |z| in the tens to
// hundreds at n = 2e5.
const BiasZTol = 8

// BiasTest is the result of TestBiases.
type BiasTest struct {
	// OutputZ is the largest |z| over outputs j of the difference
	// E[y_j] − E[y_j·(‖x‖² − d)]. For a bias-free ReLU network and
	// x ~ N(0, I) both terms equal Σ_i u_ji‖v_i‖/√(2π) (E[ReLU(z)] =
	// E[ReLU(z)(z² − 1)] = 1/√(2π)); an output bias c adds c_j to the first
	// only, and hidden biases break the equality too.
	OutputZ float64 `json:"output_z"`
	// OddZ is the largest |z| over outputs j and directions g of
	// E[y_j·He₃(g·x)], He₃(t) = t³ − 3t. ReLU's Hermite expansion has no
	// odd term beyond the linear one (ReLU(z) = z/2 + |z|/2), so this is 0
	// for a bias-free network; a hidden bias b_i gives unit i the He₃
	// coefficient −β·φ(β), β = b_i/‖v_i‖ (Stein's lemma). The directions
	// are the first moments E[y_j·x], which lie in the span of the hidden
	// weights, so the test looks where the units are.
	OddZ float64 `json:"odd_z"`
	// Biased reports max(OutputZ, OddZ) > BiasZTol.
	Biased bool `json:"biased"`
}

// TestBiases tells, from samples alone, whether Y = f(X) comes from a ReLU
// network without biases (f(x) = U·ReLU(V·x)) or with them (hidden b or
// output c), for x ~ N(0, I). It compares Hermite moments of Y with what a
// bias-free network implies (see BiasTest), each standardised by its own
// sampling error, so additive output noise independent of x does not move
// it. It reads X and Y twice (O(n·m·(d + m))) and is a screen, not a
// proof: biases too small for the sample size pass unseen (the bias-free
// learner's certificate then fails and says so). X must be standard
// Gaussian for the answer to mean anything; check that first.
func TestBiases(X, Y *mat.Dense) (BiasTest, error) {
	n, d, m, err := certify.CheckXY(X, Y)
	if err != nil {
		return BiasTest{}, err
	}
	if n < 100 {
		return BiasTest{}, fmt.Errorf("%w: the bias test needs at least 100 samples, got %d", ErrInput, n)
	}
	// Pass 1: Σ s·y and Σ s²y² with s = 1 − (‖x‖² − d), and the first
	// moments Σ y_j·x (the directions of pass 2).
	sy, s2y2 := make([]float64, m), make([]float64, m)
	G := mat.NewDense(m, d, nil) // row j: Σ_r y_rj·x_r
	for r := 0; r < n; r++ {
		x, y := X.RawRowView(r), Y.RawRowView(r)
		norm2 := 0.0
		for _, v := range x {
			norm2 += v * v
		}
		s := 1 - (norm2 - float64(d))
		for j, yj := range y {
			sy[j] += s * yj
			s2y2[j] += s * s * yj * yj
			floats.AddScaled(G.RawRowView(j), yj, x)
		}
	}
	dirs := 0
	for j := 0; j < m; j++ {
		g := G.RawRowView(j)
		if nrm := floats.Norm(g, 2); nrm > 0 {
			floats.Scale(1/nrm, g)
			copy(G.RawRowView(dirs), g)
			dirs++
		}
	}
	// Pass 2: Σ y_j·He₃(g_l·x) and its square, for every output j and
	// direction l.
	hy, h2y2 := make([]float64, dirs*m), make([]float64, dirs*m)
	proj := make([]float64, dirs)
	for r := 0; r < n; r++ {
		x, y := X.RawRowView(r), Y.RawRowView(r)
		for l := range proj {
			t := floats.Dot(G.RawRowView(l), x)
			proj[l] = t * (t*t - 3)
		}
		for l, h := range proj {
			row, row2 := hy[l*m:(l+1)*m], h2y2[l*m:(l+1)*m]
			for j, yj := range y {
				t := h * yj
				row[j] += t
				row2[j] += t * t
			}
		}
	}
	var res BiasTest
	for j := range sy {
		res.OutputZ = max(res.OutputZ, zScore(sy[j], s2y2[j], n))
	}
	for i := range hy {
		res.OddZ = max(res.OddZ, zScore(hy[i], h2y2[i], n))
	}
	res.Biased = max(res.OutputZ, res.OddZ) > BiasZTol
	return res, nil
}

// zScore is the mean of n values divided by its standard error, from their
// sum and sum of squares; 0 when the values are all zero.
func zScore(sum, sumSq float64, n int) float64 {
	mean := sum / float64(n)
	variance := sumSq/float64(n) - mean*mean
	if variance <= 0 {
		if mean == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return math.Abs(mean) / math.Sqrt(variance/float64(n))
}
