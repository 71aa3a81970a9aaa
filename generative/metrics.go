package generative

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/linalg"
)

// SinTheta returns ‖sin Θ(col A, col B)‖_F = √(Σ sin²θ_i) over the principal
// angles between the column spans of A and B (d×k each; [MR18, §3] estimates col(A) as that of M̂). It is
// 0 for equal spans and √k for orthogonal ones; it does not depend on the
// bases chosen, so it compares col(A) with an estimate up to GL(k).
func SinTheta(A, B *mat.Dense) (float64, error) {
	ang, err := linalg.PrincipalAngles(A, B)
	if err != nil {
		return math.NaN(), fmt.Errorf("generative.SinTheta: %w", err)
	}
	s := 0.0
	for _, a := range ang {
		s += math.Sin(a) * math.Sin(a)
	}
	// Spans of different dimension: the missing directions count as
	// orthogonal.
	_, ka := A.Dims()
	_, kb := B.Dims()
	s += float64(max(ka, kb) - len(ang))
	return math.Sqrt(s), nil
}

// SinThetaRows is SinTheta restricted to the given rows of A and B: the
// column-space error on the neurons the data can identify (our checks use
// rows with at least k + 2 positive entries; see WellObservedRows).
func SinThetaRows(A, B *mat.Dense, rows []int) (float64, error) {
	if len(rows) == 0 {
		return math.NaN(), fmt.Errorf("generative.SinThetaRows: %w: no rows selected", ErrInput)
	}
	_, ka := A.Dims()
	_, kb := B.Dims()
	ra, rb := mat.NewDense(len(rows), ka, nil), mat.NewDense(len(rows), kb, nil)
	for n, i := range rows {
		ra.SetRow(n, A.RawRowView(i))
		rb.SetRow(n, B.RawRowView(i))
	}
	return SinTheta(ra, rb)
}

// WellObservedRows returns the neurons (columns of Y, rows of A) with at
// least minPos entries > posTol. With minPos = k + 2 these are the rows whose
// k + 1 unknowns (U_i, o_i) are over-determined by the equalities.
func WellObservedRows(Y *mat.Dense, minPos int, posTol float64) []int {
	n, d := Y.Dims()
	cnt := make([]int, d)
	for j := 0; j < n; j++ {
		for i, v := range Y.RawRowView(j) {
			if v > posTol {
				cnt[i]++
			}
		}
	}
	var rows []int
	for i, c := range cnt {
		if c >= minPos {
			rows = append(rows, i)
		}
	}
	return rows
}

// MError is the error of an estimate of M = C·Aᵀ (n×d), in three forms.
type MError struct {
	// Raw is ‖M̂ − M‖_F, which includes the unidentifiable gauge 1·(Aw)ᵀ.
	Raw float64 `json:"raw"`
	// Centred is ‖(M̂ − M)P⊥‖_F with every column centred over the
	// observations: the identifiable error.
	Centred float64 `json:"centred"`
	// RMSE is Centred/√(n·d).
	RMSE float64 `json:"rmse"`
}

// CompareM returns the raw, centred and per-entry errors of Mhat against M
// (both n×d).
func CompareM(M, Mhat *mat.Dense) (MError, error) {
	n, d := M.Dims()
	if r, c := Mhat.Dims(); r != n || c != d {
		return MError{}, fmt.Errorf("generative.CompareM: %w: M is %d×%d, M̂ is %d×%d", ErrInput, n, d, r, c)
	}
	diff := mat.NewDense(n, d, nil)
	diff.Sub(Mhat, M)
	raw := mat.Norm(diff, 2)
	centreColumns(diff)
	c := mat.Norm(diff, 2)
	return MError{Raw: raw, Centred: c, RMSE: c / math.Sqrt(float64(n*d))}, nil
}
