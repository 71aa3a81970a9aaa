// Package rpca separates a data matrix into a low-rank part and a sparse part,
// A = L + S, by principal component pursuit (Candès, Li, Ma, Wright, "Robust
// principal component analysis?", 2011) — step 1 of the sparse-noise
// algorithm of Bakshi, Jayaram, Woodruff §8 (Theorem 14, Corollary 8;
// [BJW19, §8, Theorem 14]), which cleans the outputs of a two-layer ReLU network
// before the exact route runs on them.
//
// Conventions. A is n×m with samples as rows (the twolayer package's Y), so
// the paper's m×n A is our Aᵀ; PCP is symmetric under transposition and λ =
// 1/√max(n, m) is the same either way. Inputs are never modified.
//
// Solver. PCP (min ‖L‖_* + λ‖S‖₁ s.t. L + S = A) is solved by the inexact
// augmented Lagrangian method with the usual defaults (μ₀ = 1.25/‖A‖₂,
// ρ = 1.5, stop at ‖A − L − S‖_F/‖A‖_F < 1e-9, ≤ 500 iterations). The
// singular value thresholding uses the Gram matrix of the short side, so an
// iteration on a 10000×200 matrix costs one 10000·200² product and a 200×200
// eigensolve.
//
// Debias (our addition). PCP's answer is accurate only to its stopping
// tolerance (~1e-9 relative), too coarse for the exact polish downstream.
// Debias takes the support of S and the rank of L from PCP and refits L as the
// best rank-r fit of A on the entries not flagged as corrupted; when the
// corruption is exactly sparse this recovers the low-rank part to rounding
// error (≈1e-15) and flags exactly the corrupted entries.
package rpca
