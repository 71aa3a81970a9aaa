// Package synth generates seeded synthetic problems: teacher networks with a
// controlled conditioning, Gaussian inputs, and noisy labels, following the
// instance generators the tests of [BJW19] and [MR18] need.
//
// Every function takes its randomness from an explicit *rand.Rand
// (math/rand/v2); NewRand(seed) is the project's way to make one, and each
// generator documents the order in which it draws, so a seed reproduces an
// instance exactly. Work that runs in parallel (the forward pass, the
// covariance transform) writes disjoint rows of fixed chunks and reduces in a
// fixed order, so results do not depend on GOMAXPROCS.
//
// Conventions follow DESIGN.md: samples are rows (X is n×d, Y is n×m), and a
// two-layer teacher is Y = ReLU(X·Vᵀ)·Uᵀ with V k×d (unit rows) and U m×k,
// returned as an *nn.MLP built by nn.NewTwoLayer.
package synth
