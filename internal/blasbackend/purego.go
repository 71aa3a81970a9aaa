//go:build !openblas

package blasbackend

// name: without the openblas tag gonum's pure-Go blas64 and lapack64 defaults
// are left in place.
const name = "gonum (pure Go)"
