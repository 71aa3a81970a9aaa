package depth2

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/hermite"
	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/tensor"
	"github.com/relurec/relurec/twolayer"
)

// The exact route (not in [ATV21]) learns y = A·ReLU(W·x + b) + c without
// order-3 and order-4 moments and without Levenberg–Marquardt, when the
// network has at least as many outputs as hidden units and the data are
// exact:
//
//  1. The centred outputs Y − 1·ȳᵀ have rank k; their left singular
//     vectors B₀ (n×k) and the constant vector span every unit's
//     activation ReLU(X·w_i + b_i) and nothing else.
//  2. The Stein start (steinStart) reads each unit's direction, sign and
//     bias from first and second moments alone.
//  3. Bakshi et al.'s exact polish [BJW19, Alg 5] (twolayer.ExactPolish)
//     runs on the augmented input (x, 1), whose rows (w_i, b_i) make the
//     biased network a bias-free one: the confident zeros of each unit
//     pick its activation out of span(B₀, 1), and the active samples give
//     (w_i, b_i) exactly.
//  4. A and c by least squares on [ReLU(X·Wᵀ + 1·bᵀ), 1], and the residual
//     certificate on every sample.
//
// Every step is a pass over the data linear in n; the moments of
// Algorithm 6 in k dimensions and the refinement's Jacobian (n·P²/2 for
// P = k(d+1) + (k+1)·p parameters) are what Fit costs when this route does
// not certify.

// RouteSteinPolish is the exact route: the Stein start, the exact polish
// on the augmented input and the output fit. Its certificate is met.
const RouteSteinPolish = "stein+polish"

// steinMaxUnits is the widest network the exact route tries: its Stein
// start costs rows·k³ + sweeps·k⁴ (at k = 100 from d = 100, 2·10⁵ rows:
// 104 s single-threaded, 99 of 100 units certified), where the moments'
// refusal of too few samples (EstimateMoments) costs one pass.
const steinMaxUnits = 50

// steinRows is how many samples (spread evenly over X) the Stein start's
// moments read: max(2·10⁴, 400·d), as many as the parity start's
// regression in package twolayer, for directions about √(d/rows) ≤ 0.05
// rad from the truth; the polish certifies from starts several times
// further away.
func steinRows(n, d int) int { return min(n, max(20000, 400*d)) }

// exactRoute runs the exact route. It returns the certified network, or
// nil and why the route did not apply or did not certify; err is only a
// cancellation.
func (pr *problem) exactRoute(ctx context.Context) (net *nn.Depth2, why string, err error) {
	if pr.ell != 1 {
		return nil, "the exact route needs ℓ = 1 (k ≤ d)", nil
	}
	n, d := pr.n, pr.d
	B, k, why := pr.outputBasis()
	if B == nil {
		return nil, why, nil
	}
	if k > steinMaxUnits {
		return nil, fmt.Sprintf("%d units: the Stein start decomposes k slices of k×k (rows·k³ to form, k⁴ per joint-diagonalisation sweep) and is tried up to %d units", k, steinMaxUnits), nil
	}
	start, why := steinStart(pr.X, B.Slice(0, n, 0, k).(*mat.Dense), steinRows(n, d), pr.opt.Seed)
	if start == nil {
		return nil, why, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	Xa := augmented(pr.X)
	V, reps, err := twolayer.ExactPolish(ctx, Xa, B, start, twolayer.PolishOptions{Roundoff: pr.roundoff, Progress: pr.stage("exact polish")})
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		return nil, "the exact polish failed: " + err.Error(), nil
	}
	var failed []string
	for i, r := range reps {
		if !r.OK {
			failed = append(failed, fmt.Sprintf("unit %d: %s", i, r.Why))
		}
	}
	if len(failed) > 0 {
		return nil, fmt.Sprintf("the exact polish certified %d of %d units (%s)", k-len(failed), k, strings.Join(failed, "; ")), nil
	}
	net = &nn.Depth2{W: mat.DenseCopyOf(V.Slice(0, k, 0, d)), B: mat.Col(nil, d, V)}
	if err := pr.fitOutputs(net); err != nil {
		return nil, "the output fit failed: " + err.Error(), nil
	}
	if resid := pr.residual(net); !(resid <= pr.opt.CertTol) {
		return nil, fmt.Sprintf("every unit polished exact, but the residual %.1e exceeds %.0e", resid, pr.opt.CertTol), nil
	}
	return net, "", nil
}

