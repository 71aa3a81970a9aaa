//go:build slow

package twolayer

import "testing"

// TestFitSparseRecoversWeights ([BJW19, §8, Cor 8]) over more seeds at
// n = 10000 (≈2.5 s per seed).
func TestFitSparseRecoversWeightsSlow(t *testing.T) {
	checkSparseRecovery(t, []uint64{2, 3, 4, 5, 6}, 10000)
}
