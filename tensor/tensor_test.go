package tensor

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/hermite"
	"github.com/relurec/relurec/internal/testutil"
	"github.com/relurec/relurec/internal/vec"
)

func randUnit(k int, rng *rand.Rand) []float64 {
	w := make([]float64, k)
	for i := range w {
		w[i] = rng.NormFloat64()
	}
	vec.Normalize(w)
	return w
}

func kron(a, b int) float64 {
	if a == b {
		return 1
	}
	return 0
}

// he4 and he3 are the full Hermite tensors of one sample, written out from
// their definitions ([BJW19, Alg 4] step 1) to check the streamed slices against.
func he4(z []float64, a, b, c, d int) float64 {
	return z[a]*z[b]*z[c]*z[d] -
		kron(a, b)*z[c]*z[d] - kron(a, c)*z[b]*z[d] - kron(a, d)*z[b]*z[c] -
		kron(b, c)*z[a]*z[d] - kron(b, d)*z[a]*z[c] - kron(c, d)*z[a]*z[b] +
		kron(a, b)*kron(c, d) + kron(a, c)*kron(b, d) + kron(a, d)*kron(b, c)
}

func he3(z []float64, a, b, c int) float64 {
	return z[a]*z[b]*z[c] - z[a]*kron(b, c) - z[b]*kron(a, c) - z[c]*kron(a, b)
}

