//go:build openblas

package blasbackend

// The libraries are named here so that a plain `go build -tags openblas`
// links without CGO_LDFLAGS (netlib's packages leave linking to the user).
// Debian's libopenblas has no LAPACKE symbols: they come from liblapacke,
// which calls liblapack.so.3 — OpenBLAS's LAPACK when libopenblas-dev is
// installed (Debian's alternatives pick it over the reference LAPACK).

// #cgo LDFLAGS: -llapacke -lopenblas
import "C"

import (
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/lapack64"
	blasnetlib "gonum.org/v1/netlib/blas/netlib"
	lapacknetlib "gonum.org/v1/netlib/lapack/netlib"
)

const name = "OpenBLAS"

// init routes every blas64 and lapack64 call in the program (and so every
// gonum/mat operation) to OpenBLAS and LAPACKE. netlib's lapack
// Implementation satisfies gonum v0.17's lapack.Float64 (checked by the
// compiler here) and works with Debian 12's liblapacke-dev 3.11.
func init() {
	blas64.Use(blasnetlib.Implementation{})
	lapack64.Use(lapacknetlib.Implementation{})
}
