// Package extract recovers a one-hidden-layer ReLU network
//
//	f(x) = A·ReLU(W·x + b) + c   (W m×d in PyTorch's layout, A p×m)
//
// or one with more hidden layers, A·ReLU(W₂·ReLU(W₁·x + b₁) + b₂) + c and
// deeper (Options.Widths; see "Deeper networks" below),
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
//     For a float32 oracle, whose units come from the search to a few
//     digits only, a trial fit (two Gauss–Newton steps of the
//     least-squares polish on fresh queries) also ends it when it reaches
//     the certificate's tolerance. Three lines in a row with no new unit,
//     or MaxLines (64; 160 and no three-line stop for a float32 oracle),
//     end it otherwise.
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
// ≈ 1e-4: the line test measures the rounding, and the kinks' positions
// carry its error into the tolerances; Jacobian steps are rounded to what
// the oracle reads; each unit's expected error is measured from its jump's
// part off rank one; the jumps of known units whose hyperplanes the line
// crosses between a jump's two Jacobians (kinks hidden below the rounding)
// are subtracted from it; jumps whose second singular value stands out of
// the noise bulk (kinks the line search merged), with each row's mean
// removed (the rounding of f at a Jacobian's point is common to all its
// differences), are rejected (except in the input space behind an
// oracle whose rounding depends on a row's position in the batch, where
// that bulk is not Marchenko–Pastur's and the hyperplane test, or with
// one hidden layer the polish's record checks, screen every candidate:
// screenMerged); two records whose hyperplanes lie within 0.1 are one unit (a reading contaminated by
// a kink hidden below the rounding, often with the other orientation,
// would ruin the orientations); the search stops at 10× the certificate's
// tolerance or when a trial fit reaches it, and a Gauss–Newton
// least-squares fit of every parameter to 4·P/p fresh queries (refine,
// preconditioned across units by (AᵀA)∘(DᵀD), which also merges records
// of one hyperplane (mergeTwins) and drops a copy of a unit that
// contributes next to nothing, and with Hidden given the
// records beyond it whose removal its output layer's least-squares fit
// misses least) brings the network to float32
// accuracy. A search that stops before its units reproduce its lines has
// missed units (units that kept their initial norm bend lines near the
// rounding); before that fit, the records at whose hyperplane the oracle's
// slope does not change as they predict are dropped (bent.go), and units
// are grown on the residual of the others by Adam (grow.go) and fitted
// with them, since the fit alone tilts the units found to absorb the
// missing ones. The certificate's tolerance is then 100× the measured
// rounding, with a warning. m ≤ d
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
// Deeper networks (Options.Widths, two or more hidden layers). The layers
// are extracted in turn, each checked before the next:
//
//  1. Frames. Layer 1 is searched in the input space. Once it is known
//     (rows of unit norm, orientations resolved), the later layers are
//     searched in the space of its pre-activations h₁: f is queried at x =
//     P·h₁ + q with W₁·P = I, which reaches every h₁ (the rows are
//     independent while m₁ ≤ d) and, for h₁ > 0, makes every layer-1 unit
//     active, so the queries see the rest of the network directly, a
//     network of one hidden layer fewer, and a Jacobian costs m₁ + 2
//     queries instead of d + 2. Layer n+1 (n ≥ 2) is searched in the space
//     of layer n's pre-activations z_n, entered through the lift z_{n−1} =
//     W_n⁺·(z_n − b_n) + ν (ν in W_n's null space, chosen by linear
//     programming to keep the earlier layers active as far along the
//     orthant's edges as it can), on the orthant z_n > 0 cut by the
//     walls that keep layers 1…n−1 active; there f is a function of z_n,
//     and layer n+1's units are hyperplanes whose normals are their rows
//     over layer n. This is the "peeling" alternative to Carlini et al.'s
//     reuse of input-space critical points for deeper layers: whole rows
//     at once, where every known unit is active.
//  2. A layer that is not the last is searched as in the one-layer case,
//     on segments of the domain: lines through two random points of it
//     (|N(0,1)| per coordinate, half of them ×0.02, on the orthant;
//     hit-and-run from a linear-programming centre on a polytope), and on
//     the orthant first along each edge, h = 0.02·1 + t·e_k, which crosses
//     every later hyperplane that meets the orthant (a unit active on all
//     but a thin corner is missed by random lines). A unit is read off
//     every new kink's Jacobian jump; the jump is rank one for the units
//     of every layer, and the units of the layer sought are those whose
//     critical set is a hyperplane (as in Carlini et al., whose
//     first-layer critical points are those lying on one hyperplane): the
//     kink must show up, straight on either side and bent at τ = 0, at 4
//     or more of 8 random points of the hyperplane inside the domain
//     (y + τ·ŵ, τ ∈ {0, ±ε, ±2ε}, ε ≤ 1e-4·σ); the surfaces of later
//     layers' units bend where earlier units switch, so their local planes
//     pass only by accident. In the input space, behind an oracle whose
//     rounding varies with the batch (Diagnostics.BatchRounding),
//     "straight" allows the bend the hyperplane's own error puts beside y
//     (the kink moved off it by that error, at most 1e-3 of the bend at
//     y), and the test measures that offset. Once the search ends (the width found, or lines without
//     a new unit after the edges), every unit is tested at 32 more points
//     and kept with kinks at 10% of them (with the width given, the best
//     that many); the units whose measured offset exceeds PolishTol are
//     read again from Jacobians at points far from the other hyperplanes,
//     up to 3 tries with a quarter of the step each time. A known kink is recognised by
//     its position alone: a unit's slope change along a line depends on
//     the later layers, so Jacobians are measured on both sides of every
//     new kink and not carried across known ones.
//  3. Orientations of such a layer: the column test. Where a unit is taken
//     as active, a unit found with the wrong orientation is inactive (its
//     true pre-activation is −h_i < 0), so f does not move along the
//     direction that changes h_i alone; a unit found the right way round
//     moves f unless the later layers ignore it there. A unit with a
//     moving column (forward differences above rounding, relative to the
//     others and to |f|) at one of 8 random points is confirmed; the
//     silent ones are flipped and tested at new points, up to 8 rounds.
//     Layer 1 is tested all at once on the orthant of its frame; a later
//     layer unit by unit, where the earlier layers and that unit alone are
//     active (the region where all of them are can be empty while some
//     orientations are wrong). Canales-Martínez et al.'s neuron wiggle
//     finds signs from input-space wiggles instead; the column test needs
//     the frame, which peeling builds anyway.
//  4. The layer's check: every unit passed the hyperplane test and every
//     orientation was confirmed by a moving column (LayerResult.Check,
//     Passed). A layer that fails it ends the extraction with what was
//     found (an error wrapping errs.ErrNotExact with Exact).
//  5. The last hidden layer of a network with two hidden layers is the
//     one-layer extraction on its domain (segments, edges first; its
//     orientations and output bias from the affine part as above). With
//     three or more, few of the last layer's units switch where every
//     unit of the layer before is active, so it is searched region by
//     region (patterns.go): in the frame of each frequent activation
//     pattern S of layer n (from standard Gaussian inputs through the
//     layers found; the next pattern the one covering the most columns
//     still missing), f is a one-hidden-layer network in z_S, and each
//     unit found there gives A_{:,j}·[W_{j,S}, b_j] exactly (the output
//     column's sign is fixed by the Jacobian jump, the rest up to one
//     sign); records of one unit from several regions agree on the
//     columns they share and are unified (Carlini et al.'s unification
//     of partial signatures, with the scale fixed by the output column).
//     Units seen over every input are kept; their orientations and the
//     output bias come from a least-squares fit of the affine residual
//     on fresh queries (L = −Σ_{flipped} â_j·ŵ_jᵀ, flips rounded). Some
//     units switch only where some first-layer units are inactive, so
//     the regions of the same inputs' first-layer patterns follow
//     (regionFrame: those units inactive by a change of sign in the
//     first frame). The weights of a unit over inputs never active where
//     it switches are fitted alone, every other parameter held at what
//     the regions gave (fitMissing: on Gaussian queries and on cover
//     rows, inputs where every weight between hidden units acts: a pair
//     of units active together on almost no Gaussian input still gets
//     rows, from wider Gaussian inputs or by ascent on their
//     pre-activations, coverRows).
//  6. The whole network is certified on fresh standard Gaussian inputs
//     like a one-layer one, and on up to as many cover rows for the
//     weights between hidden units those leave unseen (the larger of the
//     two relative residuals).
//  7. Behind a coarse oracle (float32) the tests above follow its
//     measured rounding: the hyperplane test's flat and bent tolerances
//     (30 and 300 times it) and its offset, wide enough for the kink to
//     bend f above them and for the hyperplane's own expected error; the
//     column test's "f did not move" (30 times it). Kinks count from 30
//     times the rounding in every stage (on the first layer units that
//     kept their initial norm bend lines 4 times less than trained ones;
//     a later stage measures the rounding again in its frame), except
//     the last one behind a server that rounds rows by their position in
//     the batch: 100 times (kinkFactor). On the first layer each kink's
//     Jacobians are measured near it (an eighth of the way to the next),
//     and only after 18 queries show its jump reaching outside the span
//     of the units found (jumpsOutside: the rest are known units' or
//     later layers'). A Jacobian jump read behind float32 leaves a
//     normal off by 1e-3, too coarse for the hyperplane test and the
//     frames, so every candidate is sharpened first (refinePlane, after
//     Carlini et al.'s critical points of one neuron): its kink is
//     located on the normal line through 2d points of its hyperplane at
//     distance 1 from where it was read (six queries each, where the
//     straight sides' lines meet), and the hyperplane fitted through them
//     (1−cos from 7e-7 to 1e-12 on TestRefinePlaneSharpensUnit). The
//     last stage of two hidden layers gets the one-layer least-squares
//     polish on points of its frame; when that leaves fewer units than
//     the width given and does not fit the frame, a unit is missing and
//     the search goes on, to three times its lines (lastStage). When every layer passed its
//     check (or all but the last, which found the width given: its fit
//     in its frame carries the earlier layers' float32 errors), the
//     whole network is fitted at once
//     by Gauss–Newton steps on fresh Gaussian queries and their cover
//     rows (polishNetwork, all
//     layers, activation patterns held; also behind float64 when the
//     certificate is not met) and certified again.
//
// Measured: 784-32-16-10 and 784-64-32-10 (PyTorch's initialisation and
// trained on Fashion-MNIST), every parameter within 3.8e-9 after
// alignment from 2^16.7 – 2^19 queries in seconds (docs/extract.md).
// Three hidden layers (784-32-16-16-10, PyTorch's initialisation): three
// seeds of three within 1.8e-10 from 2^18.1 – 2^18.4 queries
// (docs/extract.md). Two hidden layers behind a float32 oracle, widths
// given: PyTorch's initialisation, 30-10-6-3 to 100-24-12-10, 11 of 12
// certified (the Go float32 oracle); three trained 784-32-16-10 served by
// PyTorch in float32 with argmax agreement 1.0 on the 10 000 test images
// and logits within 8.1e-7 (docs/extract.md).
//
// Resuming. An extraction is deterministic given its options and the
// oracle's answers, so Options.Checkpoint (OpenCheckpoint) logs the
// answers keyed by a hash of each batch of queries: an interrupted
// extraction rerun with the same checkpoint gets the answers logged from
// it and queries the oracle only for the rest, with the same result.
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
