package outofcore

import (
	"context"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/testutil"
)

// memSource is a Source over an in-memory matrix.
type memSource struct {
	m    *mat.Dense
	next int
}

func (s *memSource) Dims() (int, int) { return s.m.Dims() }
func (s *memSource) Rewind() error    { s.next = 0; return nil }
func (s *memSource) ReadRows(_ context.Context, dst *mat.Dense) (int, error) {
	n, c := s.m.Dims()
	want, _ := dst.Dims()
	rows := min(want, n-s.next)
	if rows == 0 {
		return 0, io.EOF
	}
	dst.Slice(0, rows, 0, c).(*mat.Dense).Copy(s.m.Slice(s.next, s.next+rows, 0, c))
	s.next += rows
	return rows, nil
}

func TestSampleIndex(t *testing.T) {
	for _, c := range []struct{ n, s int }{{10, 3}, {1000, 999}, {5, 5}, {5, 9}, {1 << 20, 1000}} {
		idx := SampleIndex(c.n, c.s, 7)
		if want := min(c.n, c.s); len(idx) != want {
			t.Fatalf("n=%d s=%d: %d indices, want %d", c.n, c.s, len(idx), want)
		}
		if !slices.IsSorted(idx) || len(slices.Compact(slices.Clone(idx))) != len(idx) || idx[0] < 0 || idx[len(idx)-1] >= c.n {
			t.Fatalf("n=%d s=%d: indices not distinct, increasing and in range: %v", c.n, c.s, idx[:min(10, len(idx))])
		}
		if !slices.Equal(idx, SampleIndex(c.n, c.s, 7)) {
			t.Fatal("the same seed drew another sample")
		}
	}
	// Spread over the whole range: a sample of 1000 of 2²⁰ rows has rows in
	// every tenth of the file.
	idx := SampleIndex(1<<20, 1000, 1)
	for tenth := range 10 {
		lo, hi := tenth*(1<<20)/10, (tenth+1)*(1<<20)/10
		i, _ := slices.BinarySearch(idx, lo)
		if i == len(idx) || idx[i] >= hi {
			t.Fatalf("no sampled row in tenth %d", tenth)
		}
	}
}

// Sample returns exactly the chosen rows, and Residual the in-memory
// residual, whatever the block size.
func TestSampleAndResidual(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	X, Y := testutil.RandDense(rng, 1003, 4), testutil.RandDense(rng, 1003, 3)
	W := testutil.RandDense(rng, 4, 3)
	f := func(x *mat.Dense) *mat.Dense {
		var out mat.Dense
		out.Mul(x, W)
		return &out
	}
	var diff mat.Dense
	diff.Sub(Y, f(X))
	want := mat.Norm(&diff, 2) / mat.Norm(Y, 2)
	for _, block := range []int{1, 64, 5000} {
		p := Pair{X: &memSource{m: X}, Y: &memSource{m: Y}, Block: block}
		idx := []int{0, 17, 63, 64, 999, 1002}
		xs, ys, err := p.Sample(context.Background(), idx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range idx {
			if !slices.Equal(xs.RawRowView(i), X.RawRowView(r)) || !slices.Equal(ys.RawRowView(i), Y.RawRowView(r)) {
				t.Fatalf("block %d: sample row %d is not row %d", block, i, r)
			}
		}
		got, rows, err := p.Residual(context.Background(), f, nil)
		if err != nil || rows != 1003 || math.Abs(got-want) > 1e-14*want {
			t.Fatalf("block %d: residual %v over %d rows (err %v); want %v over 1003", block, got, rows, err, want)
		}
	}
}

// A NaN anywhere in the data, or rows that disagree, stop the pass with an
// input error naming the row.
func TestPassRefusesBadData(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	X, Y := testutil.RandDense(rng, 100, 2), testutil.RandDense(rng, 100, 2)
	Y.Set(77, 1, math.NaN())
	p := Pair{X: &memSource{m: X}, Y: &memSource{m: Y}, Block: 10}
	_, _, err := p.Sample(context.Background(), []int{1}, nil)
	if !errors.Is(err, errs.ErrInput) || !strings.Contains(err.Error(), "Y has NaN at row 77, column 1") {
		t.Fatalf("err = %v; want an input error naming Y's row 77", err)
	}
	p = Pair{X: &memSource{m: X}, Y: &memSource{m: testutil.RandDense(rng, 99, 2)}}
	if _, _, err := p.Residual(context.Background(), func(x *mat.Dense) *mat.Dense { return x }, nil); !errors.Is(err, errs.ErrInput) || !strings.Contains(err.Error(), "100 rows but Y has 99") {
		t.Fatalf("err = %v; want the row counts", err)
	}
}

func TestSampleSize(t *testing.T) {
	// Ten times the floor, at least 10⁵, at most n.
	if s, err := SampleSize(5_000_000, 3000, 1600, 2e9); err != nil || s != 100_000 {
		t.Fatalf("SampleSize = %d, %v; want 100000", s, err)
	}
	if s, err := SampleSize(5_000_000, 30_000, 1600, 8e9); err != nil || s != 300_000 {
		t.Fatalf("SampleSize = %d, %v; want 300000", s, err)
	}
	if s, _ := SampleSize(50_000, 3000, 1600, 2e9); s != 50_000 {
		t.Fatalf("SampleSize = %d; want all 50000 rows", s)
	}
	// A budget that holds 25 000 rows' fit but not 10⁵, and one below the floor.
	if s, _ := SampleSize(5_000_000, 3000, 1000, 1e8); s != 25_000 {
		t.Fatalf("SampleSize = %d; want 25000", s)
	}
	if _, err := SampleSize(5_000_000, 3000, 1000, 1e7); !errors.Is(err, errs.ErrInput) || !strings.Contains(err.Error(), "--max-memory") {
		t.Fatalf("err = %v; want an input error naming --max-memory", err)
	}
}

// The default block holds 32 MB of a pair's rows, between 16 and 16384.
func TestBlockRows(t *testing.T) {
	for _, c := range []struct{ cols, want int }{{200, 16384}, {1000, 4194}, {1 << 22, 16}} {
		if got := blockRows(c.cols); got != c.want {
			t.Errorf("blockRows(%d) = %d, want %d", c.cols, got, c.want)
		}
	}
}
