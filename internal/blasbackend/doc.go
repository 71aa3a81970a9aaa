// Package blasbackend selects the BLAS and LAPACK implementation that gonum's
// blas64 and lapack64 use for the whole program, chosen at build time.
//
// The default build uses gonum's own pure-Go kernels and needs no cgo. Built
// with the tag "openblas" (and CGO_ENABLED=1, Debian packages libopenblas-dev
// and liblapacke-dev), the package's init routes blas64 to OpenBLAS through
// gonum.org/v1/netlib/blas/netlib and lapack64 to LAPACKE through
// gonum.org/v1/netlib/lapack/netlib:
//
//	go build -tags openblas ./cmd/relurec
//	scripts/openblas.sh test|build|bench
//
// Nothing else changes: every package keeps calling gonum (mat, blas64,
// lapack64). A program opts in by importing this package for its side effect,
// as cmd/relurec does:
//
//	import _ "github.com/relurec/relurec/internal/blasbackend"
//
// OpenBLAS runs its own thread pool, sized by OPENBLAS_NUM_THREADS (default:
// one thread per core) and independent of GOMAXPROCS; set
// OPENBLAS_NUM_THREADS=1 GOMAXPROCS=1 for single-threaded comparisons.
// Results can differ from the pure-Go build in the last bits (different
// summation order in the kernels), so bit-for-bit reproducibility holds within
// one backend, not across the two.
package blasbackend

// Name returns the BLAS/LAPACK backend compiled into this program:
// "gonum (pure Go)" for the default build, "OpenBLAS" with the tag openblas.
func Name() string { return name }
