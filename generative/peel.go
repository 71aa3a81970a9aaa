package generative

import (
	"context"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/linalg"
)

// PeelOptions controls PeelDecode.
type PeelOptions struct {
	// Ranks are the hidden widths from the top layer down: for
	// Y = ReLU(A₂·ReLU(A₁C + b₁) + b₂) they are (width of H₁, dimension of C).
	// Each must be below the width of the layer above and below n.
	Ranks []int
	// NMFIter is the number of semi-NMF sweeps per layer. Default 300.
	NMFIter int
	// Threshold zeroes entries of Ĥ below Threshold·max(Ĥ) before the next
	// layer. Default 1e-6.
	Threshold float64
}

// PeelLayer is one decoded layer, top first.
type PeelLayer struct {
	// Basis is an orthonormal basis of the estimated col(A_ℓ) (from Solver B).
	Basis *mat.Dense
	// A is the semi-NMF factor (d_ℓ × r): A_ℓ up to permutation and positive
	// column scaling, if the factorisation is identifiable.
	A *mat.Dense
	// H is the decoded hidden layer (n × r), ≥ 0, min 0 and max 1 per column.
	H *mat.Dense
	// Bias is the layer's bias in the gauge min_j H_jr = 0.
	Bias []float64
	// NMFResidual is ‖Ẑ − H·Aᵀ − 1·biasᵀ‖_F/‖Ẑ‖_F of the semi-NMF.
	NMFResidual float64
	// Fit is Solver B's result on this layer's input.
	Fit *Result
}

// PeelDecode is the EXPERIMENTAL multi-layer "peeling" decoder proposed in
// the "Future directions" section of [MR19] (no algorithm or guarantee
// there; the concrete design is ours): for each layer from the top,
// Solver B estimates the pre-activations Ẑ = M̂ + 1ôᵀ of rank r, a
// semi-nonnegative factorisation Ẑ ≈ H·Aᵀ + 1cᵀ with H ≥ 0 (alternating least
// squares for (A, c) and HALS for H) proposes the hidden layer, the gauge is
// fixed by min_j H_jr = 0 (ReLU outputs contain zeros) and the scale by
// max_j H_jr = 1 (ReLU is positively homogeneous), small entries are zeroed,
// and the next layer is decoded from H. The factorisation M = A·H is not
// unique in general (the paper's hurdle (b)); nonnegativity and the zeros of
// H are what make it work when it does. Use with care: results carry the
// semi-NMF residual but no certificate of identifiability.
func PeelDecode(ctx context.Context, Y *mat.Dense, opt PeelOptions) ([]PeelLayer, error) {
	if len(opt.Ranks) == 0 {
		return nil, fmt.Errorf("%w: PeelDecode needs at least one rank", ErrInput)
	}
	if opt.NMFIter <= 0 {
		opt.NMFIter = 300
	}
	if opt.Threshold <= 0 {
		opt.Threshold = 1e-6
	}
	H := Y
	var out []PeelLayer
	for l, r := range opt.Ranks {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		fit, err := FitALS(ctx, H, Options{Rank: r})
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", l+1, err)
		}
		n, d := H.Dims()
		Z := mat.DenseCopyOf(fit.MCentred)
		for j := 0; j < n; j++ {
			row := Z.RawRowView(j)
			for i := range row {
				row[i] += fit.Offset[i]
			}
		}
		Hn, A, c, resid := semiNMF(Z, fit.Codes, r, opt.NMFIter)
		// Gauge: min_j H_jr = 0; scale: max_j H_jr = 1.
		for q := 0; q < r; q++ {
			lo, hi := math.Inf(1), math.Inf(-1)
			for j := 0; j < n; j++ {
				lo = math.Min(lo, Hn.At(j, q))
				hi = math.Max(hi, Hn.At(j, q))
			}
			for i := 0; i < d; i++ {
				c[i] += A.At(i, q) * lo
			}
			scale := hi - lo
			if scale <= 0 {
				scale = 1
			}
			for j := 0; j < n; j++ {
				v := (Hn.At(j, q) - lo) / scale
				if v < opt.Threshold {
					v = 0
				}
				Hn.Set(j, q, v)
			}
			for i := 0; i < d; i++ {
				A.Set(i, q, A.At(i, q)*scale)
			}
		}
		out = append(out, PeelLayer{Basis: fit.Basis, A: A, H: Hn, Bias: c, NMFResidual: resid, Fit: fit})
		H = Hn
	}
	return out, nil
}

