// Package generative learns the representation of the ReLU generative model
// Y = ReLU(A·C + b·1ᵀ) of Mazumdar and Rawat, "Representation learning and
// recovery in the ReLU model" ([MR18, §3]; conference version [MR19]):
// only Y is observed, the
// bias b has iid coordinates from a density p shared by all observations,
// and the goal is col(A) and M = A·C in its identifiable, centred form.
//
// Layout. The paper stores observations as columns (Y ∈ R^{d×n}); this
// package stores them as rows, like numpy: Y is n×d and
// Y = ReLU(C·Aᵀ + 1·bᵀ) with A d×k (the nn.Linear(k→d) weight of the
// generator) and C n×k. The paper's "row i" (neuron i) is column i here, and
// the paper's row-centring M·P⊥ is the centring of each column of our M over
// the observations.
//
// Identifiability (our analysis; docs/generative.md). (A, C, b) and (A, C − 1wᵀ, b + Aw) give the
// same Y, so M is determined only up to 1·(Aw)ᵀ. The identifiable targets are
// col(A) (Result.Basis) and the centred M (Result.MCentred). With the bias
// density known, Result.M and Result.Bias pick the gauge by maximum
// likelihood of the prior, as the paper's estimator does implicitly.
//
// Solvers.
//
//   - FitALS (Solver B, the default): censored alternating least squares in
//     the centred gauge Z = V·Uᵀ + 1·oᵀ, equality on the positive entries,
//     squared hinge Z ≤ −ν_c on the zeros, exact active-set Newton steps per
//     neuron and per observation. Needs no bias density.
//   - FitADMM (Solver A): the paper's maximum-likelihood program (34) in the
//     index form of [MR18, (24)–(29)], with the rank-k or nuclear-norm
//     constraint the printed program lacks (without it the
//     maximiser is not unique and estimates b from the prior alone).
//   - Baselines N1–N5, ours (not in the paper) (BaselineSVD, BaselineCentredSVD,
//     BaselinePositivePart, BaselineMissing, OracleKnownBias).
//   - PeelDecode: the multi-layer "peeling" proposal of [MR19], as a
//     concrete but EXPERIMENTAL design of ours, without guarantees.
//
// Diagnostics report the rows the data cannot identify: a neuron active on
// at most k observations carries at most k equations for its k + 1 unknowns, so its row of A is essentially free; ‖sinΘ‖ restricted to
// rows with at least k + 2 positive entries (SinThetaRows) measures the
// rest.
package generative
