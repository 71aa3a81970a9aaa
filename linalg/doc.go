// Package linalg provides the dense linear algebra that gonum's mat package
// lacks and that relurec's exact-recovery routes ([BJW19], [ATV21]) lean on:
// thin and top-k SVDs that stay accurate for the tall n×k matrices of sample
// data, numerical rank, pseudo-inverse, null space, orthonormal bases,
// QR least squares with a rank check, principal angles between subspaces,
// orthogonal Procrustes alignment, symmetric inverse square roots (whitening)
// and Haar-random orthogonal matrices.
//
// Conventions. Matrices are float64 gonum matrices; inputs are never
// modified. Every function checks its input (nil, empty, NaN/Inf, shapes)
// and returns an error wrapping one of the exported sentinels (ErrShape,
// ErrNotFinite, ErrRankDeficient, ErrNotPositiveDefinite, ErrNoConvergence)
// instead of panicking. Rank tolerances are relative to the largest singular
// value; a tolerance ≤ 0 means max(r, c)·ε, the numpy.linalg.matrix_rank
// convention.
//
// Accuracy. The exact routes decide ranks from ratios such as
// σ_{k+1}/σ_1 < 1e-10, so nothing here forms a Gram matrix aᵀa (which would
// square the condition number and stop resolving ratios near 1e-8): tall
// matrices go through a blocked Householder QR (TSQR) and the SVD of the
// small R factor, and least squares uses the same QR. The one exception is
// GramLstSq, for data streamed in chunks: normal equations with a condition
// check (ErrIllConditioned above κ(FᵀF) = MaxGramCond, for the caller to
// fall back to QR) and one step of iterative refinement.
//
// Speed and reproducibility. The TSQR cuts rows into fixed ~1 MiB blocks
// that are factorized in parallel; the blocking depends only on the shape,
// so results are identical at any GOMAXPROCS.
package linalg
