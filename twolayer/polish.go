package twolayer

import (
	"context"
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/kern"
	"github.com/relurec/relurec/internal/vec"
	"github.com/relurec/relurec/linalg"
	"github.com/relurec/relurec/nn"
)

// polishTols are the polish's tolerances (practical defaults, not in
// [BJW19]) for data of one storage precision. Float64 data keep the
// float64 values below; data rounded to float32 (unit roundoff u = 6e-8)
// carry relative errors near u in every entry of X and Y, which the
// confident zeros of the basis and the unit's activation inherit, so each
// tolerance grows with u (polishTolsFor).
type polishTols struct {
	// null: a system counts as feasible when σ_k/σ_1 of the confident-zero
	// rows of the basis is below it (noiseless float64 data give ~1e-15,
	// float32 data ~1e-7).
	null float64
	// unique: the null space is one-dimensional when σ_{k−1}/σ_1 exceeds it.
	unique float64
	// unit: a polished unit is exact when ‖ReLU(X·z) − r‖/‖r‖ is below it
	// over all samples, r being the unit's activation read off the column
	// span of Y.
	unit float64
	// active: samples with r above active·max r are imposed as active in
	// the row's linear system (the ReLU; φ ≠ ReLU uses max(1e-4, active)).
	active float64
	// rows scales the active samples a row is solved from (max(5·d, 200)
	// times rows): float32 data average their rounding over ten times as
	// many (float32 20-5-8 with biases: parameter error 5.4e-8 → 4.2e-8,
	// go test ./depth2 -run TestExactRouteCertifiesBiasedNetworks -v).
	rows int
}

// polishTolsFor returns the tolerances for data of unit roundoff u: 1e-9,
// 1e-6, 1e-8 and 1e-7 for float64 data, and 2¹⁰·u, 2¹⁴·u, 2⁸·u and 2⁸·u
// (6.1e-5, 9.8e-4, 1.5e-5, 1.5e-5) for float32 data.
func polishTolsFor(u float64) polishTols {
	return polishTols{
		null:   math.Max(1e-9, 0x1p10*u),
		unique: math.Max(1e-6, 0x1p14*u),
		unit:   math.Max(1e-8, 0x1p8*u),
		active: math.Max(1e-7, 0x1p8*u),
		rows:   rowsFactor(u),
	}
}

func rowsFactor(u float64) int {
	if u > certify.Float64Roundoff {
		return 10
	}
	return 1
}

// PolishOptions are ExactPolish's settings. The zero value polishes ReLU
// units of float64 data.
type PolishOptions struct {
	// Activation is φ ("" means nn.ReLU).
	Activation nn.Activation
	// Roundoff is the unit roundoff of the data the basis came from
	// (certify.Roundoff; 0 means float64): the polish's tolerances grow
	// with it, so that float32 data polish to rows exact at float32
	// precision.
	Roundoff float64
	// Progress, when set, is called after each unit.
	Progress func(done, total int)
	// Oriented reports that the rows of Vhat carry their signs (a start
	// that read them off the units' activations, as the zero-set start
	// does): only sign +1 is polished, which halves the polish's work.
	Oriented bool
	// Nulls, when set, holds per row of Vhat the null vector w of B that
	// gives the unit's activation B·w (nil for rows without one): the
	// zero-pattern step is skipped for those rows, which are oriented, and
	// the certificate on every sample decides as for any row.
	Nulls [][]float64
}

// UnitPolish reports what the exact polish did for one hidden unit.
type UnitPolish struct {
	// OK reports that the unit was made exact and passed its own residual check.
	OK bool `json:"ok"`
	// Sign is +1 if the start's row had the right sign, −1 if it was flipped.
	Sign int `json:"sign"`
	// Zeros is the number of confidently inactive samples used.
	Zeros int `json:"zeros"`
	// Angle is the angle (radians) between the start's row and the exact row.
	Angle float64 `json:"angle"`
	// Residual is ‖ReLU(X·vᵀ)·s − r‖/‖r‖ over all samples.
	Residual float64 `json:"residual"`
	// Why explains a failure.
	Why string `json:"why,omitempty"`
}

