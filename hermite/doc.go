// Package hermite provides probabilists' Hermite polynomials and the Gaussian
// Hermite coefficients of activations, which decide the moment order a
// tensor method can use ([BJW19, Alg 4]; an erratum: the printed order-3
// tensor is identically zero for the ReLU, so order 4 is used, docs/twolayer.md).
// For ReLU units with biases it gives the coefficients c_k(b) of Awasthi,
// Tang, Vijayaraghavan [ATV21, Lemma 3.5] (ReLUBias), Gaussian special functions
// stable far into the tails (NormCDF, LogNormCDF, NormHazard, ReLUMean) and
// the bivariate normal CDF (BivariateNormalCDF) behind the closed-form L2
// distance between depth-2 networks (metrics.L2Depth2).
package hermite
