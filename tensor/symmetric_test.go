package tensor

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/vec"
)

func randVec(d int, rng *rand.Rand) []float64 {
	v := make([]float64, d)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return v
}

func randSymmetric(d, k int, rng *rand.Rand) *Symmetric {
	t := NewSymmetric(d, k)
	for i := range t.Data {
		t.Data[i] = rng.NormFloat64()
	}
	return t
}

// denseOf expands t into all d^k entries (row-major).
func denseOf(t *Symmetric) []float64 {
	M, err := t.Flatten(0)
	if err != nil {
		panic(err)
	}
	return mat.Row(nil, 0, M)
}

func TestSymmetricIndexing(t *testing.T) {
	for _, c := range [][2]int{{1, 3}, {2, 2}, {3, 4}, {5, 3}, {4, 6}} {
		d, k := c[0], c[1]
		T := NewSymmetric(d, k)
		if T.Len() != SymLen(d, k) {
			t.Fatalf("len %d vs %d", T.Len(), SymLen(d, k))
		}
		count := 0
		var prev []int
		T.ForEach(func(pos int, idx []int) {
			if pos != count || !slices.IsSorted(idx) {
				t.Fatalf("d=%d k=%d: pos %d idx %v", d, k, pos, idx)
			}
			if got := T.Pos(idx...); got != pos {
				t.Fatalf("d=%d k=%d: rank of %v is %d, want %d", d, k, idx, got, pos)
			}
			if prev != nil && slices.Compare(prev, idx) >= 0 {
				t.Fatalf("not lexicographic: %v then %v", prev, idx)
			}
			prev = slices.Clone(idx)
			count++
		})
		if count != T.Len() {
			t.Fatalf("enumerated %d of %d", count, T.Len())
		}
		// Any permutation addresses the same entry.
		rng := rand.New(rand.NewPCG(1, 2))
		for trial := 0; trial < 20; trial++ {
			idx := make([]int, k)
			for i := range idx {
				idx[i] = rng.IntN(d)
			}
			perm := slices.Clone(idx)
			rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
			if T.Pos(idx...) != T.Pos(perm...) {
				t.Fatalf("permutation changes the position: %v vs %v", idx, perm)
			}
		}
	}
	if SymLen(20, 6) != 177100 || SymLen(10, 4) != 715 || SymLen(3, 0) != 1 {
		t.Fatal("SymLen")
	}
}

func TestSymmetricNormMatricizeFlatten(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range [][2]int{{3, 3}, {4, 4}, {3, 5}, {2, 6}} {
		d, k := c[0], c[1]
		T := randSymmetric(d, k, rng)
		full := denseOf(T)
		fn := 0.0
		for _, v := range full {
			fn += v * v
		}
		if math.Abs(T.Norm()-math.Sqrt(fn)) > 1e-12*math.Sqrt(fn) {
			t.Fatalf("norm %v vs dense %v", T.Norm(), math.Sqrt(fn))
		}
		for t1 := 0; t1 <= k; t1++ {
			F, err := T.Flatten(t1)
			if err != nil {
				t.Fatal(err)
			}
			M := T.Matricize(t1)
			var s1, s2 mat.SVD
			s1.Factorize(F, mat.SVDNone)
			s2.Factorize(M, mat.SVDNone)
			v1, v2 := s1.Values(nil), s2.Values(nil)
			for i := range v2 {
				if math.Abs(v1[i]-v2[i]) > 1e-12*v1[0] {
					t.Fatalf("d=%d k=%d t1=%d: singular values %v vs %v", d, k, t1, v1, v2)
				}
			}
			for i := len(v2); i < len(v1); i++ {
				if v1[i] > 1e-12*v1[0] {
					t.Fatalf("full flattening has extra singular value %v", v1[i])
				}
			}
		}
	}
}

