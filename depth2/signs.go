package depth2

import (
	"context"
	"fmt"
	"math"
	"math/bits"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/hermite"
	"github.com/relurec/relurec/internal/vec"
	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/nn"
)

// maxExhaustiveFlips is the largest width whose 2^m sign patterns
// ResolveSigns enumerates.
const maxExhaustiveFlips = 20

// ResolveSigns finds the set S of units whose sign flip (w_i, b_i) →
// (−w_i, −b_i) makes the affine term of net smallest: it minimises
// ‖L + Σ_{i∈S} A_{:,i}·w_iᵀ‖_F (flipping unit i adds A_{:,i}·w_iᵀ to L and
// A_{:,i}·b_i to C, FlipUnit). In the overcomplete case the Hermite moments
// of order ≥ 2 cannot tell a unit from its flip ([ATV21, Claim 4.7]); a network
// fitted with a free affine term represents the truth for any sign choice,
// and the true signs are the ones that remove the affine term when the
// truth has none. Up to 20 units all 2^m patterns are enumerated (Gray code,
// p·d work each); beyond, a least-squares relaxation is rounded and improved
// by single flips. It returns the flipped network (with its remaining L),
// the flipped units, and the remaining ‖L‖_F. If several patterns remove L
// the network is genuinely non-identifiable (Claim 4.8); any of them is
// returned, and ties reports their number.
func ResolveSigns(net *nn.Depth2) (out *nn.Depth2, flipped []int, rest float64, ties int) {
	if net.L == nil {
		return net.Clone(), nil, 0, 1
	}
	U, cur := flipTerms(net)
	var best uint64
	var bestVal float64
	if len(U) <= maxExhaustiveFlips {
		best, bestVal, ties = exhaustiveFlips(U, cur)
	} else {
		best, bestVal = relaxedFlips(U, cur)
		ties = 1
	}
	out = net.Clone()
	for i := range U {
		if best&(1<<uint(i)) != 0 {
			out = out.FlipUnit(i)
			flipped = append(flipped, i)
		}
	}
	return out, flipped, math.Sqrt(bestVal), ties
}

// flipTerms returns the terms u_i = vec(A_{:,i}·w_iᵀ) that flipping unit i
// adds to vec(L), and vec(L) itself (the rows of L, concatenated).
func flipTerms(net *nn.Depth2) (U [][]float64, cur []float64) {
	m, d := net.W.Dims()
	p := net.Out()
	D := p * d
	U = make([][]float64, m)
	for i := 0; i < m; i++ {
		u := make([]float64, D)
		w := net.W.RawRowView(i)
		for t := 0; t < p; t++ {
			a := net.A.At(t, i)
			for j := 0; j < d; j++ {
				u[t*d+j] = a * w[j]
			}
		}
		U[i] = u
	}
	cur = make([]float64, D)
	for t := 0; t < p; t++ {
		copy(cur[t*d:], net.L.RawRowView(t))
	}
	return U, cur
}

// exhaustiveFlips visits every sign pattern of the terms U in Gray-code
// order (one flip per step, cur updated in place) and returns the pattern
// with the smallest ‖vec(L) + Σ_{flipped} u_i‖², that value, and how many
// patterns bring it to rounding level.
func exhaustiveFlips(U [][]float64, cur []float64) (best uint64, bestVal float64, ties int) {
	bestVal = vec.Dot(cur, cur)
	scale := bestVal
	for _, u := range U {
		scale = math.Max(scale, vec.Dot(u, u))
	}
	// A pattern "removes" L when what is left is below 1e-10 of the
	// scale of the terms (in norm): rounding level for exact networks.
	zeroTol := 1e-20 * scale
	count := 0
	if bestVal <= zeroTol {
		count++
	}
	state := uint64(0)
	for g := uint64(1); g < 1<<uint(len(U)); g++ {
		i := bits.TrailingZeros64(g)
		state ^= 1 << uint(i)
		sign := 1.0
		if state&(1<<uint(i)) == 0 {
			sign = -1
		}
		for j, v := range U[i] {
			cur[j] += sign * v
		}
		val := vec.Dot(cur, cur)
		if val <= zeroTol {
			count++
		}
		if val < bestVal {
			best, bestVal = state, val
		}
	}
	return best, bestVal, max(count, 1)
}

