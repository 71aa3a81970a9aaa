package dataio

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/kern"
)

// CheckFinite returns an error wrapping ErrNonFinite that names the array,
// the first offending entry (0-based row and column, in row-major order) and
// its value, e.g. "X has NaN at row 17, column 3", or nil when every entry is
// finite. Learners assume finite data: one NaN silently poisons every moment
// estimate, so inputs are checked once at the edge.
func CheckFinite(name string, m mat.Matrix) error {
	return CheckFiniteFrom(name, m, 0)
}

// CheckFiniteFrom is CheckFinite for a block of rows that starts at row
// first of a larger array (read a block at a time): the error names the
// row in the whole array.
func CheckFiniteFrom(name string, m mat.Matrix, first int) error {
	if m == nil {
		return nil
	}
	if d, ok := m.(*mat.Dense); ok {
		raw := d.RawMatrix()
		for i := 0; i < raw.Rows; i++ {
			row := raw.Data[i*raw.Stride : i*raw.Stride+raw.Cols]
			if kern.Finite(row) {
				continue
			}
			for j, v := range row {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					return nonFinite(name, first+i, j, v)
				}
			}
		}
		return nil
	}
	r, c := m.Dims()
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			if v := m.At(i, j); math.IsNaN(v) || math.IsInf(v, 0) {
				return nonFinite(name, first+i, j, v)
			}
		}
	}
	return nil
}

func nonFinite(name string, i, j int, v float64) error {
	s := "NaN"
	switch {
	case math.IsInf(v, 1):
		s = "+Inf"
	case math.IsInf(v, -1):
		s = "-Inf"
	}
	return fmt.Errorf("%s has %s at row %d, column %d (0-based): %w", name, s, i, j, ErrNonFinite)
}
