package extract

import (
	"context"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/nn"
)

// Oracle is black-box access to a network: it evaluates the network on the
// rows of X (n×d, one query per row) and returns the n×p outputs. Extract
// calls it with batches of queries and counts every row it sends; the
// oracle itself need not count. It must return the same number of outputs
// p on every call, and only finite values.
type Oracle func(ctx context.Context, X *mat.Dense) (*mat.Dense, error)

// FromMLP wraps a local network (any nn.MLP, not only a depth-2 one) as an
// Oracle. Queries with the wrong number of columns get an error wrapping
// errs.ErrInput instead of nn.Forward's panic.
func FromMLP(m *nn.MLP) Oracle {
	return func(ctx context.Context, X *mat.Dense) (*mat.Dense, error) {
		if m == nil || len(m.Layers) == 0 {
			return nil, errs.Inputf("extract.FromMLP: the network is nil or has no layers")
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if _, c := X.Dims(); c != m.In() {
			return nil, errs.Inputf("extract.FromMLP: queries have %d columns, the network takes %d inputs", c, m.In())
		}
		return m.Forward(X), nil
	}
}

// FromNetwork wraps a nn.Depth2 as an Oracle (see FromMLP).
func FromNetwork(net *nn.Depth2) Oracle {
	return func(ctx context.Context, X *mat.Dense) (*mat.Dense, error) {
		if err := net.Validate(); err != nil {
			return nil, fmt.Errorf("extract.FromNetwork: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if _, c := X.Dims(); c != net.In() {
			return nil, errs.Inputf("extract.FromNetwork: queries have %d columns, the network takes %d inputs", c, net.In())
		}
		return net.Forward(X), nil
	}
}

// errBudget stops the search when Options.MaxQueries would be exceeded.
// Internal: Extract turns it into a warning, so it never reaches a caller.
var errBudget = errs.New("extract: query budget exhausted", nil)

// counted is the oracle as Extract sees it: it checks every answer's shape
// and values, counts rows and calls, and enforces the search budget.
type counted struct {
	f       Oracle
	d, p    int // p = 0 until the first answer
	queries int
	calls   int
	limit   int // 0: none
}

func (o *counted) query(ctx context.Context, X *mat.Dense) (*mat.Dense, error) {
	n, _ := X.Dims()
	if n == 0 {
		return mat.NewDense(0, max(o.p, 1), nil), nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if o.limit > 0 && o.queries+n > o.limit {
		return nil, errBudget
	}
	// A non-finite query is a defect of the extraction, not of the
	// oracle: refuse it here rather than blame the oracle's answer.
	for i, v := range X.RawMatrix().Data {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			_, d := X.Dims()
			return nil, fmt.Errorf("extract: internal error: query %d, input %d is %v", i/d, i%d, v)
		}
	}
	Y, err := o.f(ctx, X)
	o.queries += n
	o.calls++
	if err != nil {
		return nil, fmt.Errorf("extract: the oracle failed on a batch of %d queries: %w", n, err)
	}
	if Y == nil {
		return nil, errs.Inputf("extract: the oracle returned no matrix for %d queries", n)
	}
	r, c := Y.Dims()
	if r != n || c == 0 || (o.p != 0 && c != o.p) {
		want := "n×p"
		if o.p != 0 {
			want = fmt.Sprintf("%d×%d", n, o.p)
		}
		return nil, errs.Inputf("extract: the oracle returned a %d×%d matrix for %d queries, want %s (one row per query, the same outputs every call)", r, c, n, want)
	}
	o.p = c
	for i := 0; i < r; i++ {
		for j := 0; j < c; j++ {
			if v := Y.At(i, j); math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, errs.Inputf("extract: the oracle returned %v at query %d, output %d; a ReLU network's outputs are finite", v, i, j)
			}
		}
	}
	return Y, nil
}
