package depth2

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/hermite"
	"github.com/relurec/relurec/internal/vec"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/tensor"
)

// Moments holds Hermite moment tensors of the p output channels of a
// network or of data: T[t][r] = E[y_t·He_r(z)] for orders r = 0…len−1, in
// the coordinates z = Basisᵀx (Basis nil: z = x).
type Moments struct {
	T [][]*tensor.Symmetric
	// Noise[r] estimates the Frobenius error of T̂_r summed over channels
	// (split-half; not in [ATV21]); zero for population moments.
	Noise []float64
	// HalfDiff[t][r] = (T̂ᵃ − T̂ᵇ)/2 for the estimates T̂ᵃ, T̂ᵇ from the two
	// halves of the samples: it has the same covariance as the error of
	// T̂ = (T̂ᵃ + T̂ᵇ)/2, so its norms calibrate the thresholds of Algorithm
	// 4. nil for population moments.
	HalfDiff [][]*tensor.Symmetric
	// Basis is d×k with orthonormal columns, or nil for the identity.
	Basis *mat.Dense
	// N is the number of samples the moments were estimated from (0 for
	// population moments).
	N int
	// Spectrum2 holds the singular values of [T̂_2^{(1)} … T̂_2^{(p)}] in d
	// dimensions and Noise2 the spectral norm of its split-half difference,
	// when EstimateMoments reduced the dimension (nil/0 otherwise).
	Spectrum2 []float64
	Noise2    float64
}

// Dim is the dimension of the moments' coordinates.
func (mo *Moments) Dim() int { return mo.T[0][0].Dim }

// MaxOrder is the largest order held.
func (mo *Moments) MaxOrder() int { return len(mo.T[0]) - 1 }

// Channels is the number of output channels p.
func (mo *Moments) Channels() int { return len(mo.T) }

// PopulationMoments returns the exact Hermite moments f_r = E[y·He_r(x)],
// r = 0…maxOrder, of every output of net under x ~ N(0, I_d) ([ATV21,
// Lemma 3.5]): f_r = Σ_i A_{ti}·c_r(b_i)·w_i^{⊗r} for unit rows (a
// general row w contributes ‖w‖·c_r(b/‖w‖)·ŵ^{⊗r}), plus C_t at r = 0 and
// L's row t at r = 1. They are what Algorithm 1 takes as input.
func PopulationMoments(net *nn.Depth2, maxOrder int) (*Moments, error) {
	if err := net.Validate(); err != nil {
		return nil, err
	}
	if maxOrder < 0 || maxOrder > tensor.MaxMomentOrder {
		return nil, fmt.Errorf("%w: moment order %d outside [0, %d]", ErrInput, maxOrder, tensor.MaxMomentOrder)
	}
	m, d := net.W.Dims()
	p := net.Out()
	mo := &Moments{T: make([][]*tensor.Symmetric, p), Noise: make([]float64, maxOrder+1)}
	for t := 0; t < p; t++ {
		mo.T[t] = make([]*tensor.Symmetric, maxOrder+1)
		for r := 0; r <= maxOrder; r++ {
			mo.T[t][r] = tensor.NewSymmetric(d, r)
		}
	}
	u := make([]float64, d)
	for i := 0; i < m; i++ {
		w := net.W.RawRowView(i)
		s := math.Sqrt(vec.Dot(w, w))
		if s == 0 {
			for t := 0; t < p; t++ {
				mo.T[t][0].Data[0] += net.A.At(t, i) * math.Max(net.B[i], 0)
			}
			continue
		}
		for j := range u {
			u[j] = w[j] / s
		}
		b := net.B[i] / s
		for r := 0; r <= maxOrder; r++ {
			c := s * hermite.ReLUBias(r, b)
			for t := 0; t < p; t++ {
				mo.T[t][r].AddOuterPower(net.A.At(t, i)*c, u)
			}
		}
	}
	for t := 0; t < p; t++ {
		if net.C != nil {
			mo.T[t][0].Data[0] += net.C[t]
		}
		if net.L != nil && maxOrder >= 1 {
			for j := 0; j < d; j++ {
				mo.T[t][1].Data[j] += net.L.At(t, j)
			}
		}
	}
	return mo, nil
}