func TestSymmetricContractions(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	d, k := 4, 5
	T := randSymmetric(d, k, rng)
	u := randVec(d, rng)
	v := randVec(d, rng)
	full := denseOf(T)
	// Contract: C[i1..i4] = Σ_j T[i1..i4 j] v_j (last index fastest).
	C := T.Contract(v)
	Cd := denseOf(C)
	for r := range Cd {
		s := 0.0
		for j := 0; j < d; j++ {
			s += full[r*d+j] * v[j]
		}
		if math.Abs(s-Cd[r]) > 1e-12 {
			t.Fatalf("Contract entry %d: %v vs %v", r, Cd[r], s)
		}
	}
	// Apply = repeated contraction.
	x := T
	for x.Order > 0 {
		x = x.Contract(u)
	}
	if math.Abs(x.Data[0]-T.Apply(u)) > 1e-11*math.Abs(x.Data[0]) {
		t.Fatalf("Apply %v vs contractions %v", T.Apply(u), x.Data[0])
	}
	// ContractSym with G = u uᵀ equals contracting twice with u; with a
	// general symmetric G, linearity.
	G := mat.NewSymDense(d, nil)
	G.SymOuterK(1, mat.NewDense(d, 1, u))
	a := T.ContractSym(G)
	b := T.Contract(u).Contract(u)
	for i := range a.Data {
		if math.Abs(a.Data[i]-b.Data[i]) > 1e-12 {
			t.Fatalf("ContractSym(uuᵀ) entry %d: %v vs %v", i, a.Data[i], b.Data[i])
		}
	}
	G2 := mat.NewSymDense(d, nil)
	G2.SymOuterK(1, mat.NewDense(d, 1, v))
	G.AddSym(G, G2)
	c := T.ContractSym(G)
	bv := T.Contract(v).Contract(v)
	for i := range c.Data {
		if math.Abs(c.Data[i]-b.Data[i]-bv.Data[i]) > 1e-12 {
			t.Fatalf("ContractSym not linear at %d", i)
		}
	}
	// AddOuterPower and SymEmbed: u^{⊗k} has Matricize = embed·embedᵀ.
	P := NewSymmetric(d, 4)
	P.AddOuterPower(1, u)
	M := P.Matricize(2)
	e := SymEmbed(u, 2)
	for i := range e {
		for j := range e {
			if math.Abs(M.At(i, j)-e[i]*e[j]) > 1e-12 {
				t.Fatalf("u⊗4 matricized ≠ embed·embedᵀ")
			}
		}
	}
	if got, want := vec.Dot(SymEmbed(u, 3), SymEmbed(v, 3)), math.Pow(vec.Dot(u, v), 3); math.Abs(got-want) > 1e-12*math.Abs(want) {
		t.Fatalf("embed inner %v vs (u·v)³ %v", got, want)
	}
	U := SymUnembed2(e, d)
	for i := 0; i < d; i++ {
		for j := 0; j < d; j++ {
			if math.Abs(U.At(i, j)-u[i]*u[j]) > 1e-12 {
				t.Fatal("SymUnembed2")
			}
		}
	}
}

// wickHermite builds He_k(x) as a dense d^k array by the one-mode recursion
// He_{k+1}(x)_{i,j} = x_j·He_k(x)_i − Σ_r δ_{i_r j}·He_{k−1}(x)_{i∖i_r}, which
// is the Wick/derivative definition ([ATV21, Definition A.2]).
func wickHermite(x []float64, k int) []float64 {
	d := len(x)
	prev := []float64{1} // He_0
	if k == 0 {
		return prev
	}
	cur := slices.Clone(x) // He_1
	for order := 1; order < k; order++ {
		next := make([]float64, ipow(d, order+1))
		idx := make([]int, order+1)
		for pos := range next {
			unpack(idx, pos, d)
			j := idx[order]
			v := x[j] * cur[pos/d]
			for r := 0; r < order; r++ {
				if idx[r] == j {
					// Drop slots r and order: index into He_{order−1}.
					rest := make([]int, 0, order-1)
					for s := 0; s < order; s++ {
						if s != r {
							rest = append(rest, idx[s])
						}
					}
					at := 0
					for _, i := range rest {
						at = at*d + i
					}
					v -= prev[at]
				}
			}
			next[pos] = v
		}
		prev, cur = cur, next
	}
	return cur
}

// The product form equals the Wick form for k ≤ 6, and ⟨He_k(x), u^{⊗k}⟩ =
// He_k(u·x) for unit u.
func TestHermiteTensorProductForm(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for k := 0; k <= 6; k++ {
		x := randVec(3, rng)
		H := HermiteTensor(x, k)
		want := wickHermite(x, k)
		got := denseOf(H)
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-12*math.Max(1, math.Abs(want[i])) {
				t.Fatalf("k=%d entry %d: product %v, Wick %v", k, i, got[i], want[i])
			}
		}
		u := randVec(3, rng)
		vec.Normalize(u)
		he := hermiteTable(vec.Dot(u, x), k, nil)[k]
		if got := H.Apply(u); math.Abs(got-he) > 1e-12*math.Max(1, math.Abs(he)) {
			t.Fatalf("k=%d: ⟨He_k(x), u^⊗k⟩ = %v, He_k(u·x) = %v", k, got, he)
		}
	}
}

