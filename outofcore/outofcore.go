// Package outofcore fits a network to data larger than memory in two
// passes over the rows: the first draws a seeded random sample of rows that
// the learner fits in memory (the exact routes need a sample floor of rows,
// not all of them: docs/twolayer.md), the second streams every row through
// the fitted network for the residual certificate ‖Y − f(X)‖_F/‖Y‖_F, a
// sum over rows. An exact answer is therefore certified on all the data
// while only the sample and two blocks of rows are held (docs/scale.md).
package outofcore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/errs"
)

// Source is a matrix read a block of rows at a time, from its first row
// again after Rewind (dataio.NPYRows is one).
type Source interface {
	Dims() (rows, cols int)
	// ReadRows fills dst with the next rows and returns how many it read
	// (0 and io.EOF after the last).
	ReadRows(ctx context.Context, dst *mat.Dense) (int, error)
	Rewind() error
}

// Pair is inputs X and outputs Y with the same rows, read together.
type Pair struct {
	X, Y Source
	// XName and YName name the arrays in messages ("X", "Y" when empty).
	XName, YName string
	// Block is the rows read at a time (0: blockRows of the pair's width).
	Block int
}

// blockRows is the default block for rows of cols values: 32 MB of float64
// (16384 rows of d + m = 200 are 26 MB), large enough that the reads and
// the forward pass run at their streaming speed, and small enough that two
// blocks of a wide pair do not crowd the memory budget; between 16 and
// 16384 rows.
func blockRows(cols int) int { return min(16384, max(16, (32<<20)/(8*max(cols, 1)))) }

// Rows returns the number of rows, after checking that X and Y agree.
func (p Pair) Rows() (int, error) {
	nx, _ := p.X.Dims()
	ny, _ := p.Y.Dims()
	if nx != ny {
		return 0, errs.New(fmt.Sprintf("%s has %d rows but %s has %d: samples are rows, so they must match", p.xName(), nx, p.yName(), ny), errs.ErrInput)
	}
	return nx, nil
}

func (p Pair) xName() string { return cmp.Or(p.XName, "X") }
func (p Pair) yName() string { return cmp.Or(p.YName, "Y") }

// pass reads every row of X and Y once, from the first, a block at a time,
// checks that the values are finite and calls each with the index of the
// block's first row and the block. progress (may be nil) sees the rows
// done. The next block is read while each works on the current one (two
// blocks in memory), so a pass takes about the longer of reading and
// computing, not their sum.
func (p Pair) pass(ctx context.Context, progress func(done, total int), each func(first int, x, y *mat.Dense) error) error {
	n, err := p.Rows()
	if err != nil {
		return err
	}
	_, d := p.X.Dims()
	_, m := p.Y.Dims()
	if err := p.X.Rewind(); err != nil {
		return err
	}
	if err := p.Y.Rewind(); err != nil {
		return err
	}
	block := min(n, cmp.Or(max(p.Block, 0), blockRows(d+m)))
	// Two pairs of buffers go round: the reader fills one while each reads
	// the other.
	type filled struct {
		first, rows int
		buf         [2]*mat.Dense
		err         error
	}
	free := make(chan [2]*mat.Dense, 2)
	for range 2 {
		free <- [2]*mat.Dense{mat.NewDense(block, d, nil), mat.NewDense(block, m, nil)}
	}
	ready := make(chan filled, 1)
	stop, exited := make(chan struct{}), make(chan struct{})
	defer func() { close(stop); <-exited }() // the reader is done with the sources
	go func() {
		defer close(exited)
		defer close(ready)
		for done := 0; done < n; done += block {
			f := filled{first: done, rows: min(block, n-done)}
			select {
			case f.buf = <-free:
			case <-stop:
				return
			}
			f.err = p.readBlock(ctx, top(f.buf[0], f.rows, d), top(f.buf[1], f.rows, m), done, n)
			select {
			case ready <- f:
			case <-stop:
				return
			}
			if f.err != nil {
				return
			}
		}
	}()
	for f := range ready {
		if f.err != nil {
			return f.err
		}
		if err := each(f.first, top(f.buf[0], f.rows, d), top(f.buf[1], f.rows, m)); err != nil {
			return err
		}
		if progress != nil {
			progress(f.first+f.rows, n)
		}
		free <- f.buf
	}
	return nil
}

// top is the first rows × cols of b.
func top(b *mat.Dense, rows, cols int) *mat.Dense { return b.Slice(0, rows, 0, cols).(*mat.Dense) }

