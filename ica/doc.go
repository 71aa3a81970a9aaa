// Package ica implements independent component analysis by FastICA
// (Hyvärinen & Oja 2000): given samples x = mean + A·s of a mixture of
// independent, non-Gaussian sources s, it estimates the mixing matrix A and
// the sources, up to the order, sign and scale of the sources that ICA cannot
// identify.
//
// It is the ICA step of Bakshi, Jayaram, Woodruff's Alg 3 ([BJW19, Alg 3]):
// the hidden activations of a two-layer ReLU network with orthonormal first
// layer and Gaussian inputs are independent rectified Gaussians, mixed by the
// output layer. The paper uses the [AGMS12] algorithm as a black box with
// 1/poly accuracy; FastICA is the practical choice, with accuracy ~1/√n, which
// is why the twolayer ICA route follows it with an exact polish.
//
// Conventions follow DESIGN.md and scikit-learn's FastICA: samples are rows
// (X is n×p), Mixing is p×c (sklearn's mixing_) and Unmixing c×p
// (components_), Sources n×c with zero mean and unit variance. Differences
// from scikit-learn: Tol measures how far an unmixing row moves (≈ radians)
// instead of 1 − |cos| (≈ its square), with default 1e-10; every source is
// signed to have non-negative skewness, so results are reproducible; and a
// run that does not converge returns ErrNotConverged with its last iterate
// instead of a warning.
package ica