// outputBasis returns an orthonormal basis B (n×(k+1)) of span(Y − 1·ȳᵀ,
// 1): the first k columns are the centred outputs' left singular vectors,
// the last is 1/√n. k is the known width, or the numerical rank of the
// centred outputs at the data's precision. B is nil, with why, when the
// data cannot be an exact network with k ≤ p outputs (noise, or fewer
// outputs than units).
func (pr *problem) outputBasis() (B *mat.Dense, k int, why string) {
	n, p := pr.n, pr.p
	ybar := make([]float64, p)
	for q := 0; q < n; q++ {
		for t, v := range pr.Y.RawRowView(q) {
			ybar[t] += v
		}
	}
	for t := range ybar {
		ybar[t] /= float64(n)
	}
	Yc := mat.NewDense(n, p, nil)
	for q := 0; q < n; q++ {
		row := Yc.RawRowView(q)
		for t, v := range pr.Y.RawRowView(q) {
			row[t] = v - ybar[t]
		}
	}
	U, s, _, err := linalg.ThinSVD(Yc)
	if err != nil {
		return nil, 0, "the SVD of the centred outputs failed: " + err.Error()
	}
	tol := certify.RankTol(pr.roundoff)
	rank := linalg.NumericalRank(s, tol)
	k = pr.opt.Hidden
	if k == 0 {
		k = rank
	}
	switch {
	case rank == 0:
		return nil, 0, "the outputs are constant"
	case k > pr.d:
		return nil, 0, fmt.Sprintf("%d units in d = %d dimensions", k, pr.d)
	case rank < k:
		return nil, 0, fmt.Sprintf("the centred outputs have rank %d < %d units: the exact route needs at least as many outputs as units", rank, k)
	case k < p && s[k] > tol*s[0]:
		return nil, 0, fmt.Sprintf("the centred outputs are not exactly rank %d (σ_%d/σ_1 = %.1e > %.0e): noise", k, k+1, s[k]/s[0], tol)
	}
	B = mat.NewDense(n, k+1, nil)
	c := 1 / math.Sqrt(float64(n))
	for q := 0; q < n; q++ {
		row := B.RawRowView(q)
		copy(row, U.RawRowView(q)[:k])
		row[k] = c
	}
	return B, k, ""
}

// steinStart estimates the units' augmented rows (w_i, b_i)/‖(w_i, b_i)‖
// (k×(d+1)) from the first and second moments of the reduced outputs
// red = B₀ (n×k) on rows samples spread over X, for x ~ N(0, I). By
// Stein's identity, for a unit of unit direction u and bias β (the row
// (w, b) scaled to ‖w‖ = 1),
//
//	E[ReLU(u·x + β)·x]          = Φ(β)·u,
//	E[ReLU(u·x + β)·(xxᵀ − I)] = φ(β)·u·uᵀ,
//
// so, with red = ReLU(X·Wᵀ + 1·bᵀ)·Gᵀ for an invertible G (the output
// weights in the reduced basis; the constant drops out of both moments):
//
//  1. The first moment E[x·redᵀ] (d×k) spans the units' directions; Q is
//     an orthonormal basis of it and z = Qᵀx.
//  2. The second-moment slices M_j = E[red_j·(zzᵀ − I)] = Σ_i
//     G_ji‖w_i‖φ(β_i)·g_i g_iᵀ (g_i = Qᵀu_i) are simultaneously diagonal:
//     Jennrich gives the g_i up to sign and the weights D_ji.
//  3. The first moment in the same coordinates, E[red_j·z] = Σ_i
//     G_ji‖w_i‖Φ(β_i)·s_i g_i, gives coefficients e_ji; their ratio to D_ji
//     is s_i·Φ(β_i)/φ(β_i) for every output j: its sign is the sign s_i
//     the second moment cannot see, and Φ/φ, increasing, gives β_i.
//
// start is nil, with why, when a step fails (a rank-deficient first
// moment, no real decomposition).
func steinStart(X, B0 *mat.Dense, rows int, seed uint64) (start *mat.Dense, why string) {
	n, d := X.Dims()
	_, k := B0.Dims()
	Xr, Br := mat.NewDense(rows, d, nil), mat.NewDense(rows, k, nil)
	for i := 0; i < rows; i++ {
		q := int(int64(i) * int64(n) / int64(rows))
		copy(Xr.RawRowView(i), X.RawRowView(q))
		copy(Br.RawRowView(i), B0.RawRowView(q))
	}
	var C mat.Dense
	C.Mul(Xr.T(), Br) // d×k
	Q, s, _, err := linalg.ThinSVD(&C)
	if err != nil || len(s) < k || !(s[k-1] > 1e-8*s[0]) {
		return nil, "the first moment does not span k directions"
	}
	var Z mat.Dense
	Z.Mul(Xr, Q) // rows×k
	inv := 1 / float64(rows)
	// E (k×k): column j is E[red_j·z]; slices M_j = E[red_j·(zzᵀ − I)].
	var E mat.Dense
	E.Mul(Z.T(), Br)
	E.Scale(inv, &E)
	slices := steinSlices(&Z, Br, inv)
	var g *mat.Dense // k×k, unit columns g_i
	var D [][]float64
	if k == 1 {
		g = mat.NewDense(1, 1, []float64{1})
		D = [][]float64{{slices[0].At(0, 0)}}
	} else {
		dec, err := tensor.Jennrich(slices, rand.New(rand.NewPCG(seed, 0x5eed5eed)), tensor.JennrichOptions{})
		if err != nil {
			return nil, "the second moments have no real simultaneous diagonalisation: " + err.Error()
		}
		g, D = dec.W, dec.Diag
	}
	var e mat.Dense // e[i][j]: coefficient of g_i in E[red_j·z]
	if err := e.Solve(g, &E); err != nil {
		return nil, "the second moment's components are linearly dependent"
	}
	start = mat.NewDense(k, d+1, nil)
	var dir mat.VecDense
	for i := 0; i < k; i++ {
		num, den := 0.0, 0.0
		for j := 0; j < k; j++ {
			num += e.At(i, j) * D[j][i]
			den += D[j][i] * D[j][i]
		}
		if !(den > 0) {
			return nil, fmt.Sprintf("unit %d has no second moment", i)
		}
		rho := num / den
		dir.MulVec(Q, g.ColView(i))
		sgn := 1.0
		if rho < 0 {
			sgn = -1
		}
		beta := millsInverse(math.Abs(rho))
		row := start.RawRowView(i)
		norm := math.Sqrt(mat.Dot(&dir, &dir) + beta*beta)
		for a := 0; a < d; a++ {
			row[a] = sgn * dir.AtVec(a) / norm
		}
		row[d] = beta / norm
	}
	return start, ""
}

