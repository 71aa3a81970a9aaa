// Package hermite provides probabilists' Hermite polynomials and the Gaussian
// Hermite coefficients of activations, which decide the moment order a
// tensor method can use (Bakshi, Jayaram, Woodruff §4.2; specs/001 §2.4: the
// printed order-3 tensor is identically zero for the ReLU, so order 4 is used).
// For ReLU units with biases it gives the coefficients c_k(b) of Awasthi,
// Tang, Vijayaraghavan Lemma 3.5 (ReLUBias), Gaussian special functions
// stable far into the tails (NormCDF, LogNormCDF, NormHazard, ReLUMean) and
// the bivariate normal CDF (BivariateNormalCDF) behind the closed-form L2
// distance between depth-2 networks (specs/004 §7.3).
package hermite
