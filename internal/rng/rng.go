// Package rng is the project's seeded random source: one seed, one stream,
// the same on every platform.
package rng

import "math/rand/v2"

// pcgStream is the second 64-bit word of the PCG state; fixing it makes a
// seed a single uint64 while keeping the two state words different.
const pcgStream = 0x9E3779B97F4A7C15

// New returns the random source for a seed:
// rand.New(rand.NewPCG(seed, 0x9E3779B97F4A7C15)), math/rand/v2's PCG-DXSM
// generator. The stream is fixed by the Go standard library's documented
// algorithm, so the same seed gives the same numbers on every platform and
// Go version that keeps PCG unchanged. Use a distinct seed (or source) per
// independent piece of work rather than sharing one source across
// goroutines: *rand.Rand is not safe for concurrent use.
func New(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, pcgStream))
}