// ExactPolish turns approximate rows ±V̂ into the exact rows of V* — Bakshi et
// al. Alg 5 in the margin form of [BJW19, Alg 5]. For each unit i and each
// sign q, the samples where q·v̂_i·x is most negative relative to ‖x‖ are
// confidently inactive for the true row (if v̂ is within angle ε of q·v*_i,
// every sample with q·v̂·x/‖x‖ < −ε is). The unit's activation f(X·v*_i) is the
// only vector of the column span of Y (basis B, n×k) that vanishes there, so
// it is the null vector w of those rows of B: r = B·w. The zeros are taken in
// order of confidence and their number doubled until the null space is
// one-dimensional; a wrong sign or a too-inaccurate start leaves no null
// vector. Finally v*_i solves the consistent system x_q·z = r_q on the active
// samples, and the unit is accepted only if ReLU(X·z) reproduces r on all n
// samples to 1e-8 — a certificate per unit.
//
// Deviation from the paper: Alg 5 uses a fixed threshold τ = 1/poly(ℓ) on the
// first ℓ samples; the threshold here adapts to the start's accuracy (the
// most confident samples first) and every imposed equation is exactly true as
// long as the start is within the margin, so the result does not depend on
// how accurate the start was (the margin argument of [BJW19, Thm 6]).
//
// It returns V with unit rows (rows of failed units are the start's rows) and
// a report per unit.
//
// For a rectified activation φ (Bakshi et al.
// [BJW19, App. 9.1]): the zero-pattern step is unchanged, and the
// final linear system inverts φ on the active samples. For φ = max(x,0)^c
// it solves X_P·z = r_P^{1/c} (the unknown positive scale of r passes
// through φ⁻¹) and returns a unit row; for φ = e^{max(x,0)} − 1 it first
// resolves the scale s of r = s·φ(X·v*) (expScale) and returns v* with its
// norm. The per-unit certificate checks s·φ(X·z) against r on all samples.
// Active samples are those with r > 1e-4·max r for φ ≠ ReLU (1e-7 for the
// ReLU): below that, inverting a power amplifies the rounding of r. For
// φ ≠ ReLU a certified row is recomputed once from all the samples it puts
// clearly inactive (repolish): heavy-tailed φ makes the first few confident
// zeros too ill-conditioned for a 1e-10 certificate (x³: 1e-9 → 1e-13).
// Rows are unit except for e^x − 1, whose rows carry their norms.
//
// B may have more columns than Vhat has rows: the column span of Y of a
// network with biases, read on the augmented input (x, 1), also holds the
// constant vector, which vanishes nowhere and so never enters a null
// vector (package depth2's exact route).
//
// X must be n×d, B n×k' with k' ≥ k and Vhat k×d, all finite; other
// shapes (or nil) give an error wrapping ErrInput that says what was
// expected.
func ExactPolish(ctx context.Context, X, B, Vhat *mat.Dense, opt PolishOptions) (*mat.Dense, []UnitPolish, error) {
	act := opt.Activation
	if act == "" {
		act = nn.ReLU
	}
	tol := polishTolsFor(max(opt.Roundoff, certify.Float64Roundoff))
	if err := checkActivation(act); err != nil {
		return nil, nil, err
	}
	n, k, err := checkPolishInputs(X, B, Vhat)
	if err != nil {
		return nil, nil, err
	}
	pr := &polishRun{X: X, B: B, Vhat: Vhat, n: n, k: k, act: act, tol: tol, opt: opt}
	// Step 1, one pass over X for all units: the rows' norms and the
	// candidate zeros of every unit and sign (confidentZeros).
	pr.xnorm = make([]float64, n)
	if len(opt.Nulls) == k && !slices.ContainsFunc(opt.Nulls, func(w []float64) bool { return w == nil }) {
		// Every row's null vector is known: only the norms are needed.
		for q := range pr.xnorm {
			pr.xnorm[q] = rowNorm(X.RawRowView(q))
		}
	} else {
		pr.cz = confidentZeros(X, Vhat, pr.xnorm, zeroCandidates(k), opt.Oriented)
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	tries, cands := pr.nullVectors()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	pr.exactRows(cands)
	V, reports := pr.choose(tries)
	return V, reports, nil
}

// checkPolishInputs checks ExactPolish's shapes: X n×d, Vhat k×d and B
// n×k' with k' ≥ k, all finite. It returns n and k.
func checkPolishInputs(X, B, Vhat *mat.Dense) (n, k int, err error) {
	const fn = "twolayer.ExactPolish"
	n, d, err := certify.CheckMatrix(fn, "X", X, -1, -1, "n×d, one row per sample")
	if err != nil {
		return 0, 0, err
	}
	k, _, err = certify.CheckMatrix(fn, "Vhat", Vhat, -1, d, fmt.Sprintf("k×d with d = %d (X's columns)", d))
	if err != nil {
		return 0, 0, err
	}
	if _, kb, err := certify.CheckMatrix(fn, "B", B, n, -1, fmt.Sprintf("n×k' with n = %d (X's rows) and k' ≥ %d (Vhat's rows)", n, k)); err != nil {
		return 0, 0, err
	} else if kb < k {
		return 0, 0, errs.Inputf("%s: B is %d×%d, want n×k' with n = %d (X's rows) and k' ≥ %d (Vhat's rows)", fn, n, kb, n, k)
	}
	return n, k, nil
}

// polishRun holds the inputs ExactPolish's steps share: the data, the
// start, the rows' norms and candidate zeros (step 1), the activation and
// the tolerances.
type polishRun struct {
	X, B, Vhat *mat.Dense
	n, k       int
	xnorm      []float64
	// cz holds the candidate zeros of every unit and sign; nil when every
	// null vector is known (PolishOptions.Nulls).
	cz  *zeroSets
	act nn.Activation
	tol polishTols
	opt PolishOptions
}

// polishAttempt is the polish of one unit with one sign: its null vector,
// the certified row and its report, or why it failed.
type polishAttempt struct {
	unit, sign int
	w          []float64
	z          []float64 // the certified row
	rep        UnitPolish
	why        string
}

// nullVectors is step 2 of ExactPolish, per unit and sign: the null vector
// of the confident-zero rows of B. Units whose wrong sign (or a start
// outside the margin) leaves no null vector stop here. tries holds every
// attempt, two per unit in order; cands those with a null vector.
func (pr *polishRun) nullVectors() (tries, cands []*polishAttempt) {
	opt := pr.opt
	for i := 0; i < pr.k; i++ {
		for _, sign := range []int{1, -1} {
			a := &polishAttempt{unit: i, sign: sign, rep: UnitPolish{Sign: sign}}
			tries = append(tries, a)
			known := opt.Nulls != nil && opt.Nulls[i] != nil
			if sign < 0 && (opt.Oriented || known) {
				a.why = "not tried: the start's rows carry their signs"
				continue
			}
			if known {
				a.w = opt.Nulls[i]
				cands = append(cands, a)
				continue
			}
			zeros := func(t int) []int { return pr.cz.zeros(pr.X, pr.Vhat, pr.xnorm, i, sign, t) }
			a.w, a.rep.Zeros, a.why = nullVector(pr.B, pr.n, zeros, pr.tol)
			if a.why == "" {
				cands = append(cands, a)
			}
		}
	}
	return tries, cands
}

// exactRows is steps 3–4 of ExactPolish, batched over the candidates: the
// rows from their null vectors (rowsFromNull: two passes over B and one
// over X for all of them, where a unit at a time took one over X and B
// each), each accepted only if it is nearest to its own start row and sign.
func (pr *polishRun) exactRows(cands []*polishAttempt) {
	X, B, Vhat, act, tol := pr.X, pr.B, pr.Vhat, pr.act, pr.tol
	ws := make([][]float64, len(cands))
	for j, a := range cands {
		ws[j] = a.w
	}
	rows := rowsFromNull(X, B, ws, act, tol)
	for j, a := range cands {
		rr := rows[j]
		a.rep.Residual = rr.resid
		if rr.why != "" {
			a.why = rr.why
			continue
		}
		z := rr.z
		if act != nn.ReLU {
			// Second pass with the exact zero pattern: the few most confident
			// zeros of the start give a null vector good to ~1e-10 relative
			// when φ's heavy tail (x³, e^x) makes their rows of B ill
			// conditioned; every sample the exact row puts clearly below 0 gives
			// one good to rounding. (Kept off for the ReLU, whose first pass is
			// already exact to rounding.)
			if z2, _, r2, ok := repolish(X, B, pr.xnorm, z, act, tol); ok && r2 < a.rep.Residual {
				z, a.rep.Residual = z2, r2
			}
		}
		vh := Vhat.RawRowView(a.unit)
		zn := math.Sqrt(dot(z, z))
		if act != nn.RectExp { // homogeneous φ: the row's scale is a symmetry
			for t := range z {
				z[t] /= zn
			}
			zn = 1
		}
		c := float64(a.sign) * dot(z, vh) / zn
		a.rep.Angle = math.Acos(math.Max(-1, math.Min(1, c)))
		if c <= 0 {
			a.why = fmt.Sprintf("the exact row found is %.0f° from the start: it belongs to another unit", a.rep.Angle*180/math.Pi)
			continue
		}
		if jr, sj := nearestRow(Vhat, z); jr != a.unit || sj != a.sign {
			a.why = fmt.Sprintf("the exact row found is nearest to start row %d with sign %+d: it belongs to another unit", jr, sj)
			continue
		}
		a.rep.OK, a.z = true, z
	}
}

// choose keeps, per unit, the row of the one sign that certified (start
// rows stay where none did) and reports why the others failed.
func (pr *polishRun) choose(tries []*polishAttempt) (*mat.Dense, []UnitPolish) {
	k, progress := pr.k, pr.opt.Progress
	V := mat.DenseCopyOf(pr.Vhat)
	reports := make([]UnitPolish, k)
	for i := 0; i < k; i++ {
		var found []int
		var whys []string
		for t := 2 * i; t < 2*i+2; t++ {
			if a := tries[t]; a.rep.OK {
				found = append(found, t)
			} else {
				whys = append(whys, fmt.Sprintf("sign %+d: %s", a.sign, a.why))
			}
		}
		switch len(found) {
		case 1:
			V.SetRow(i, tries[found[0]].z)
			reports[i] = tries[found[0]].rep
		case 2:
			// Both signs certified is impossible for a generic instance
			// (Lemma 10); report rather than guess.
			reports[i] = UnitPolish{Why: "both signs gave a certified row: the instance is degenerate"}
		default:
			reports[i] = UnitPolish{Why: fmt.Sprint(whys)}
		}
		if progress != nil {
			progress(i+1, k)
		}
	}
	return V, reports
}

// nullVector is the zero-pattern step of the polish for one unit and sign:
// the null vector w of the rows of B (n×k) at the t most confident zeros
// (zeros(t)), t doubled from max(3k, 30) until the null space is
// one-dimensional (tol.null, tol.unique). why is non-empty when there is
// none.
func nullVector(B *mat.Dense, n int, zeros func(t int) []int, tol polishTols) (w []float64, t int, why string) {
	_, k := B.Dims()
	for t = max(3*k, 30); ; t *= 2 {
		if t > n/4 {
			return nil, 0, fmt.Sprintf("the null space stayed %d-dimensional up to %d confident zeros", 2, n/4)
		}
		idx := zeros(t)
		Bn := mat.NewDense(t, k, nil)
		for j, q := range idx {
			Bn.SetRow(j, B.RawRowView(q))
		}
		_, s, vs, err := linalg.ThinSVD(Bn)
		if err != nil {
			return nil, 0, err.Error()
		}
		if s[0] == 0 {
			if k == 1 {
				// One unit: its activation (the basis itself) vanishing on
				// every confident zero is the null vector.
				return []float64{1}, t, ""
			}
			continue
		}
		if s[k-1] > tol.null*s[0] {
			return nil, 0, fmt.Sprintf("no activation of the output span vanishes on the %d most confident zeros (σ_k/σ_1 = %.1e): wrong sign, noise, or a start too far from the truth", t, s[k-1]/s[0])
		}
		if k == 1 || s[k-2] > tol.unique*s[0] {
			return mat.Col(nil, k-1, vs), t, ""
		}
	}
}

// zeroCandidates is how many confident zeros per unit and sign the polish's
// first pass keeps: the first four sizes nullVector tries (t0, 2t0, 4t0,
// 8t0); a larger t reads X again for that unit.
func zeroCandidates(k int) int { return 8 * max(3*k, 30) }

// zeroSets holds, for each unit i and sign, the samples q with the smallest
// sign·cos(x_q, v̂_i), in increasing order (ties by sample index).
type zeroSets struct {
	capacity int
	sets     [][]keyed // index 2i (sign +1) and 2i+1 (sign −1)
}

// keyed is a sample and its key sign·cos(x_q, v̂_i).
type keyed struct {
	v float64
	q int
}

func keyedLess(a, b keyed) int {
	if c := cmpFloat(a.v, b.v); c != 0 {
		return c
	}
	return a.q - b.q
}

// bounded keeps the smallest `capacity` keys seen (ties by index): keys
// above the current cut are dropped, and the buffer is cut back to
// capacity whenever it reaches twice that.
type bounded struct {
	buf []keyed
	cut float64
	cap int
}

func (b *bounded) add(v float64, q int) {
	if v >= b.cut { // ties at the cut lose to the earlier samples kept
		return
	}
	b.buf = append(b.buf, keyed{v, q})
	if len(b.buf) >= 2*b.cap {
		b.trim()
	}
}

func (b *bounded) trim() {
	slices.SortFunc(b.buf, keyedLess)
	if len(b.buf) >= b.cap {
		b.buf = b.buf[:b.cap]
		b.cut = b.buf[b.cap-1].v
		// A later sample with key = cut sorts after the kept ones with that
		// key; the strict test in add drops it, but an equal key already
		// kept stays: cut compares values only.
	}
}

// rowNorm returns ‖row‖: √(row·row), or blas64.Nrm2's scaled sum where
// that would over- or underflow; at least the smallest positive float64.
func rowNorm(row []float64) float64 {
	if s := dot(row, row); s > 1e-290 && s <= math.MaxFloat64 {
		return math.Sqrt(s)
	}
	return math.Max(blas64.Nrm2(blas64.Vector{N: len(row), Inc: 1, Data: row}), math.SmallestNonzeroFloat64)
}

// confidentZeros reads X once: it sets xnorm[q] = ‖x_q‖ (rowNorm), and from
// chunks of rows times V̂ᵀ (internal/kern: each cosine the bits of
// dot(x_q, v̂_i)/‖x_q‖) keeps, for every unit and sign, the capacity samples
// with the smallest sign·cosine (sign +1 only when oriented).
func confidentZeros(X, Vhat *mat.Dense, xnorm []float64, capacity int, oriented bool) *zeroSets {
	n, d := X.Dims()
	k, _ := Vhat.Dims()
	vt := mat.DenseCopyOf(Vhat.T()) // d×k
	bs := make([]bounded, 2*k)
	for i := range bs {
		bs[i] = bounded{cut: math.Inf(1), cap: capacity}
	}
	const chunk = 512
	buf := make([]float64, chunk*k)
	xr, vr := X.RawMatrix(), vt.RawMatrix()
	for lo := 0; lo < n; lo += chunk {
		hi := min(n, lo+chunk)
		for q := lo; q < hi; q++ {
			xnorm[q] = rowNorm(xr.Data[q*xr.Stride : q*xr.Stride+d])
		}
		kern.MulRows(buf, k, xr.Data[lo*xr.Stride:], xr.Stride, vr.Data, vr.Stride, hi-lo, d, k)
		for q := lo; q < hi; q++ {
			row := buf[(q-lo)*k : (q-lo+1)*k]
			inv := xnorm[q]
			for i, c := range row {
				c /= inv
				// Most samples beat neither cut: test before the call.
				if c < bs[2*i].cut {
					bs[2*i].add(c, q)
				}
				if !oriented && -c < bs[2*i+1].cut {
					bs[2*i+1].add(-c, q)
				}
			}
		}
	}
	zs := &zeroSets{capacity: capacity, sets: make([][]keyed, 2*k)}
	for i := range bs {
		bs[i].trim()
		zs.sets[i] = bs[i].buf
	}
	return zs
}

// zeros returns the t samples with the smallest sign·cos(x_q, v̂_i), most
// negative first (ties by index): from the first pass when t fits, else
// from a pass over X for this unit alone.
func (zs *zeroSets) zeros(X, Vhat *mat.Dense, xnorm []float64, i, sign, t int) []int {
	set := zs.sets[2*i]
	if sign < 0 {
		set = zs.sets[2*i+1]
	}
	n, _ := X.Dims()
	if t > len(set) && len(set) < n {
		vh := Vhat.RawRowView(i)
		b := bounded{cut: math.Inf(1), cap: t}
		for q := 0; q < n; q++ {
			b.add(float64(sign)*(dot(X.RawRowView(q), vh)/xnorm[q]), q)
		}
		b.trim()
		set = b.buf
	}
	t = min(t, len(set))
	out := make([]int, t)
	for j := range out {
		out[j] = set[j].q
	}
	return out
}

// rowResult is one null vector's row (rowsFromNull).
type rowResult struct {
	z            []float64
	scale, resid float64
	why          string
}

// rowsFromNull turns null vectors w of the confident-zero rows of B into
// the units' rows: r = B·w (sign fixed to be non-negative) is the unit's
// activation up to a positive scale; the row z solves φ⁻¹ on the active
// samples, and the certificate is ‖scale·φ(X·z) − r‖/‖r‖ over all samples
// (why is non-empty when it exceeds tol.unit or a step fails). All the null
// vectors share the passes over the data: one over B for the sums that fix
// each r's sign and scale, one over X and B for the certificates (chunks
// of rows times the stacked w and z, internal/kern: the bits of one unit's
// dot products).
func rowsFromNull(X, B *mat.Dense, ws [][]float64, act nn.Activation, tol polishTols) []rowResult {
	n, d := X.Dims()
	_, k := B.Dims()
	c := len(ws)
	out := make([]rowResult, c)
	if c == 0 {
		return out
	}
	np := &nullRowPass{X: X, B: B, act: act, tol: tol, n: n, d: d, k: k}
	rmax, pos := np.signSums(ws)
	// Active samples, taken in index order until the system is comfortably
	// overdetermined; entries within tol.active·max of zero (at least 1e-4
	// for φ ≠ ReLU, see ExactPolish) are left out so that no inactive
	// sample is imposed as active.
	np.need = max(5*d, 200) * tol.rows
	np.thr = tol.active
	if act != nn.ReLU {
		np.thr = math.Max(np.thr, 1e-4)
	}
	flip := make([]bool, c) // an activation is non-negative: fix the null vector's sign
	var live []int
	for j, w := range ws {
		flip[j] = pos[j] < 0
		var ok bool
		if out[j], ok = np.solveRow(w, flip[j], rmax[j]); ok {
			live = append(live, j)
		}
	}
	if len(live) == 0 {
		return out
	}
	np.certify(out, ws, flip, live)
	return out
}

// nullRowPass holds the data and settings rowsFromNull's steps share.
type nullRowPass struct {
	X, B    *mat.Dense
	act     nn.Activation
	tol     polishTols
	n, d, k int
	// need is the number of active samples a row's system takes; thr the
	// fraction of max r below which a sample is not taken as active.
	need int
	thr  float64
}

// nullRowChunk is the number of rows of X and B per block of rowsFromNull's
// passes.
const nullRowChunk = 512

// signSums is rowsFromNull's pass over B: for each null vector w_j, the
// largest |r_q| and the sum of r = B·w_j, whose sign fixes r's.
func (np *nullRowPass) signSums(ws [][]float64) (rmax, pos []float64) {
	n, k, c := np.n, np.k, len(ws)
	W := mat.NewDense(k, c, nil)
	for j, w := range ws {
		W.SetCol(j, w)
	}
	const chunk = nullRowChunk
	buf := make([]float64, chunk*c)
	br, wr := np.B.RawMatrix(), W.RawMatrix()
	rmax, pos = make([]float64, c), make([]float64, c)
	for lo := 0; lo < n; lo += chunk {
		hi := min(n, lo+chunk)
		kern.MulRows(buf, c, br.Data[lo*br.Stride:], br.Stride, wr.Data, wr.Stride, hi-lo, k, c)
		for q := 0; q < hi-lo; q++ {
			for j, v := range buf[q*c : (q+1)*c] {
				if math.Abs(v) > rmax[j] {
					rmax[j] = math.Abs(v)
				}
				pos[j] += v
			}
		}
	}
	return rmax, pos
}

// solveRow solves φ(X·z) ≈ r = ±B·w (flip negates) on the active samples
// of r (those above thr·rmax): by least squares on φ⁻¹(r), or for e^x − 1
// with its output scale (expScale). ok is false, with the reason in the
// result, when the samples do not determine the row.
func (np *nullRowPass) solveRow(w []float64, flip bool, rmax float64) (res rowResult, ok bool) {
	X, B, act, tol, d := np.X, np.B, np.act, np.tol, np.d
	r := func(q int) float64 {
		v := dot(B.RawRowView(q), w)
		if flip {
			v = -v
		}
		return v
	}
	var rows []int
	var rv []float64
	for q := 0; q < np.n && len(rows) < np.need; q++ {
		if v := r(q); v > np.thr*rmax {
			rows, rv = append(rows, q), append(rv, v)
		}
	}
	if len(rows) < d {
		return rowResult{scale: 1, resid: math.Inf(1), why: fmt.Sprintf("only %d active samples, need ≥ d = %d", len(rows), d)}, false
	}
	A := mat.NewDense(len(rows), d, nil)
	rhs := mat.NewDense(len(rows), 1, nil)
	for t, q := range rows {
		A.SetRow(t, X.RawRowView(q))
		rhs.Set(t, 0, rv[t])
	}
	res = rowResult{scale: 1} // r ≈ scale·φ(X·z)
	if act == nn.RectExp {
		a, zz, rel, err := expScale(A, mat.Col(nil, 0, rhs))
		if err != nil {
			return rowResult{scale: 1, resid: math.Inf(1), why: "resolving the unit's output scale: " + err.Error()}, false
		}
		if rel > tol.unit {
			return rowResult{scale: 1, resid: math.Inf(1), why: fmt.Sprintf("no output scale s makes log(1 + r/s) linear in x on the active samples (relative residual %.1e): not an e^x − 1 unit, or noise", rel)}, false
		}
		res.z, res.scale = zz, 1/a
		return res, true
	}
	if act != nn.ReLU {
		inv := act.Inverse()
		raw := rhs.RawMatrix().Data
		for t, v := range raw {
			raw[t] = inv(v)
		}
	}
	sol, err := linalg.LstSq(A, rhs)
	if err != nil {
		return rowResult{scale: 1, resid: math.Inf(1), why: "active samples do not determine the row: " + err.Error()}, false
	}
	res.z = mat.Col(nil, 0, sol)
	return res, true
}

// certify is rowsFromNull's certificate, one pass over X and B for the
// rows live of out: scale·φ(X·z) must reproduce r on every sample, to
// tol.unit relative.
func (np *nullRowPass) certify(out []rowResult, ws [][]float64, flip []bool, live []int) {
	n, d, k, act := np.n, np.d, np.k, np.act
	l := len(live)
	Z, Wl := mat.NewDense(d, l, nil), mat.NewDense(k, l, nil)
	for t, j := range live {
		Z.SetCol(t, out[j].z)
		Wl.SetCol(t, ws[j])
	}
	f := act.Func()
	const chunk = nullRowChunk
	xbuf, rbuf := make([]float64, chunk*l), make([]float64, chunk*l)
	num, den := make([]float64, l), make([]float64, l)
	xr, br, zr, wl := np.X.RawMatrix(), np.B.RawMatrix(), Z.RawMatrix(), Wl.RawMatrix()
	for lo := 0; lo < n; lo += chunk {
		hi := min(n, lo+chunk)
		kern.MulRows(xbuf, l, xr.Data[lo*xr.Stride:], xr.Stride, zr.Data, zr.Stride, hi-lo, d, l)
		kern.MulRows(rbuf, l, br.Data[lo*br.Stride:], br.Stride, wl.Data, wl.Stride, hi-lo, k, l)
		for q := 0; q < hi-lo; q++ {
			xs, rs := xbuf[q*l:(q+1)*l], rbuf[q*l:(q+1)*l]
			for t, j := range live {
				r := rs[t]
				if flip[j] {
					r = -r
				}
				var e float64
				if act == nn.ReLU {
					e = math.Max(xs[t], 0) - r
				} else {
					e = out[j].scale*f(xs[t]) - r
				}
				num[t] += e * e
				den[t] += r * r
			}
		}
	}
	for t, j := range live {
		out[j].resid = math.Sqrt(num[t] / den[t])
		if !(out[j].resid <= np.tol.unit) {
			out[j] = rowResult{scale: 1, resid: out[j].resid, why: fmt.Sprintf("%s(X·z) misses the activation by %.1e relative", act, out[j].resid)}
		}
	}
}

// nearestRow returns the row j and sign of the ±V̂ row closest in angle to z.
func nearestRow(Vhat *mat.Dense, z []float64) (int, int) {
	k, _ := Vhat.Dims()
	best, bestJ, bestS := -1.0, 0, 1
	for j := 0; j < k; j++ {
		c := dot(Vhat.RawRowView(j), z)
		if math.Abs(c) > best {
			best, bestJ, bestS = math.Abs(c), j, 1
			if c < 0 {
				bestS = -1
			}
		}
	}
	return bestJ, bestS
}

// dot is vec.Dot, the in-order sum every route's bits depend on.
func dot(a, b []float64) float64 { return vec.Dot(a, b) }

// smallest returns the indices of the t smallest values of sign·vals, most
// negative first. It partitions by quickselect (expected O(n)) and sorts only
// the t selected, so the polish never sorts all n samples. scratch has
// length len(vals) and is overwritten.
func smallest(vals []float64, sign float64, t int, scratch []int) []int {
	for i := range scratch {
		scratch[i] = i
	}
	key := func(i int) float64 { return sign * vals[scratch[i]] }
	lo, hi := 0, len(scratch)-1
	for lo < hi {
		// Median-of-three pivot: deterministic, and robust to sorted input.
		mid := lo + (hi-lo)/2
		a, b, c := key(lo), key(mid), key(hi)
		pivot := max(min(a, b), min(max(a, b), c))
		i, j := lo, hi
		for i <= j {
			for key(i) < pivot {
				i++
			}
			for key(j) > pivot {
				j--
			}
			if i <= j {
				scratch[i], scratch[j] = scratch[j], scratch[i]
				i++
				j--
			}
		}
		switch {
		case t-1 <= j:
			hi = j
		case t-1 >= i:
			lo = i
		default:
			lo = hi
		}
	}
	out := append([]int(nil), scratch[:t]...)
	slices.SortFunc(out, func(a, b int) int { return cmpFloat(sign*vals[a], sign*vals[b]) })
	return out
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// rowFromNull is rowsFromNull for one null vector.
func rowFromNull(X, B *mat.Dense, w []float64, act nn.Activation, tol polishTols) (z []float64, scale, resid float64, why string) {
	r := rowsFromNull(X, B, [][]float64{w}, act, tol)[0]
	return r.z, r.scale, r.resid, r.why
}

// repolish recomputes a unit's row from the null vector of all samples
// that the certified row z puts clearly inactive (x·z < −1e-3·‖x‖·‖z‖; at
// most repolishRows of them, in index order). ok is false when the system
// is not clearly rank-deficient or the row fails its certificate.
func repolish(X, B *mat.Dense, xnorm, z []float64, act nn.Activation, tol polishTols) (z2 []float64, scale, resid float64, ok bool) {
	n, _ := X.Dims()
	_, k := B.Dims()
	zn := math.Sqrt(dot(z, z))
	var idx []int
	for q := 0; q < n && len(idx) < repolishRows; q++ {
		if dot(X.RawRowView(q), z) < -1e-3*xnorm[q]*zn {
			idx = append(idx, q)
		}
	}
	if len(idx) < 4*k {
		return nil, 0, 0, false
	}
	Bn := mat.NewDense(len(idx), k, nil)
	for j, q := range idx {
		Bn.SetRow(j, B.RawRowView(q))
	}
	_, s, vs, err := linalg.ThinSVD(Bn)
	if err != nil || s[0] == 0 || s[k-1] > tol.null*s[0] {
		return nil, 0, 0, false
	}
	z2, scale, resid, why := rowFromNull(X, B, mat.Col(nil, k-1, vs), act, tol)
	return z2, scale, resid, why == ""
}

// repolishRows caps the rows of the second polish pass: 20 000 inactive
// samples pin a k-dimensional null vector to rounding at a cost of
// 20 000·k² flops.
const repolishRows = 20000