// semiNMF fits Z (n×d) ≈ H·Aᵀ + 1·cᵀ with H (n×r) ≥ 0 from the start
// H₀ = codes shifted to be ≥ 0: (A, c) by least squares on [H, 1], H by
// HALS coordinate sweeps. It returns H, A (d×r), c and the relative residual.
func semiNMF(Z, codes *mat.Dense, r, iters int) (*mat.Dense, *mat.Dense, []float64, float64) {
	n, d := Z.Dims()
	H := mat.DenseCopyOf(codes)
	for q := 0; q < r; q++ {
		lo := math.Inf(1)
		for j := 0; j < n; j++ {
			lo = math.Min(lo, H.At(j, q))
		}
		for j := 0; j < n; j++ {
			H.Set(j, q, H.At(j, q)-lo)
		}
	}
	A := mat.NewDense(d, r, nil)
	c := make([]float64, d)
	F := mat.NewDense(n, r+1, nil)
	for it := 0; it < iters; it++ {
		for j := 0; j < n; j++ {
			copy(F.RawRowView(j)[:r], H.RawRowView(j))
			F.Set(j, r, 1)
		}
		X, err := linalg.LstSq(F, Z) // (r+1)×d
		if err != nil {
			pinv, perr := linalg.Pinv(F, 0)
			if perr != nil {
				break
			}
			X = mat.NewDense(r+1, d, nil)
			X.Mul(pinv, Z)
		}
		for i := 0; i < d; i++ {
			for q := 0; q < r; q++ {
				A.Set(i, q, X.At(q, i))
			}
			c[i] = X.At(r, i)
		}
		// HALS on H: residual R = Z − 1cᵀ − H·Aᵀ, one pass per column.
		R := semiNMFResidual(Z, H, A, c)
		halsSweep(R, H, A)
	}
	R := semiNMFResidual(Z, H, A, c)
	return H, A, c, mat.Norm(R, 2) / math.Max(mat.Norm(Z, 2), 1e-300)
}

// halsSweep is one HALS pass over the columns of H (n×r, kept ≥ 0) with A
// held: each column q moves to the non-negative least-squares optimum
// against the residual R = Z − 1cᵀ − H·Aᵀ, which it keeps up to date.
func halsSweep(R, H, A *mat.Dense) {
	n, r := H.Dims()
	for q := 0; q < r; q++ {
		aq := mat.Col(nil, q, A)
		nn := 0.0
		for _, v := range aq {
			nn += v * v
		}
		if nn == 0 {
			continue
		}
		for j := 0; j < n; j++ {
			row := R.RawRowView(j)
			g := 0.0
			for i, v := range aq {
				g += v * row[i]
			}
			old := H.At(j, q)
			nv := math.Max(0, old+g/nn)
			if nv != old {
				H.Set(j, q, nv)
				for i, v := range aq {
					row[i] -= v * (nv - old)
				}
			}
		}
	}
}

// semiNMFResidual returns R = Z − H·Aᵀ − 1cᵀ.
func semiNMFResidual(Z, H, A *mat.Dense, c []float64) *mat.Dense {
	n, _ := Z.Dims()
	var R mat.Dense
	R.Mul(H, A.T())
	R.Sub(Z, &R)
	for j := 0; j < n; j++ {
		row := R.RawRowView(j)
		for i := range row {
			row[i] -= c[i]
		}
	}
	return &R
}
