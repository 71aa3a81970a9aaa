package certify

import (
	"math"

	"gonum.org/v1/gonum/mat"
)

// Unit roundoffs of the storage precisions Roundoff tells apart.
const (
	Float64Roundoff = 0x1p-53
	Float32Roundoff = 0x1p-24
)

// Roundoff is the unit roundoff of the precision the data were stored in:
// Float32Roundoff when every entry of every matrix is a float32 value (data
// read from float32 .npy files, or converted from float32 arrays), else
// Float64Roundoff. Data rounded to float32 carry relative errors near 1e-8
// that no float64 fit can remove, so tests of numerical rank and the
// certificate's tolerance must scale with it (DefaultTol). Float64 data
// fail the test at their first entry with more than 24 significant bits,
// so the check costs one pass over float32 data and almost nothing
// otherwise. Integer-valued matrices (pixel counts, labels) are float32
// values too; an X of integers still counts as float64 data when Y is not.
func Roundoff(ms ...*mat.Dense) float64 {
	for _, m := range ms {
		if m == nil {
			continue
		}
		r, c := m.Dims()
		for i := 0; i < r; i++ {
			for _, v := range m.RawRowView(i)[:c] {
				if float64(float32(v)) != v && !math.IsNaN(v) {
					return Float64Roundoff
				}
			}
		}
	}
	return Float32Roundoff
}

// DefaultTol is the default certificate tolerance for data of unit roundoff
// u: 1e-10 for float64 data (four orders above the float64 floor) and 16·u
// for coarser data (9.5e-7 for float32, where the right network leaves
// relative residuals of 3e-8…4e-8 from the rounding of X and Y alone, and a
// wrong one fitted to too few samples was seen at 1.3e-6).
func DefaultTol(u float64) float64 {
	return math.Max(1e-10, 16*u)
}

// PrecisionName names a unit roundoff for reports: "float64", "float32".
func PrecisionName(u float64) string {
	if u >= Float32Roundoff {
		return "float32"
	}
	return "float64"
}

// RankTol is the relative singular value below which a matrix of data with
// unit roundoff u counts as exactly low-rank: 1e-10 for float64 data (a
// practical default, not a theorem's), 64·u (3.8e-6) for float32 data,
// whose rounding alone puts the "zero" singular values near 1e-7 relative
// (a float32 copy of 20-5-8 data showed σ_6/σ_1 = 8e-8).
func RankTol(u float64) float64 { return math.Max(1e-10, 64*u) }

// RoundingResidual is the relative residual the right network leaves on
// noiseless data of unit roundoff u: 1e-12 for float64 data, 2·u (1.2e-7)
// for float32 data, whose rounding of X and Y alone leaves 3e-8…4e-8. An
// exact fit re-solved on a subsample re-solves on all samples above it.
func RoundingResidual(u float64) float64 { return math.Max(1e-12, 2*u) }