// HermiteMoments matches the per-sample product form to rounding, is
// identical at any GOMAXPROCS, and its full contraction equals the
// directional moment mean(s·He_k(u·z)), since ⟨He_k(z), u^{⊗k}⟩ = He_k(u·z)
// for a unit u.
func TestHermiteMomentsMatchesDirect(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	n, k, p, R := 9000, 3, 2, 6
	Z := mat.NewDense(n, k, nil)
	S := mat.NewDense(n, p, nil)
	for i := 0; i < n; i++ {
		for j := 0; j < k; j++ {
			Z.Set(i, j, rng.NormFloat64())
		}
		for c := 0; c < p; c++ {
			S.Set(i, c, rng.NormFloat64()+float64(c))
		}
	}
	got, err := HermiteMoments(context.Background(), Z, S, R, nil)
	if err != nil {
		t.Fatal(err)
	}
	for r := 0; r <= R; r++ {
		want := make([]*Symmetric, p)
		for c := range want {
			want[c] = NewSymmetric(k, r)
		}
		for i := 0; i < n; i++ {
			H := HermiteTensor(Z.RawRowView(i), r)
			for c := 0; c < p; c++ {
				want[c].AddScaled(S.At(i, c)/float64(n), H)
			}
		}
		for c := 0; c < p; c++ {
			diff := want[c].Clone()
			diff.AddScaled(-1, got[c][r])
			if e := diff.Norm(); e > 1e-12*math.Max(1, want[c].Norm()) {
				t.Errorf("order %d channel %d: ‖Δ‖ = %.2e (‖T‖ = %.3g)", r, c, e, want[c].Norm())
			}
			u := randVec(k, rng)
			vec.Normalize(u)
			dm := DirectionalMoment(Z, mat.Col(nil, c, S), u, r)
			if a := got[c][r].Apply(u); math.Abs(a-dm) > 1e-12*math.Max(1, math.Abs(dm)) {
				t.Errorf("order %d: T̂(u,…,u) = %v, mean(s·He(u·z)) = %v", r, a, dm)
			}
		}
	}
	prev := runtime.GOMAXPROCS(1)
	one, err := HermiteMoments(context.Background(), Z, S, R, nil)
	runtime.GOMAXPROCS(prev)
	if err != nil {
		t.Fatal(err)
	}
	for c := range one {
		for r := range one[c] {
			if !slices.Equal(one[c][r].Data, got[c][r].Data) {
				t.Fatalf("GOMAXPROCS changes order-%d moment of channel %d", r, c)
			}
		}
	}
	if _, err := HermiteMoments(context.Background(), Z, S, 13, nil); err == nil {
		t.Error("order 13 accepted")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := HermiteMoments(ctx, Z, S, 4, nil); err == nil {
		t.Error("cancelled context not reported")
	}
}

// Gram(W^{⊙ℓ}) = (WWᵀ)^{∘ℓ}, and s_m(W^{⊙(ℓ+1)}) ≥ s_m(W^{⊙ℓ}) for unit rows
// (the Khatri–Rao powers of [ATV21, Claim A.4] only get better conditioned).
func TestKhatriRaoGram(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for trial := 0; trial < 20; trial++ {
		m, d := 3+trial%4, 3
		W := mat.NewDense(m, d, nil)
		for i := 0; i < m; i++ {
			u := randVec(d, rng)
			vec.Normalize(u)
			W.SetRow(i, u)
		}
		prev := -1.0
		for ell := 1; ell <= 4; ell++ {
			// Full Khatri–Rao columns w^{⊗ℓ}.
			K := mat.NewDense(ipow(d, ell), m, nil)
			for i := 0; i < m; i++ {
				P := NewSymmetric(d, ell)
				P.AddOuterPower(1, W.RawRowView(i))
				K.SetCol(i, denseOf(P))
			}
			var g mat.Dense
			g.Mul(K.T(), K)
			G := KhatriRaoGram(W, ell)
			for i := 0; i < m; i++ {
				for j := 0; j < m; j++ {
					if math.Abs(g.At(i, j)-G.At(i, j)) > 1e-12 {
						t.Fatalf("Gram mismatch")
					}
				}
			}
			var eig mat.EigenSym
			eig.Factorize(G, false)
			smin := math.Sqrt(math.Max(0, eig.Values(nil)[0]))
			if smin < prev-1e-12 {
				t.Fatalf("m=%d ℓ=%d: s_m = %v fell below %v", m, ell, smin, prev)
			}
			prev = smin
		}
	}
}
