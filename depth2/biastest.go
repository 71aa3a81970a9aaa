package depth2

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/internal/kern"
	"github.com/relurec/relurec/internal/outer"
)

// BiasZTol is the |z| above which TestBiases reports biases. With m·(d+1)
// statistics per test, 8 keeps the false alarm of a bias-free network far
// below 1e-9 even with heavy-tailed products, while PyTorch's default
// nn.Linear biases (U(−1/√fan_in, 1/√fan_in)) give |z| in the tens to
// hundreds at n = 2e5.
const BiasZTol = 8

// biasDirRows is the number of rows whose first moments give the
// directions of TestBiases' odd-moment test.
const biasDirRows = 20000

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
// it. It reads the first 2·10⁴ rows for the test's directions and then X and
// Y once (O(n·m·(d + m)), as products of row chunks with small matrices)
// and is a screen, not a
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
	// Both sums run over chunks of rows as products of the chunk with
	// small matrices (internal/outer, internal/kern), summed in row order.
	const chunk = biasChunk
	xr, yr := X.RawMatrix(), Y.RawMatrix()
	rowsY := func(lo, hi int) blas64.General {
		return blas64.General{Rows: hi - lo, Cols: m, Stride: yr.Stride, Data: yr.Data[lo*yr.Stride:]}
	}
	Gt, dirs := biasDirections(X, Y)
	// The odd-moment sums Σ y_j·He₃(g_l·x) and Σ (y_j·He₃(g_l·x))², for
	// every output j and direction l: with H = He₃(X·Gᵀ) per chunk, Hᵀ·Y and
	// (H∘H)ᵀ·(Y∘Y).
	// One pass over all rows: Σ s·y and Σ s²y² with s = 1 − (‖x‖² − d),
	// and the odd-moment sums.
	sy, s2y2 := make([]float64, m), make([]float64, m)
	hy, h2y2 := make([]float64, dirs*m), make([]float64, dirs*m)
	H, H2, Y2 := make([]float64, chunk*dirs), make([]float64, chunk*dirs), make([]float64, chunk*m)
	for lo := 0; lo < n; lo += chunk {
		hi := min(n, lo+chunk)
		rows := hi - lo
		for r := lo; r < hi; r++ {
			addOutputSums(X.RawRowView(r), Y.RawRowView(r), sy, s2y2)
		}
		if dirs == 0 {
			continue
		}
		kern.MulRows(H, dirs, xr.Data[lo*xr.Stride:], xr.Stride, Gt, dirs, rows, d, dirs)
		for i, t := range H[:rows*dirs] {
			h := t * (t*t - 3)
			H[i], H2[i] = h, h*h
		}
		for r := 0; r < rows; r++ {
			for j, v := range Y.RawRowView(lo + r) {
				Y2[r*m+j] = v * v
			}
		}
		outer.Add(hy, blas64.General{Rows: rows, Cols: dirs, Stride: dirs, Data: H}, rowsY(lo, hi))
		outer.Add(h2y2, blas64.General{Rows: rows, Cols: dirs, Stride: dirs, Data: H2}, blas64.General{Rows: rows, Cols: m, Stride: m, Data: Y2})
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

// biasDirections returns the directions of TestBiases's odd-moment test,
// as the columns of Gt (d×dirs, row-major): the first moments Σ y_j·x of
// the first biasDirRows rows, normalised, the zero ones left out (their
// direction is all the test uses; at 2·10⁴ rows it is within ~√(d/2·10⁴)
// of the population one).
func biasDirections(X, Y *mat.Dense) (Gt []float64, dirs int) {
	n, d := X.Dims()
	_, m := Y.Dims()
	const chunk = biasChunk
	xr, yr := X.RawMatrix(), Y.RawMatrix()
	G := make([]float64, m*d) // row j: Σ_r y_rj·x_r
	for lo, end := 0, min(n, biasDirRows); lo < end; lo += chunk {
		hi := min(end, lo+chunk)
		outer.Add(G, blas64.General{Rows: hi - lo, Cols: m, Stride: yr.Stride, Data: yr.Data[lo*yr.Stride:]}, blas64.General{Rows: hi - lo, Cols: d, Stride: xr.Stride, Data: xr.Data[lo*xr.Stride:]})
	}
	for j := 0; j < m; j++ {
		g := G[j*d : (j+1)*d]
		if nrm := floats.Norm(g, 2); nrm > 0 {
			floats.Scale(1/nrm, g)
			copy(G[dirs*d:(dirs+1)*d], g)
			dirs++
		}
	}
	Gt = make([]float64, d*dirs)
	for l := 0; l < dirs; l++ {
		for c := 0; c < d; c++ {
			Gt[c*dirs+l] = G[l*d+c]
		}
	}
	return Gt, dirs
}

// biasChunk is the number of rows per block of TestBiases's sums.
const biasChunk = 512

// addOutputSums adds one sample's terms of the output statistic: s·y and
// s²·y², s = 1 − (‖x‖² − d), per output.
func addOutputSums(x, y, sy, s2y2 []float64) {
	norm2 := 0.0
	for _, v := range x {
		norm2 += v * v
	}
	s := 1 - (norm2 - float64(len(x)))
	for j, yj := range y {
		sy[j] += s * yj
		s2y2[j] += s * s * yj * yj
	}
}

// OutputBiasZ is BiasTest.OutputZ on the first rows samples (all when rows
// ≥ n): one pass over rows·(d + m) numbers, a cheap first look that lets a
// caller try the learner for biases first when it is far above BiasZTol.
// Its z grows like √rows; X and Y must have been checked (certify.CheckXY).
func OutputBiasZ(X, Y *mat.Dense, rows int) float64 {
	n, _ := X.Dims()
	_, m := Y.Dims()
	rows = min(rows, n)
	sy, s2y2 := make([]float64, m), make([]float64, m)
	for r := 0; r < rows; r++ {
		addOutputSums(X.RawRowView(r), Y.RawRowView(r), sy, s2y2)
	}
	z := 0.0
	for j := range sy {
		z = max(z, zScore(sy[j], s2y2[j], rows))
	}
	return z
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
