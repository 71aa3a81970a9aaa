// Package extract recovers a one-hidden-layer ReLU network
//
//	f(x) = A·ReLU(W·x + b) + c   (W m×d in PyTorch's layout, A p×m)
//
// to float64 precision from black-box queries alone (model extraction),
// with adaptively chosen queries. It follows the critical-point approach
// of the cryptanalytic extraction literature (Carlini, Jagielski, Mironov,
// "Cryptanalytic extraction of neural network models", CRYPTO 2020;
// Jagielski et al. 2020): f is piecewise linear, and every unit's
// hyperplane w_i·x + b_i = 0 is a kink of f along almost every line.
//
// Algorithm (Extract):
//
//  1. Lines. Along x(t) = x0 + t·v (x0 standard Gaussian, v a random unit
//     vector) unit i bends f at t_i = −(w_i·x0 + b_i)/(w_i·v). A grid
//     uniform in atan(t/√d) (the t_i are ratios of Gaussians of scale √d)
//     is queried in one batch; triples of samples that are not collinear
//     beyond the oracle's rounding (estimated from the straight ones) mark
//     stretches with kinks. A stretch between two affine pieces is
//     hypothesised to hold one kink, at the pieces' intersection t*, and
//     the hypothesis is tested at t* ± ε; stretches that fail get a
//     sub-grid, recursively. This costs a few queries per kink.
//  2. Units. On each side of a new kink f is affine on a d-dimensional
//     region; its Jacobian is measured by forward differences along the
//     coordinate axes from the middle of the piece (d + 1 queries, exact
//     up to rounding because f is affine there), plus one check query in
//     a random ±1 direction that must match J·s (steps are retried 8 and
//     64 times smaller if not). The jump ΔJ = J₊ − J₋ is â·ŵᵀ: rank one
//     (σ₂/σ₁ is checked for p ≥ 2), with ŵ the unit normal oriented so
//     that ŵ·v > 0, â = A_{:,i}·‖w_i‖ exactly, and b̂ = −ŵ·x(t*). ΔJ·v must
//     equal the slope change measured along the line. Pieces are shared by
//     neighbouring kinks, and a kink of a unit already found (its
//     hyperplane passes through x(t*) and its slope change matches) is not
//     measured: the Jacobian is carried across it. So a line with k new
//     units costs about (k + 1)·(d + 2) Jacobian queries.
//  3. Stopping. With Options.Hidden = m the search stops when m units
//     are found; with Hidden = 0 when a whole line brings no new unit;
//     either way the assembled network must reproduce every searched
//     line's samples near the origin to the certificate's tolerance (10×
//     it for a float32 oracle, which the least-squares polish follows).
//     Three lines in a row with no new unit, or MaxLines (64; 160 and no
//     three-line stop for a float32 oracle), end it otherwise.
//  4. Orientation and output bias. A unit found with the wrong
//     orientation contributes â·ReLU(−z) = â·ReLU(z) − â·z, so every
//     measured Jacobian equals Σ_i â_i ŵ_iᵀ·1[ŵ_i·x + b̂_i > 0] + L with L =
//     −Σ_{flipped} â_i ŵ_iᵀ. L is read off the Jacobians already measured,
//     the flips solved by least squares on the m×m Gram matrix and rounded
//     (no queries). c is the mean residual over the lines' samples.
//  5. Certificate: the relative residual ‖Y − f̂(X)‖/‖Y‖ on CertQueries
//     fresh standard Gaussian queries (default 256) against CertTol
//     (default 1e-10).
//
// Assumptions and limits. The oracle is the exact network evaluated in
// float64 (float32 weights evaluated in float64 are fine). An oracle
// computing in float32 rounds at ≈ 1e-7 relative, its Jacobian jumps at
// ≈ 1e-4: the line test measures the rounding; each unit's expected error
// is measured from its jump's part off rank one; jumps whose second
// singular value stands out of the noise bulk (kinks the line search
// merged) are rejected; copies of a unit are dropped after polish; the
// search stops at 10× the certificate's tolerance, and a Gauss–Newton
// least-squares fit of every parameter to 4·P/p fresh queries (refine,
// which also drops a copy of a unit that contributes next to nothing)
// brings the network to float32 accuracy. The certificate's tolerance is
// then 100× the measured rounding, with a warning. m ≤ d
// is needed for the orientation step (the ŵ_i must be linearly
// independent). A unit that is inactive, or active, everywhere on the
// searched lines (|t| ≤ Reach·√d) is invisible; a dead unit (never active)
// does not change f and is not reported. Units with identical hyperplanes
// are found as one.
//
// Measured (queries, parameter errors, time, and the comparison with
// Carlini et al.'s query counts): docs/extract.md, reproduced by
//
//	go test -tags slow ./extract -run TestSlow -v
//	/usr/bin/python3 bench/extract_fashion.py --seeds 3
//
// Deviations from Carlini et al.: their critical points come from binary
// search along lines and their weights from second differences at each
// critical point in every coordinate direction; here the kinks come from
// a grid with one-kink hypotheses (a few queries each) and the weights from
// Jacobian jumps measured on the affine pieces, which are shared between
// neighbouring kinks and carried across kinks of known units, so each new
// unit costs about d + 2 queries. Signs ("orientations") come from the
// affine part of the measured Jacobians instead of a separate search.
package extract
