// Package compress shrinks trained MLPs by data-driven low-rank
// factorization after training, without labels, gradients or fine-tuning
// (Zhang & Saab, "Theoretical guarantees for low-rank compression of deep
// neural networks", [ZS25] in docs/papers.md).
//
// Conventions. The paper writes layers in row convention, Ỹ = X·W with
// samples as rows and W of shape d×d2; PyTorch stores Wᵀ (out × in). This
// package works in the paper's convention throughout (Problem.W is the
// PyTorch weight transposed) and converts once, at CompressMLP's edges. A
// compressed layer is a Factored map y = (x·A + InBias)·B + Bias, stored in
// a model file as two consecutive nn.Sequential Linear modules.
//
// Methods, each documented with its algorithm, cost and guarantee on its
// Method constant: Alg 1 (truncated SVD), Alg 2 (rank-constrained least
// squares, Theorem 3.1; routes QR, Gram and projection; the centred
// dense-bias Alg 2c by default), Alg 3 (CompressMLP with Sequential), Alg 4
// (ProjectPsi, Theorem 4.4), Alg 5 (ReLUMLE, Theorem 4.9), and the
// baselines SVD-LLM, ASVD, output PCA and input PCA (Alg 7). Fit computes a
// method once and yields every rank, so rank selection (a fixed rank, a global
// parameter budget, an energy threshold or a target layer error) costs
// nothing extra. Thm31Bound, Thm44Bound, Cor47Bound and Thm49Bound evaluate
// the theorems' bounds.
//
// Deviations from the paper, and why:
//   - The paper assumes known ranks; CompressMLP chooses them (Options).
//   - Whitening is made numerically safe: float64, inputs that are zero on
//     every calibration row (dead ReLU units) left out with zero weights,
//     QR (κ not squared) or Cholesky with a reported ridge when the rest
//     are numerically singular, or the pseudo-inverse route.
//   - The convex estimators are not exactly rank r; they are followed by
//     Alg 2c on their output for a real factorization (the paper stops at
//     the estimate), and their
//     radius is tunable because the paper's is usually inactive.
//   - The theorems are per layer; error propagation through the network is
//     not analysed by the paper and is measured instead (LayerReport).
package compress
