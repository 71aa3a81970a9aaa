package metrics

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/internal/scaledsum"
	"github.com/relurec/relurec/nn"
)

// TwoLayerError is the distance between two two-layer networks up to
// permutation and positive scaling of the hidden units, after both are
// normalised to unit rows of V (the scale moved into U's columns).
type TwoLayerError struct {
	// MaxRowErrV is max_i ‖V̂_{π(i)} − V*_i‖₂ over unit rows: at most 2, and
	// ≈ the angle between the matched rows when small.
	MaxRowErrV float64 `json:"max_row_err_v"`
	// RelErrU is ‖Û·Π − U*‖_F / ‖U*‖_F, where column i of Û·Π is column π(i)
	// of the estimate.
	RelErrU float64 `json:"rel_err_u"`
	// MaxColErrU is max_i ‖Û_{:,π(i)} − U*_{:,i}‖₂ / ‖U*_{:,i}‖₂ (the absolute
	// error for a zero column of U*, whose unit contributes nothing).
	MaxColErrU float64 `json:"max_col_err_u"`
	// MaxRelErr is max(MaxRowErrV, MaxColErrU): the number behind "weights
	// match up to permutation and positive scaling with max relative error
	// ≤ 1e-9".
	MaxRelErr float64 `json:"max_rel_err"`
	// Perm[i] is the estimate's hidden unit matched to the truth's unit i.
	Perm []int `json:"perm"`
}

// CompareTwoLayer measures how far est is from truth up to the symmetries of
// a bias-free two-layer ReLU network ([BJW19] §1: the symmetries, §6): both must be
// Linear(d→k, no bias) → ReLU → Linear(k→m, no bias) with the same d, k and m
// (an all-zero bias counts as none). Each network is rescaled to unit rows of
// V with the positive row norms moved into U's columns, which leaves its
// function unchanged; hidden units are matched by MatchRows on V (signed
// cosine, since ReLU has no sign symmetry); then the errors of TwoLayerError
// are computed under that matching. A zero row of V is refused
// (ErrZeroRow): a dead unit has no direction to compare. If two rows of the
// truth's V are positive multiples of each other the units are not
// identifiable (only the sum of their U columns is) and the reported U errors
// depend on which of the two the matching picks.
//
// Other rectified hidden activations (nn.RectPow, nn.RectExp; Bakshi et al.
// App. 9.1) are compared up to their own symmetries; both networks must use
// the same one. For max(x,0)^c the U columns absorb s^c instead of s. For
// e^{max(x,0)} − 1, which has no scaling symmetry, units are matched by
// direction but the errors are those of the raw weights: MaxRowErrV is
// max_i ‖V̂_{π(i)} − V*_i‖/‖V*_i‖ and U is not rescaled.
func CompareTwoLayer(truth, est *nn.MLP) (TwoLayerError, error) {
	vt, ut, err := twoLayerParts("truth", truth)
	if err != nil {
		return TwoLayerError{}, fmt.Errorf("metrics.CompareTwoLayer: %w", err)
	}
	ve, ue, err := twoLayerParts("est", est)
	if err != nil {
		return TwoLayerError{}, fmt.Errorf("metrics.CompareTwoLayer: %w", err)
	}
	act := truth.Layers[0].Act
	if est.Layers[0].Act != act {
		return TwoLayerError{}, fmt.Errorf("metrics.CompareTwoLayer: %w: truth has hidden activation %s, est has %s", ErrNotTwoLayer, act, est.Layers[0].Act)
	}
	deg, scaled := act.Homogeneity()
	k, d := vt.Dims()
	m, _ := ut.Dims()
	ke, de := ve.Dims()
	me, _ := ue.Dims()
	if k != ke || d != de || m != me {
		return TwoLayerError{}, fmt.Errorf("metrics.CompareTwoLayer: %w: truth has (d, k, m) = (%d, %d, %d), est has (%d, %d, %d)", ErrShape, d, k, m, de, ke, me)
	}
	vtn, nt, err := normaliseRows("truth V", vt)
	if err != nil {
		return TwoLayerError{}, fmt.Errorf("metrics.CompareTwoLayer: %w", err)
	}
	ven, ne, err := normaliseRows("est V", ve)
	if err != nil {
		return TwoLayerError{}, fmt.Errorf("metrics.CompareTwoLayer: %w", err)
	}
	var cos mat.Dense
	cos.Mul(vtn, ven.T())
	cost := make([][]float64, k)
	for i := range cost {
		cost[i] = make([]float64, k)
		for j := range cost[i] {
			cost[i][j] = -cos.At(i, j)
		}
	}
	perm := hungarian(cost)

	res := TwoLayerError{Perm: perm}
	var uDiff, uNorm scaledsum.Sum
	colT := make([]float64, m)
	colE := make([]float64, m)
	for i, j := range perm {
		var dv scaledsum.Sum
		rt, re := vtn.RawRowView(i), ven.RawRowView(j)
		for c := range rt {
			if scaled {
				dv.Add(re[c] - rt[c])
			} else { // raw rows, relative to the truth's norm
				dv.Add(re[c]*ne[j]/nt[i] - rt[c])
			}
		}
		res.MaxRowErrV = math.Max(res.MaxRowErrV, dv.Norm())

		var dc, nc scaledsum.Sum
		for r := 0; r < m; r++ {
			colT[r] = ut.At(r, i) * unitScale(nt[i], deg, scaled)
			colE[r] = ue.At(r, j) * unitScale(ne[j], deg, scaled)
			dc.Add(colE[r] - colT[r])
			nc.Add(colT[r])
			uDiff.Add(colE[r] - colT[r])
			uNorm.Add(colT[r])
		}
		ce := dc.Norm()
		if n := nc.Norm(); n > 0 {
			ce /= n
		}
		res.MaxColErrU = math.Max(res.MaxColErrU, ce)
	}
	res.RelErrU = scaledsum.Ratio(uDiff, uNorm)
	res.MaxRelErr = math.Max(res.MaxRowErrV, res.MaxColErrU)
	return res, nil
}

