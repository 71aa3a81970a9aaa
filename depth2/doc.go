// Package depth2 learns depth-2 ReLU networks with biases,
//
//	y = A·ReLU(W·x + b) + c   (one output: y = Σ_i a_i·ReLU(w_i·x + b_i)),
//
// from samples with Gaussian inputs, following the appendix of Awasthi,
// Tang, Vijayaraghavan, "Efficient algorithms for learning depth-2 neural
// networks with general ReLU activations" [ATV21], in a practical form whose
// deviations from the paper docs/depth2.md lists and measures.
//
// Conventions. The paper writes f(x) = aᵀσ(Wᵀx + b) with W ∈ R^{d×m} (units
// as columns) and samples as columns; this package stores samples as rows
// (X n×d, Y n×p) and W as m×d (PyTorch's nn.Linear layout, units as rows):
// Y = ReLU(X·Wᵀ + 1·bᵀ)·Aᵀ + 1·cᵀ. The paper's Hermite coefficients f_k =
// E[f(x)·He_k(x)] (no 1/k!) are Moments.T[t][k], stored as symmetric tensors
// (tensor.Symmetric).
//
// Identifiability. Units are recovered up to permutation and positive
// scaling (results use the paper's normalisation ‖w_i‖ = 1,
// nn.Depth2.Normalize). The Hermite moments of order ≥ 2 do not change under
// the joint sign flip (w_i, b_i) → (−w_i, −b_i) ([ATV21, Claim 4.7]); in the
// full-rank case (m ≤ d, ℓ = 1) the first moment fixes the signs
// (FixSigns), in the overcomplete case (d < m ≤ d(d+1)/2, ℓ = 2) the signs
// are resolved only through the absence of an affine term (ResolveSigns),
// and may be genuinely ambiguous (Claim 4.8). Units with large |b_i| have
// exponentially small moments and are approximated by an affine term
// (Algorithm 5).
//
// Entry points, one per algorithm of the paper, and Fit, which chooses:
//
//   - PopulationMoments: the exact moments of a network (Lemma 3.5).
//   - EstimateMoments: moments from samples, with dimension reduction
//     through T̂_2, residualised outputs and split-half noise estimates.
//   - RecoverExact: Algorithm 1 (+ Algorithm 3 for ℓ = 1), from exact
//     moments.
//   - RecoverRobust: Algorithm 4 with noise-calibrated thresholds.
//   - RecoverScalars, FixSigns: Algorithms 2 and 3.
//   - LearnFullRank: Algorithm 6 (Algorithm 4 with ℓ = 1, then FixSigns).
//   - FitImproper, Improper.Merge: Algorithm 5 and the merge of Claim D.14.
//   - Refine: local Levenberg–Marquardt refinement (not in the paper) that
//     turns the moment estimate into a float64-exact answer on noiseless
//     data, with a residual certificate.
//   - Fit: moments → units → least squares → refinement (with deflation of
//     missing units and sign resolution) → certificate.
package depth2
