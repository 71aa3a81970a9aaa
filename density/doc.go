// Package density describes the bias distribution B of the ReLU generative
// model Y = ReLU(A·C + b·1ᵀ) and of robust recovery v = ReLU(A·c + b) + e + w
// (Mazumdar, Rawat, "Representation learning and recovery in the ReLU model",
// [MR18, (7), (8) and Theorem 3]).
//
// A Density gives everything the solvers need: log p, the score (log p)′,
// the CDF and its logarithm, the reverse hazard p/F, the quantile (hence
// sampling by inverse CDF), the mode and the support. Gaussian, Logistic,
// Laplace, ShiftedExp and Uniform are built in; NewCustom wraps any density
// given by its log-pdf, score and CDF, after checking numerically that it is
// one (it integrates to 1 and its CDF is the integral of its pdf).
//
// The paper's constants of Theorem 3 — the flatness β_γ(p), the Lipschitz
// constant L_γ(p) and the interval mass ω_{p,γ,ν} — have closed forms for the
// built-in densities and a numeric fallback (grid plus
// golden-section polish) for any density; Theorem3Bound combines them and is
// +Inf, not a division by zero, whenever β_γ = 0 (a Gaussian or logistic bias
// whose mode lies in [−γ, γ], any uniform bias).
//
// The package is separate from generative and robust because both use it:
// generative for the likelihood and the Theorem 3 bound, robust for the
// scale μ = E_b Φ(b) and the plug-in threshold.
package density
