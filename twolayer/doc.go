// Package twolayer learns two-layer ReLU networks y = U·ReLU(V·x) from
// samples, exactly when the data are noiseless, following Bakshi, Jayaram,
// Woodruff, "Learning two layer rectified neural networks in polynomial time"
// ([BJW19] in docs/papers.md), in a practical form whose deviations docs/twolayer.md lists.
//
// Conventions. The paper stores samples as columns (X ∈ R^{d×n},
// A = U*·f(V*·X) ∈ R^{m×n}); this package stores them as rows, like numpy and
// PyTorch: X is n×d, Y is n×m and Y = ReLU(X·Vᵀ)·Uᵀ with V k×d and U m×k
// (PyTorch's nn.Linear layout). The paper's "row span of A" (a subspace of
// R^n) is therefore the column span of Y here, and its Ā/X̄ (the first ℓ
// columns) are the first ℓ rows of Y/X.
//
// Hidden units are identifiable up to permutation and positive scaling (no
// sign symmetry for the ReLU). Results are normalised by nn.MLP.Canonical:
// unit rows of V, units sorted by the norm of their output weights.
//
// Routes (Fit chooses from the data and says why; each is also callable on
// its own):
//
//   - TensorStart: rank and output reduction, optional whitening (Remark 3),
//     the order-1/order-2 moment for the span of V, the order-r Hermite moment
//     in k dimensions (r = 4 for the ReLU: the paper's order-3 tensor is
//     identically zero) and Jennrich with retries. Gives ±V approximately.
//   - The parity start (not in [BJW19]; parity.go): for the ReLU, the
//     exact route's first start, from second moments only — the regression
//     of the outputs on x is the odd half of ReLU(t) = t/2 + |t|/2, and the
//     columns of the output mixing's inverse solve quadratic equations in
//     the two halves. Cheaper and more accurate than the tensor start, which
//     remains its fallback (Options.Start).
//   - ExactPolish (Alg 5 in margin form): makes each row exact by solving
//     linear systems on confidently inactive samples, with a per-unit and a
//     global residual certificate. Start (parity or tensor) + polish is
//     RouteExact.
//   - RecoverSigns (Alg 6) and SolveU (Lemma 20): the noisy route; Refine is
//     an optional local least-squares refinement (not in the paper).
//   - FitICA (Alg 3): FastICA for orthonormal V, then the polish.
//   - FitFPT (Alg 7): U without full column rank (even m < k), from the
//     outputs of samples where one unit alone is active.
//   - WorstCase (Alg 1–2, Lemma 1): any X, by sign-pattern enumeration and
//     linear programs; exponential in k.
//   - FitSparse (§8, Cor 8): robust PCA (package rpca), then the exact route.
//   - Alg 8's practical pieces (HalfspaceEstimate, Alg8Labels, Alg8Select,
//     Alg8GridK1): the full algorithm enumerates an astronomically large grid.
//
// Options.Activation extends the Gaussian routes to the rectified φ of §9.1
// (x^c, e^x − 1).
package twolayer
