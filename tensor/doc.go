// Package tensor provides symmetric moment tensors in a few dimensions, the
// empirical Hermite moments of weighted samples (streamed in fixed chunks so
// results do not depend on the worker count), and Jennrich's simultaneous
// diagonalisation — the building blocks of the tensor start of Bakshi,
// Jayaram, Woodruff Alg 4 (specs/001 §2.4).
package tensor
