// Package tensor provides symmetric moment tensors in a few dimensions, the
// empirical Hermite moments of weighted samples (streamed in fixed chunks so
// results do not depend on the worker count), and Jennrich's simultaneous
// diagonalisation — the building blocks of the tensor start of [BJW19,
// Alg 4]. For the depth-2 learner of [ATV21] it also provides symmetric tensors of any order that store only
// their distinct entries (Symmetric: flattenings in the symmetric basis,
// contractions, full contractions), and empirical Hermite moments of every
// order up to 12 streamed over samples in one pass (HermiteMoments).
package tensor