// twoLayerParts returns (V, U) of a bias-free two-layer ReLU network.
func twoLayerParts(name string, net *nn.MLP) (v, u *mat.Dense, err error) {
	if net == nil {
		return nil, nil, fmt.Errorf("%w: %s network is nil", ErrShape, name)
	}
	if len(net.Layers) != 2 {
		return nil, nil, fmt.Errorf("%w: %s has %d layers, want 2", ErrNotTwoLayer, name, len(net.Layers))
	}
	if err := net.Validate(); err != nil {
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrShape, name, err)
	}
	l0, l1 := net.Layers[0], net.Layers[1]
	if !l0.Act.Rectified() || l1.Act != nn.Identity {
		return nil, nil, fmt.Errorf("%w: %s has activations (%s, %s), want (relu, identity) or another rectified activation (relupow<c>, reluexp) then identity", ErrNotTwoLayer, name, l0.Act, l1.Act)
	}
	for li, l := range net.Layers {
		for _, b := range l.Bias {
			if b != 0 {
				return nil, nil, fmt.Errorf("%w: %s layer %d has a non-zero bias", ErrNotTwoLayer, name, li)
			}
		}
	}
	return l0.Weight, l1.Weight, nil
}

// RelResidual returns ‖y − yhat‖_F / ‖y‖_F, the certificate of an exact fit:
// certify.RelResidual, which says how it avoids overflow and what it returns
// for zero, nil or mismatched inputs.
func RelResidual(y, yhat mat.Matrix) float64 { return certify.RelResidual(y, yhat) }

// unitScale is the factor a unit's U column absorbs when its V row of norm
// n is normalised: n^deg for a homogeneous activation, 1 (no rescaling) for
// one without a scaling symmetry.
func unitScale(n, deg float64, scaled bool) float64 {
	switch {
	case !scaled:
		return 1
	case deg == 1:
		return n
	}
	return math.Pow(n, deg)
}
