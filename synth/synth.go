package synth

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/parallel"
	"github.com/relurec/relurec/internal/rng"
	"github.com/relurec/relurec/linalg"
)

// Sentinel errors; every error from this package wraps one of them.
var (
	// ErrConfig reports an invalid size, condition number, noise setting or
	// a nil random source.
	ErrConfig = errs.New("synth: invalid configuration", errs.ErrInput)
	// ErrShape reports matrices whose dimensions do not fit together, or a
	// network that is not a bias-free two-layer ReLU network.
	ErrShape = errs.New("synth: bad shape", nil)
	// ErrNotPositiveDefinite reports a covariance without a Cholesky factor.
	ErrNotPositiveDefinite = errs.New("synth: covariance is not positive definite", nil)
	// ErrNotFinite reports a NaN or Inf input.
	ErrNotFinite = errs.New("synth: NaN or Inf entry", nil)
)

// NewRand returns the random source for a seed, rng.New(seed):
// rand.New(rand.NewPCG(seed, 0x9E3779B97F4A7C15)), math/rand/v2's PCG-DXSM
// generator. The stream is fixed by the Go standard library's documented
// algorithm, so the same seed gives the same instance on every platform and
// Go version that keeps PCG unchanged. Use a distinct seed (or source) per
// independent piece of an experiment rather than sharing one source across
// goroutines: *rand.Rand is not safe for concurrent use.
func NewRand(seed uint64) *rand.Rand { return rng.New(seed) }

// chunkRows is the fixed row-chunk size of parallel loops; it is a constant
// so that chunking (and any per-chunk reduction) never depends on the
// machine.
const chunkRows = 2048

// logSpaced returns n values c^{i/(n−1)}, i = 0…n−1 (ascending from 1 to c);
// a single value is 1.
func logSpaced(n int, c float64) []float64 {
	s := make([]float64, n)
	for i := range s {
		if n == 1 {
			s[i] = 1
			continue
		}
		s[i] = math.Exp(math.Log(c) * float64(i) / float64(n-1))
	}
	return s
}

// RandomCovariance returns a d×d symmetric positive definite matrix
// Q·diag(λ)·Qᵀ with eigenvalues λ log-spaced in [1, cond] (so κ = cond) and Q
// = linalg.RandomOrthogonal(d, rng) (Haar). It is the input covariance of the
// whitening tests ([BJW19, Remark 3]). For d = 1 the single eigenvalue
// is 1. It returns nil for d < 1, cond < 1 or non-finite, or a nil rng.
func RandomCovariance(d int, cond float64, rng *rand.Rand) *mat.SymDense {
	if d < 1 || rng == nil || !(cond >= 1) || math.IsInf(cond, 0) {
		return nil
	}
	q := linalg.RandomOrthogonal(d, rng)
	lam := logSpaced(d, cond)
	var ql mat.Dense
	ql.Mul(q, mat.NewDiagDense(d, lam))
	var full mat.Dense
	full.Mul(&ql, q.T())
	s := mat.NewSymDense(d, nil)
	for i := 0; i < d; i++ {
		for j := i; j < d; j++ {
			s.SetSym(i, j, 0.5*(full.At(i, j)+full.At(j, i)))
		}
	}
	return s
}

// GaussianInputs returns an n×d matrix whose rows are i.i.d. N(0, cov); cov
// nil means the identity. Stream: n·d draws of rng.NormFloat64 in row-major
// order give Z, and X = Z·Lᵀ with L the lower Cholesky factor of cov (so with
// cov nil, X is exactly those draws). The draws fill the backing slice
// directly and the transform runs in parallel over fixed row chunks (so the
// result does not depend on GOMAXPROCS); n = 1e6, d = 30 takes ~0.3 s. A cov that is
// not symmetric positive definite gives an error wrapping
// ErrNotPositiveDefinite.
func GaussianInputs(n, d int, cov *mat.SymDense, rng *rand.Rand) (*mat.Dense, error) {
	if n < 1 || d < 1 {
		return nil, fmt.Errorf("synth.GaussianInputs: %w: n = %d, d = %d, both must be ≥ 1", ErrConfig, n, d)
	}
	if n > math.MaxInt/8/d {
		return nil, fmt.Errorf("synth.GaussianInputs: %w: n·d = %d·%d entries do not fit in memory", ErrConfig, n, d)
	}
	if rng == nil {
		return nil, fmt.Errorf("synth.GaussianInputs: %w: rng is nil", ErrConfig)
	}
	var chol []float64 // d×d lower factor, row-major
	if cov != nil {
		if cd := cov.SymmetricDim(); cd != d {
			return nil, fmt.Errorf("synth.GaussianInputs: %w: cov is %d×%d, want %d×%d", ErrShape, cd, cd, d, d)
		}
		for i := 0; i < d; i++ {
			for j := i; j < d; j++ {
				if v := cov.At(i, j); math.IsNaN(v) || math.IsInf(v, 0) {
					return nil, fmt.Errorf("synth.GaussianInputs: %w: cov[%d,%d] = %v", ErrNotFinite, i, j, v)
				}
			}
		}
		var c mat.Cholesky
		if !c.Factorize(cov) {
			return nil, fmt.Errorf("synth.GaussianInputs: %w (Cholesky failed)", ErrNotPositiveDefinite)
		}
		var l mat.TriDense
		c.LTo(&l)
		chol = make([]float64, d*d)
		for i := 0; i < d; i++ {
			for j := 0; j <= i; j++ {
				chol[i*d+j] = l.At(i, j)
			}
		}
	}
	data := make([]float64, n*d)
	for i := range data {
		data[i] = rng.NormFloat64()
	}
	if chol != nil {
		// X_chunk = Z_chunk·Lᵀ with a BLAS-3 kernel on a worker-local copy of
		// each fixed chunk (gemm cannot work in place).
		nc := (n + chunkRows - 1) / chunkRows
		lt := blas64.General{Rows: d, Cols: d, Stride: d, Data: chol}
		scratch := make([][]float64, runtime.GOMAXPROCS(0))
		parallel.For(nc, func(w, c int) {
			r0, r1 := c*chunkRows, min(n, (c+1)*chunkRows)
			scratch[w] = append(scratch[w][:0], data[r0*d:r1*d]...)
			z := blas64.General{Rows: r1 - r0, Cols: d, Stride: d, Data: scratch[w]}
			x := blas64.General{Rows: r1 - r0, Cols: d, Stride: d, Data: data[r0*d : r1*d]}
			blas64.Gemm(blas.NoTrans, blas.Trans, 1, z, lt, 0, x)
		})
	}
	return mat.NewDense(n, d, data), nil
}
