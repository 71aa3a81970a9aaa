package blasbackend

import (
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/blas/gonum"
)

// Native reports whether blas64 runs a native BLAS (OpenBLAS under the
// openblas tag) rather than gonum's pure-Go kernels. The hand-written sample
// kernels (linalg.AddGram, internal/outer.Add) beat gonum's pure-Go Dsyrk
// and Dgemm on narrow row-major chunks, but not an optimised native BLAS, so
// they hand their work to blas64 when this is true. It looks at the
// implementation in use, so it also holds for a program that called
// blas64.Use itself.
func Native() bool {
	_, pure := blas64.Implementation().(gonum.Implementation)
	return !pure
}