// The streamed slices must equal the direct per-sample contraction of He_r
// to rounding, for several chunks (n > chunkRows) and channels.
func TestSlicesMatchDirect(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n, k := chunkRows+37, 3
	Z := testutil.RandDense(rng, n, k)
	S := testutil.RandDense(rng, n, 2)
	cs := []Contraction{
		{Channel: 0, Alpha: randUnit(k, rng), Beta: randUnit(k, rng)},
		{Channel: 1, Alpha: randUnit(k, rng), Beta: randUnit(k, rng)},
		{Channel: 1, Alpha: randUnit(k, rng)},
	}
	got, err := HermiteSlices(context.Background(), Z, S, cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cs {
		for x := 0; x < k; x++ {
			for y := 0; y < k; y++ {
				want := 0.0
				for q := 0; q < n; q++ {
					z := Z.RawRowView(q)
					v := 0.0
					for a := 0; a < k; a++ {
						if c.Beta == nil {
							v += he3(z, x, y, a) * c.Alpha[a]
							continue
						}
						for b := 0; b < k; b++ {
							v += he4(z, x, y, a, b) * c.Alpha[a] * c.Beta[b]
						}
					}
					want += S.At(q, c.Channel) * v
				}
				want /= float64(n)
				if d := got[i].At(x, y) - want; math.Abs(d) > 1e-11*(1+math.Abs(want)) {
					t.Fatalf("slice %d [%d,%d] = %v, want %v", i, x, y, got[i].At(x, y), want)
				}
			}
		}
	}
	m2, err := HermiteMoment2(context.Background(), Z, S, nil)
	if err != nil {
		t.Fatal(err)
	}
	for x := 0; x < k; x++ {
		for y := 0; y < k; y++ {
			want := 0.0
			for q := 0; q < n; q++ {
				z := Z.RawRowView(q)
				want += S.At(q, 1) * (z[x]*z[y] - kron(x, y)) / float64(n)
			}
			if d := m2[1].At(x, y) - want; math.Abs(d) > 1e-12 {
				t.Fatalf("order-2 [%d,%d] = %v, want %v", x, y, m2[1].At(x, y), want)
			}
		}
	}
}

// reluTeacher returns samples z ~ N(0, I_k) and weights s = Σ_j u_j ReLU(w_j·z).
func reluTeacher(n, k int, u []float64, rng *rand.Rand) (Z, S, W *mat.Dense) {
	Z = testutil.RandDense(rng, n, k)
	W = mat.NewDense(k, k, nil)
	for j := 0; j < k; j++ {
		W.SetCol(j, randUnit(k, rng))
	}
	S = mat.NewDense(n, 1, nil)
	for q := 0; q < n; q++ {
		s := 0.0
		for j := 0; j < k; j++ {
			s += u[j] * math.Max(mat.Dot(Z.RowView(q), W.ColView(j)), 0)
		}
		S.Set(q, 0, s)
	}
	return Z, S, W
}

// For s = Σ u_j ReLU(w_j·z) the order-4 slice converges
// to Σ c_4·u_j·(w_j·α)(w_j·β)·w_j w_jᵀ and the order-3 slice to 0 (c_3 = 0:
// the printed Alg 4 tensor vanishes), with O(n^{-1/2}) sampling error.
func TestSteinIdentityReLU(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	n, k := 400000, 3
	u := []float64{1, -0.7, 1.3}
	Z, S, W := reluTeacher(n, k, u, rng)
	alpha, beta := randUnit(k, rng), randUnit(k, rng)
	c4 := hermite.ReLU{}.Coeff(4)
	want := mat.NewDense(k, k, nil)
	for j := 0; j < k; j++ {
		w := W.ColView(j)
		coef := c4 * u[j] * mat.Dot(w, mat.NewVecDense(k, alpha)) * mat.Dot(w, mat.NewVecDense(k, beta))
		want.RankOne(want, coef, w, w)
	}
	errAt := func(m int) (e4, n3 float64) {
		Zm := Z.Slice(0, m, 0, k).(*mat.Dense)
		Sm := S.Slice(0, m, 0, 1).(*mat.Dense)
		sl, err := HermiteSlices(context.Background(), Zm, Sm, []Contraction{
			{Alpha: alpha, Beta: beta}, {Alpha: alpha},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var diff mat.Dense
		diff.Sub(sl[0], want)
		return mat.Norm(&diff, 2) / mat.Norm(want, 2), mat.Norm(sl[1], 2) / mat.Norm(want, 2)
	}
	e4, n3 := errAt(n)
	if e4 > 0.4 {
		t.Errorf("order-4 slice relative error %.3f at n=%d, want < 0.4 (one slice of a k=3 order-4 moment)", e4, n)
	}
	if n3 > 0.15 {
		t.Errorf("order-3 slice relative norm %.3f at n=%d, want ≈ 0", n3, n)
	}
	// With 16× fewer samples both are ~4× larger: pure O(n^{-1/2}) sampling noise.
	e4s, n3s := errAt(n / 16)
	if r := n3s / n3; r < 1.5 || r > 10 {
		t.Errorf("order-3 norm grew by %.2f with 16× fewer samples, want ≈ 4", r)
	}
	if r := e4s / e4; r < 1.5 || r > 10 {
		t.Errorf("order-4 error grew by %.2f with 16× fewer samples, want ≈ 4", r)
	}
}

func TestJennrichExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	k := 6
	W := mat.NewDense(k, k, nil)
	for j := 0; j < k; j++ {
		W.SetCol(j, randUnit(k, rng))
	}
	var slices []*mat.SymDense
	for i := 0; i < 4; i++ {
		var M mat.Dense
		D := mat.NewDiagDense(k, nil)
		for j := 0; j < k; j++ {
			D.SetDiag(j, rng.NormFloat64())
		}
		M.Product(W, D, W.T())
		S := mat.NewSymDense(k, nil)
		for a := 0; a < k; a++ {
			for b := a; b < k; b++ {
				S.SetSym(a, b, (M.At(a, b)+M.At(b, a))/2)
			}
		}
		slices = append(slices, S)
	}
	dec, err := Jennrich(slices, rng, JennrichOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if dec.Residual > 1e-10 {
		t.Errorf("residual %v on exact slices", dec.Residual)
	}
	for j := 0; j < k; j++ {
		best := 0.0
		for i := 0; i < k; i++ {
			best = math.Max(best, math.Abs(mat.Dot(W.ColView(j), dec.W.ColView(i))))
		}
		if 1-best > 1e-10 {
			t.Errorf("component %d recovered with |cos| = %v", j, best)
		}
	}
}

func TestJennrichNeedsTwoSlices(t *testing.T) {
	if _, err := Jennrich([]*mat.SymDense{mat.NewSymDense(2, nil)}, rand.New(rand.NewPCG(1, 1)), JennrichOptions{}); err == nil {
		t.Fatal("want an error for a single slice")
	}
	if _, err := Jennrich([]*mat.SymDense{mat.NewSymDense(2, nil), mat.NewSymDense(2, nil)}, rand.New(rand.NewPCG(1, 1)), JennrichOptions{}); err == nil {
		t.Fatal("want an error for zero slices")
	}
}

func BenchmarkSlicesK8(b *testing.B)  { benchSlices(b, 200000, 8) }
func BenchmarkSlicesK20(b *testing.B) { benchSlices(b, 200000, 20) }

// benchSlices measures the order-4 slice kernel with 2k slices over 3 weight
// channels, the tensor start's default. Floor: 2·n·k²·(2k+3) flops (the GEMM)
// + 4·n·k·2k (the contraction weights): 0.26 GFLOP at k=8 and 3.4 GFLOP at
// k=20 for n=2e5, i.e. ~0.02 s and ~0.25 s at the ~13 GFLOP/s pure-Go GEMM.
func benchSlices(b *testing.B, n, k int) {
	rng := rand.New(rand.NewPCG(7, 8))
	Z := testutil.RandDense(rng, n, k)
	S := testutil.RandDense(rng, n, 3)
	var cs []Contraction
	for i := 0; i < 2*k; i++ {
		cs = append(cs, Contraction{Channel: i % 3, Alpha: randUnit(k, rng), Beta: randUnit(k, rng)})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := HermiteSlices(context.Background(), Z, S, cs, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "samples/s")
}

func BenchmarkJennrichK20(b *testing.B) {
	rng := rand.New(rand.NewPCG(9, 9))
	k := 20
	var slices []*mat.SymDense
	for i := 0; i < 2*k; i++ {
		s := mat.NewSymDense(k, nil)
		for a := 0; a < k; a++ {
			for c := a; c < k; c++ {
				s.SetSym(a, c, rng.NormFloat64())
			}
		}
		slices = append(slices, s)
	}
	for i := 0; i < b.N; i++ {
		_, _ = Jennrich(slices, rng, JennrichOptions{})
	}
}

// JointDiagonalize must recover a component the start missed when two start
// columns sit on the same component.
func TestJointDiagonalizeRestartsDuplicates(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	k := 5
	W := mat.NewDense(k, k, nil)
	for j := 0; j < k; j++ {
		W.SetCol(j, randUnit(k, rng))
	}
	var slices []*mat.SymDense
	for i := 0; i < 2*k; i++ {
		D := mat.NewDiagDense(k, nil)
		for j := 0; j < k; j++ {
			D.SetDiag(j, rng.NormFloat64())
		}
		var M mat.Dense
		M.Product(W, D, W.T())
		S := mat.NewSymDense(k, nil)
		for a := 0; a < k; a++ {
			for b := a; b < k; b++ {
				S.SetSym(a, b, (M.At(a, b)+M.At(b, a))/2)
			}
		}
		slices = append(slices, S)
	}
	start := mat.DenseCopyOf(W)
	dup := mat.Col(nil, 0, W)
	for i := range dup {
		dup[i] += 1e-3 * rng.NormFloat64()
	}
	vec.Normalize(dup)
	start.SetCol(k-1, dup) // component k−1 is missing, component 0 is doubled
	dec := JointDiagonalize(slices, start, 0)
	for j := 0; j < k; j++ {
		best := 0.0
		for i := 0; i < k; i++ {
			best = math.Max(best, math.Abs(mat.Dot(W.ColView(j), dec.W.ColView(i))))
		}
		if 1-best > 1e-8 {
			t.Errorf("component %d recovered with |cos| = %v (residual %.1e)", j, best, dec.Residual)
		}
	}
}
