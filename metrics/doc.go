// Package metrics compares networks up to the symmetries their weights are
// only identifiable up to.
//
// For a bias-free two-layer ReLU network Y = ReLU(X·Vᵀ)·Uᵀ (V k×d, U m×k,
// PyTorch layout) those symmetries are a permutation of the hidden units and
// a positive rescaling of each unit (ReLU(c·t) = c·ReLU(t) for c > 0), and
// nothing else: ReLU(−t) ≠ −ReLU(t), so a unit whose row of V has the wrong
// sign is a different unit ([BJW19, §1.2]).
// CompareTwoLayer therefore normalises both networks to unit rows of V, moving
// the scale into U's columns, matches hidden units by the assignment that
// maximises the total cosine (not |cosine|) between rows of V, and reports
// the worst row and column errors under that matching.
//
// One could suggest matching by |cosine|; that would pair a
// unit with its sign flip, which ReLU does not allow, so this package
// matches by signed cosine.
package metrics