// readBlock fills x and y with the rows from first on and checks them.
func (p Pair) readBlock(ctx context.Context, x, y *mat.Dense, first, n int) error {
	if err := readFull(ctx, p.X, x, first, n); err != nil {
		return err
	}
	if err := readFull(ctx, p.Y, y, first, n); err != nil {
		return err
	}
	if err := dataio.CheckFiniteFrom(p.xName(), x, first); err != nil {
		return err
	}
	return dataio.CheckFiniteFrom(p.yName(), y, first)
}

// readFull fills dst from s, which must hold that many rows more.
func readFull(ctx context.Context, s Source, dst *mat.Dense, first, n int) error {
	want, _ := dst.Dims()
	got, err := s.ReadRows(ctx, dst)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if got != want {
		return fmt.Errorf("rows %d to %d of %d could not be read (the source ended early): %w", first, first+want, n, errs.ErrInput)
	}
	return nil
}

// SampleIndex returns s distinct row indices of 0..n−1 drawn uniformly at
// random from seed, in increasing order (all rows when s ≥ n). A random
// sample rather than the first s rows: files are often ordered (by class,
// by time), and the exact routes need rows spread like the whole.
func SampleIndex(n, s int, seed uint64) []int {
	if s >= n {
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		return idx
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x5851F42D4C957F2D))
	// Floyd's algorithm: s draws, no n-sized state.
	seen := make(map[int]struct{}, s)
	idx := make([]int, 0, s)
	for j := n - s; j < n; j++ {
		t := rng.IntN(j + 1)
		if _, dup := seen[t]; dup {
			t = j
		}
		seen[t] = struct{}{}
		idx = append(idx, t)
	}
	slices.Sort(idx)
	return idx
}

// Sample reads the rows idx (increasing, as SampleIndex returns them) of X
// and Y in one pass over all rows, checking every row for finite values on
// the way.
func (p Pair) Sample(ctx context.Context, idx []int, progress func(done, total int)) (X, Y *mat.Dense, err error) {
	_, d := p.X.Dims()
	_, m := p.Y.Dims()
	X, Y = mat.NewDense(len(idx), d, nil), mat.NewDense(len(idx), m, nil)
	at := 0
	err = p.pass(ctx, progress, func(first int, x, y *mat.Dense) error {
		rows, _ := x.Dims()
		for at < len(idx) && idx[at] < first+rows {
			X.SetRow(at, x.RawRowView(idx[at]-first))
			Y.SetRow(at, y.RawRowView(idx[at]-first))
			at++
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return X, Y, nil
}

// Residual streams every row through f (a network's forward pass on a
// block of inputs) and returns ‖Y − f(X)‖_F/‖Y‖_F over all rows, the
// residual certificate's quantity (certify.Certificate), with the number
// of rows. The sums of squares are accumulated per block and then added,
// so rounding grows with the number of blocks, not of rows.
func (p Pair) Residual(ctx context.Context, f func(x *mat.Dense) *mat.Dense, progress func(done, total int)) (resid float64, rows int, err error) {
	var num, den float64
	err = p.pass(ctx, progress, func(first int, x, y *mat.Dense) error {
		out := f(x)
		r, c := y.Dims()
		var bn, bd float64
		for i := 0; i < r; i++ {
			yr, or := y.RawRowView(i), out.RawRowView(i)
			for j := 0; j < c; j++ {
				e := yr[j] - or[j]
				bn += e * e
				bd += yr[j] * yr[j]
			}
		}
		num, den = num+bn, den+bd
		rows = first + r
		return nil
	})
	if err != nil {
		return 0, 0, err
	}
	if den == 0 {
		return 0, rows, errs.New(fmt.Sprintf("%s is identically zero; there is nothing to learn", p.yName()), errs.ErrInput)
	}
	return math.Sqrt(num / den), rows, nil
}

// SampleSize is how many of n rows to fit on: ten times the learner's
// sample floor and at least 10⁵ rows (more rows than the floor make each
// unit's certificate on the sample sharper, and the fit on 10⁵ rows takes
// seconds), or all n rows when fewer. The fit holds about four copies of
// its sample (the data, a basis of the outputs, the activations); when
// that exceeds budget bytes the sample shrinks to what fits, and below
// the floor the error says how much memory the floor needs.
func SampleSize(n, floor, rowBytes int, budget int64) (int, error) {
	s := min(n, max(10*floor, 100_000))
	fit := budget / (4 * int64(rowBytes))
	if int64(s) > fit {
		s = int(fit)
	}
	if need := min(n, floor); s < need {
		return 0, errs.New(fmt.Sprintf("the data are larger than memory and are fitted on a sample of their rows, but the memory budget is %s: it holds a sample of %d rows and the fit needs at least %d (its sample floor), about %s: raise the budget (relurec --max-memory)",
			dataio.FormatBytes(float64(budget)), s, need, dataio.FormatBytes(float64(need)*4*float64(rowBytes))), errs.ErrInput)
	}
	return s, nil
}
