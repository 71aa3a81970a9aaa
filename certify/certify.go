// Package certify holds the evidence behind an exact answer: the residual
// certificate every exact route of relurec returns (twolayer, depth2), and the
// checks of the sample pair (X, Y) that every learner starts from.
//
// An exact route claims that the network it returns reproduces the data it
// was fitted to up to floating-point rounding; the certificate is the
// relative residual ‖Y − f(X)‖_F/‖Y‖_F that backs the claim, checked against a
// stated tolerance.
package certify

import (
	"math"

	"github.com/relurec/relurec/errs"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
)

// Certificate is the evidence behind an exact answer: the relative residual
// of the returned network on the data it was fitted to.
type Certificate struct {
	// Residual is ‖Y − f(X)‖_F / ‖Y‖_F over all samples.
	Residual float64 `json:"residual"`
	// Tol is the threshold it was checked against.
	Tol float64 `json:"tol"`
	// Samples is the number of samples the residual was computed on.
	Samples int `json:"samples"`
	// Met reports Residual ≤ Tol: the network reproduces the data to
	// float64 accuracy, so (up to the symmetries) its parameters are exact.
	Met bool `json:"met"`
}

// New returns the certificate of a residual measured on samples rows against
// tol; Met is residual ≤ tol (false for NaN).
func New(residual, tol float64, samples int) Certificate {
	return Certificate{Residual: residual, Tol: tol, Samples: samples, Met: residual <= tol}
}

// CheckXY validates a sample pair — X n×d and Y n×m, both present, non-empty,
// with one row per sample, only finite entries and a scale the learners can
// square (CheckScale) — and returns n, d, m. Its errors wrap errs.ErrInput
// and say what was expected.
func CheckXY(X, Y *mat.Dense) (n, d, m int, err error) {
	if X == nil || Y == nil {
		return 0, 0, 0, errs.Inputf("X and Y are required")
	}
	n, d = X.Dims()
	ny, m := Y.Dims()
	if n != ny {
		return 0, 0, 0, errs.Inputf("X has %d rows but Y has %d; both need one row per sample", n, ny)
	}
	if n == 0 || d == 0 || m == 0 {
		return 0, 0, 0, errs.Inputf("empty data (X is %d×%d, Y is %d×%d)", n, d, ny, m)
	}
	for _, e := range []error{dataio.CheckFinite("X", X), dataio.CheckFinite("Y", Y)} {
		if e != nil {
			return 0, 0, 0, errs.Inputf("%v; remove or impute non-finite values", e)
		}
	}
	for _, e := range []error{CheckScale("X", X), CheckScale("Y", Y)} {
		if e != nil {
			return 0, 0, 0, e
		}
	}
	return n, d, m, nil
}

// CheckScale refuses a matrix of finite entries whose magnitude puts the
// sums of their squares outside float64's normal range: every learner forms
// such sums (covariances, Gram matrices, norms, the certificate), which
// overflow to +Inf when the largest magnitude exceeds √(MaxFloat64/N) for N
// entries (about 1e152 for 10⁴ entries) and lose precision, the squares
// being subnormal, when it is below √(smallest normal) ≈ 1.5e-154. A zero
// matrix passes (the learners say what they need of it). The error wraps
// errs.ErrInput and says how to rescale.
func CheckScale(name string, A *mat.Dense) error {
	raw := A.RawMatrix()
	big := 0.0
	for i := 0; i < raw.Rows; i++ {
		for _, v := range raw.Data[i*raw.Stride : i*raw.Stride+raw.Cols] {
			// A plain comparison: math.Max's NaN and signed-zero cases
			// made this pass 20 ns an entry (the callers check NaN).
			if a := math.Abs(v); a > big {
				big = a
			}
		}
	}
	entries := float64(raw.Rows) * float64(raw.Cols)
	hi, lo := math.Sqrt(math.MaxFloat64/entries), math.Sqrt(minNormal)
	switch {
	case big > hi:
		return errs.Inputf("%s's largest entry is %.3g in magnitude; its sums of squares (covariances, norms) overflow float64 above %.3g for %.0f entries: divide %s by a constant (its largest entry, say) and scale the learned weights back", name, big, hi, entries, name)
	case big > 0 && big < lo:
		return errs.Inputf("%s's largest entry is %.3g in magnitude; below %.3g its squares lose precision (subnormal float64): multiply %s by a constant (1/its largest entry, say) and scale the learned weights back", name, big, lo, name)
	}
	return nil
}

// minNormal is the smallest positive normal float64, 2^−1022.
const minNormal = 0x1p-1022
