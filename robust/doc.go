// Package robust recovers a latent code c from one corrupted ReLU
// observation v = ReLU(A·c + b) + e + w, with A (d×k) known, b a random bias,
// e sparse outliers and w small dense noise, by the generalized LASSO (47) of
// Mazumdar and Rawat, "Representation learning and recovery in the ReLU
// model" ([MR18, §4, (47) and Theorem 4]):
//
//	(ĉ, ê) = argmin_{c,e} (1/2d)·‖v − A·c − e‖² + λ·‖e‖₁.
//
// The ReLU observations are treated as linear ones (the Plan–Vershynin
// reduction), so ĉ estimates μ·c* with the known scale μ = E_b Φ(b)
// (ScaleMoments), not c* itself.
//
// How it is solved. Eliminating e turns (47) into Huber regression with
// threshold τ = λ·d (an exact reformulation, not in the paper): ĉ = argmin_c Σᵢ H_τ(vᵢ − aᵢᵀc) and
// ê = S_τ(v − Aĉ). The primary solver is a semismooth Newton method on that
// k-dimensional problem, started from least squares, whose k×k systems reuse
// the Gram matrix AᵀA (only the outlier rows are subtracted), so a solve at
// d = 20000, k = 50 costs a few matrix–vector products. The block-coordinate
// (= ISTA with step d) and FISTA solvers of the e-LASSO formulation are
// cross-checks. Every solution carries a KKT certificate (Aᵀr = 0,
// r = τ·sign(ê) on the support of ê, |r| ≤ τ off it, with r = v − Aĉ − ê).
//
// Layout. A single observation v has length d. Many observations are rows of
// an n×d matrix V (RecoverAll), and the codes come back as rows of an n×k
// matrix, like samples in numpy. A is d×k, the nn.Linear(k→d) weight layout
// of the generator.
//
// The threshold: an explicit τ or λ, or a rule (Options.Rule): "mad"
// (default; needs nothing), "plugin" (needs the bias density and the noise
// bound δ), or "oracle" (needs z + w, for tests of the theorem). Variants (docs/robust.md;
// all but the linear model and the sparse code are not in the paper): no outliers (τ = +Inf, least squares), the linear model
// (μ = 1), a sparse code (an extra ℓ1 penalty on c), an unpenalised
// intercept, and a known outlier support (least squares on the other rows).
package robust
