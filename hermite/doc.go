// Package hermite provides probabilists' Hermite polynomials and the Gaussian
// Hermite coefficients of activations, which decide the moment order a
// tensor method can use (Bakshi, Jayaram, Woodruff §4.2; specs/001 §2.4: the
// printed order-3 tensor is identically zero for the ReLU, so order 4 is used).
package hermite