// relaxedFlips is the search for many units: min_s ‖vec(L) + Σ s_i u_i‖
// over real s, rounded to {0, 1}, then single flips while they lower the
// norm. It returns the pattern and its squared norm; cur is updated in
// place.
func relaxedFlips(U [][]float64, cur []float64) (best uint64, bestVal float64) {
	m, D := len(U), len(cur)
	M := mat.NewDense(D, m, nil)
	rhs := mat.NewDense(D, 1, nil)
	for i, u := range U {
		M.SetCol(i, u)
	}
	for j, v := range cur {
		rhs.Set(j, 0, -v)
	}
	pinv, err := linalg.Pinv(M, 1e-10)
	var s []float64
	if err == nil {
		var sol mat.Dense
		sol.Mul(pinv, rhs)
		s = mat.Col(nil, 0, &sol)
	} else {
		s = make([]float64, m)
	}
	for i, v := range s {
		if v > 0.5 {
			best |= 1 << uint(i)
			for j, x := range U[i] {
				cur[j] += x
			}
		}
	}
	bestVal = vec.Dot(cur, cur)
	for improved := true; improved; {
		improved = false
		for i := 0; i < m; i++ {
			sign := 1.0
			if best&(1<<uint(i)) != 0 {
				sign = -1
			}
			for j, x := range U[i] {
				cur[j] += sign * x
			}
			if v := vec.Dot(cur, cur); v < bestVal {
				bestVal = v
				best ^= 1 << uint(i)
				improved = true
			} else {
				for j, x := range U[i] {
					cur[j] -= sign * x
				}
			}
		}
	}
	return best, bestVal
}

// dropAffine resolves the units' signs to remove the affine term and keeps
// the network without it when the fit does not get worse beyond noise.
func (pr *problem) dropAffine(ctx context.Context, net *nn.Depth2, res *Result) (*nn.Depth2, error) {
	n, d, p := pr.n, pr.d, pr.p
	flipped, which, rest, ties := ResolveSigns(net)
	res.Diagnostics.SignTies = ties
	if ties > 1 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d sign patterns of the units fit equally well: the network is not identifiable up to permutation alone (Claim 4.8); one was chosen", ties))
	}
	cand := flipped.Clone()
	cand.L = nil
	polished, err := Refine(ctx, pr.X, pr.Y, cand, RefineOptions{MaxIter: pr.opt.MaxIter, Progress: pr.stage("refine without affine term")})
	if err != nil {
		return nil, err
	}
	withL := pr.loss(net)
	without := pr.loss(polished.Net)
	P := newLayout(net).size
	sigma2 := 2 * withL / math.Max(1, float64(n*p-P))
	// Dropping p·d parameters that are truly zero raises the residual sum of
	// squares by ≈ σ²·p·d (a χ² with p·d degrees of freedom); allow 4×.
	if 2*(without-withL) <= 4*sigma2*float64(p*d)+2*zeroLoss(pr.roundoff)*pr.yy {
		res.Diagnostics.FlippedUnits = len(which)
		res.Diagnostics.Refine.Iterations += polished.Iterations
		res.Diagnostics.Refine.Converged, res.Diagnostics.Refine.Status, res.Diagnostics.Refine.After = polished.Converged, polished.Status, polished.After
		return polished.Net, nil
	}
	res.Warnings = append(res.Warnings, fmt.Sprintf("kept the affine term (‖L‖ = %.3g after the best sign choice): without it the fit is worse than noise allows, so some units are missing (large |b_i|) or the data hold a linear part", rest))
	return net, nil
}

// FixSigns is Algorithm 3 ([ATV21, Alg 3], proof of Theorem 3.1): in the
// full-rank case it resolves the joint sign of (w_i, b_i) from the
// first-order moment. With M's column i = vec(ŵ_i·â_iᵀ) (ŵ_i in the
// moments' coordinates, â_i over the channels), the least-squares solution
// of M·z = T_1 is z_i = ξ_i·Φ(b_i) in the population case, and Φ > 0, so
// ξ_i = sign(z_i); the units are flipped in place and marked SignKnown, with
// SignMargin = |z_i|/Φ(b̂_i). The appendix's system uses T_1 (T_0, a
// scalar, cannot fix m signs). It needs the w_i linearly independent and no
// affine term in the network; units must be in the moments' coordinates.
func FixSigns(units []Unit, mo *Moments) error {
	if len(units) == 0 {
		return nil
	}
	k, p := mo.Dim(), mo.Channels()
	if mo.MaxOrder() < 1 {
		return fmt.Errorf("%w: FixSigns needs the order-1 moment", ErrInput)
	}
	m := len(units)
	if m > k {
		return fmt.Errorf("%w: FixSigns needs m ≤ d linearly independent units, got m = %d in %d dimensions", ErrInput, m, k)
	}
	M := mat.NewDense(k*p, m, nil)
	rhs := mat.NewDense(k*p, 1, nil)
	for t := 0; t < p; t++ {
		for j := 0; j < k; j++ {
			rhs.Set(t*k+j, 0, mo.T[t][1].Data[j])
			for i, u := range units {
				M.Set(t*k+j, i, u.W[j]*u.A[t])
			}
		}
	}
	z, err := linalg.LstSq(M, rhs)
	if err != nil {
		return fmt.Errorf("depth2: FixSigns: %w", err)
	}
	for i := range units {
		zi := z.At(i, 0)
		if zi < 0 {
			for j := range units[i].W {
				units[i].W[j] = -units[i].W[j]
			}
			units[i].B = -units[i].B
		}
		units[i].SignKnown = true
		units[i].SignMargin = math.Abs(zi) / hermite.NormCDF(units[i].B)
	}
	return nil
}