// steinSlices is step 2 of steinStart's moments: the slices
// M_j = E[red_j·(zzᵀ − I)] (k×k, one per column j of Br) over the rows of
// Z (rows×k), each sum scaled by inv = 1/rows.
func steinSlices(Z *mat.Dense, Br *mat.Dense, inv float64) []*mat.SymDense {
	rows, k := Z.Dims()
	slices := make([]*mat.SymDense, k)
	zr := Z.RawMatrix()
	for j := range slices {
		M := mat.NewSymDense(k, nil)
		mr := M.RawSymmetric()
		mean := 0.0
		for i := 0; i < rows; i++ {
			r := Br.At(i, j)
			mean += r
			z := zr.Data[i*zr.Stride : i*zr.Stride+k]
			for a := 0; a < k; a++ {
				ra := r * z[a]
				row := mr.Data[a*mr.Stride:]
				for c := a; c < k; c++ {
					row[c] += ra * z[c]
				}
			}
		}
		for a := 0; a < k; a++ {
			for c := a; c < k; c++ {
				v := M.At(a, c) * inv
				if a == c {
					v -= mean * inv
				}
				M.SetSym(a, c, v)
			}
		}
		slices[j] = M
	}
	return slices
}

// millsInverse returns β with Φ(β)/φ(β) = r (r > 0), the bias of a unit
// whose first and second Hermite coefficients have the ratio r. Φ/φ is
// increasing, from 0 at −∞ to ∞; its logarithm is found by bisection on
// [−40, 40] (where the ratio spans e^{−3.7}… e^{800}, clamped at the ends).
func millsInverse(r float64) float64 {
	target := math.Log(r)
	f := func(b float64) float64 { return hermite.LogNormCDF(b) - hermite.LogNormPDF(b) }
	lo, hi := -40.0, 40.0
	if target <= f(lo) {
		return lo
	}
	if target >= f(hi) {
		return hi
	}
	for i := 0; i < 100 && hi-lo > 1e-12; i++ {
		mid := (lo + hi) / 2
		if f(mid) < target {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// augmented returns [X, 1] (n×(d+1)).
func augmented(X *mat.Dense) *mat.Dense {
	n, d := X.Dims()
	Xa := mat.NewDense(n, d+1, nil)
	for q := 0; q < n; q++ {
		row := Xa.RawRowView(q)
		copy(row, X.RawRowView(q))
		row[d] = 1
	}
	return Xa
}

// outputRows is how many samples (the first ones) fitOutputs solves on:
// with exact units, any block whose features have full rank gives A and c
// to rounding; the certificate is still taken on all samples.
func outputRows(n, k int) int { return min(n, max(20000, 100*(k+1))) }

// fitOutputs sets net.A and net.C by least squares on the features
// [ReLU(X·Wᵀ + 1·bᵀ), 1] of the first outputRows samples, and again on all
// samples when that leaves a residual above the data's rounding level.
func (pr *problem) fitOutputs(net *nn.Depth2) error {
	k := net.Hidden()
	for _, rows := range []int{outputRows(pr.n, k), pr.n} {
		F := mat.NewDense(rows, k+1, nil)
		var pre mat.Dense
		pre.Mul(pr.X.Slice(0, rows, 0, pr.d), net.W.T())
		for q := 0; q < rows; q++ {
			row := F.RawRowView(q)
			for i, v := range pre.RawRowView(q) {
				row[i] = math.Max(v+net.B[i], 0)
			}
			row[k] = 1
		}
		sol, err := linalg.LstSq(F, pr.Y.Slice(0, rows, 0, pr.p))
		if err != nil {
			return err
		}
		net.A = mat.DenseCopyOf(sol.Slice(0, k, 0, pr.p).T())
		net.C = mat.Row(nil, k, sol)
		if rows == pr.n || pr.residual(net) <= certify.RoundingResidual(pr.roundoff) {
			return nil
		}
	}
	return nil
}
