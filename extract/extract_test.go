package extract

import (
	"context"
	"errors"
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/metrics"
	"github.com/relurec/relurec/nn"
	"github.com/relurec/relurec/synth"
)

func teacher(t *testing.T, d, m, p int, seed uint64) *nn.MLP {
	t.Helper()
	net, err := synth.Depth2Teacher(synth.Depth2Config{D: d, M: m, Outputs: p, OutputBias: true}, synth.NewRand(seed))
	if err != nil {
		t.Fatal(err)
	}
	return net
}

// check extracts the teacher and asserts exact parameters, a met
// certificate and a query count below 200·m·d.
func check(t *testing.T, net *nn.MLP, opt Options) *Result {
	t.Helper()
	d, m := net.In(), net.Layers[0].Out()
	res, err := Extract(context.Background(), FromMLP(net), d, opt)
	if err != nil {
		t.Fatal(err)
	}
	cmp, err := metrics.CompareDepth2(net, res.Model.MLP(), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("d=%d m=%d p=%d: units %d, lines %d, kinks %d, queries %d (search %d, Jacobians %d, certificate %d), residual %.1e, max parameter error %.1e",
		d, m, net.Out(), res.Units, res.Lines, res.Kinks, res.Queries, res.Diagnostics.QueriesSearch, res.Diagnostics.QueriesJacobian, res.Diagnostics.QueriesCert, res.Certificate.Residual, cmp.MaxErr)
	if res.Units != m || cmp.Missing != 0 || cmp.Extra != 0 {
		t.Errorf("found %d units (missing %d, extra %d), want %d; warnings %v", res.Units, cmp.Missing, cmp.Extra, m, res.Warnings)
	}
	if cmp.MaxErr > 1e-9 {
		t.Errorf("max parameter error %.2e > 1e-9 (%+v)", cmp.MaxErr, cmp)
	}
	if !res.Certificate.Met || res.Certificate.Residual > 1e-10 {
		t.Errorf("certificate %+v not met", res.Certificate)
	}
	if res.Queries <= 0 || res.Queries > 200*m*d {
		t.Errorf("%d queries, want (0, %d]", res.Queries, 200*m*d)
	}
	dg := res.Diagnostics
	if got := dg.QueriesSearch + dg.QueriesJacobian + dg.QueriesCert; got != res.Queries {
		t.Errorf("query breakdown %d + %d + %d ≠ %d", dg.QueriesSearch, dg.QueriesJacobian, dg.QueriesCert, res.Queries)
	}
	return res
}

func TestExtractRandomNetworks(t *testing.T) {
	cases := []struct {
		d, m, p int
	}{
		{20, 5, 3},
		{50, 20, 1},
		{12, 12, 2}, // m = d
		{30, 8, 10},
	}
	for _, c := range cases {
		for seed := uint64(1); seed <= 3; seed++ {
			check(t, teacher(t, c.d, c.m, c.p, seed), Options{Seed: seed})
		}
	}
}

func TestExtractHidden(t *testing.T) {
	net := teacher(t, 40, 10, 2, 11)
	res := check(t, net, Options{Seed: 5, Hidden: 10})
	if len(res.Warnings) != 0 {
		t.Errorf("warnings %v", res.Warnings)
	}
}

// A bias-free network and one whose units are all far from the origin
// (every |b| large: kinks far out on the lines).
func TestExtractBiases(t *testing.T) {
	rng := synth.NewRand(3)
	for _, bmax := range []float64{0, 3} {
		net, err := synth.Depth2Teacher(synth.Depth2Config{D: 15, M: 6, Outputs: 2, Biases: []float64{bmax, -bmax, bmax / 2, -bmax / 2, bmax, -bmax}}, rng)
		if err != nil {
			t.Fatal(err)
		}
		check(t, net, Options{Seed: 2})
	}
}

// The same seed gives the same answer.
func TestExtractDeterministic(t *testing.T) {
	net := teacher(t, 16, 6, 3, 9)
	a, err := Extract(context.Background(), FromMLP(net), 16, Options{Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Extract(context.Background(), FromMLP(net), 16, Options{Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	if a.Queries != b.Queries || !mat.Equal(a.Model.W, b.Model.W) || !mat.Equal(a.Model.A, b.Model.A) {
		t.Errorf("two runs with seed 4 differ: %d vs %d queries", a.Queries, b.Queries)
	}
}

func TestExtractBadInput(t *testing.T) {
	ctx := context.Background()
	net := teacher(t, 8, 3, 2, 1)
	good := FromMLP(net)
	cases := map[string]struct {
		o   Oracle
		d   int
		opt Options
	}{
		"d<1":          {good, 0, Options{}},
		"nil oracle":   {nil, 8, Options{}},
		"wrong d":      {good, 9, Options{}},
		"negative opt": {good, 8, Options{CertTol: -1}},
		"NaN opt":      {good, 8, Options{Reach: math.NaN()}},
		"tiny budget":  {good, 8, Options{MaxQueries: 10}},
		"wrong rows": {func(ctx context.Context, X *mat.Dense) (*mat.Dense, error) {
			n, _ := X.Dims()
			return mat.NewDense(n+1, 2, nil), nil
		}, 8, Options{}},
		"NaN output": {func(ctx context.Context, X *mat.Dense) (*mat.Dense, error) {
			Y := net.Forward(X)
			Y.Set(0, 1, math.NaN())
			return Y, nil
		}, 8, Options{}},
		"changing outputs": func() struct {
			o   Oracle
			d   int
			opt Options
		} {
			calls := 0
			return struct {
				o   Oracle
				d   int
				opt Options
			}{func(ctx context.Context, X *mat.Dense) (*mat.Dense, error) {
				calls++
				n, _ := X.Dims()
				return mat.NewDense(n, 1+calls%2, nil), nil
			}, 8, Options{}}
		}(),
	}
	for name, c := range cases {
		_, err := Extract(ctx, c.o, c.d, c.opt)
		if !errors.Is(err, errs.ErrInput) {
			t.Errorf("%s: error %v, want ErrInput", name, err)
		}
	}
}

// An oracle error is passed on, and is not ErrInput.
func TestExtractOracleError(t *testing.T) {
	boom := errors.New("boom")
	_, err := Extract(context.Background(), func(context.Context, *mat.Dense) (*mat.Dense, error) { return nil, boom }, 5, Options{})
	if !errors.Is(err, boom) || errors.Is(err, errs.ErrInput) {
		t.Errorf("error %v, want boom", err)
	}
}

func TestExtractCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Extract(ctx, FromMLP(teacher(t, 8, 3, 2, 1)), 8, Options{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
}

// A budget that stops the search mid-way still returns the units found,
// certified against the oracle, with a warning; Exact turns the failed
// certificate into ErrNotExact.
func TestExtractBudget(t *testing.T) {
	net := teacher(t, 30, 12, 1, 2)
	opt := Options{Seed: 1, MaxQueries: 256 + 8*32}
	res, err := Extract(context.Background(), FromMLP(net), 30, opt)
	if err != nil {
		t.Fatal(err)
	}
	if res.Queries > opt.MaxQueries || res.Certificate.Met || len(res.Warnings) == 0 {
		t.Errorf("queries %d (cap %d), certificate %+v, warnings %v", res.Queries, opt.MaxQueries, res.Certificate, res.Warnings)
	}
	opt.Exact = true
	res, err = Extract(context.Background(), FromMLP(net), 30, opt)
	if !errors.Is(err, errs.ErrNotExact) || res == nil {
		t.Errorf("Exact: error %v, result %v; want ErrNotExact and the result", err, res != nil)
	}
}

// A network that is constant (every unit dead) has nothing to find.
func TestExtractNoUnits(t *testing.T) {
	net, err := synth.Depth2Teacher(synth.Depth2Config{D: 6, M: 2, Outputs: 1, Biases: []float64{-1e6, -1e6}}, synth.NewRand(1))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Extract(context.Background(), FromMLP(net), 6, Options{MaxLines: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.Units != 0 || len(res.Warnings) == 0 {
		t.Errorf("units %d, warnings %v", res.Units, res.Warnings)
	}
}

// A non-finite query never reaches the oracle: it is an internal error,
// not ErrInput (the oracle's fault).
func TestCountedRefusesNonFiniteQuery(t *testing.T) {
	called := false
	o := &counted{f: func(context.Context, *mat.Dense) (*mat.Dense, error) { called = true; return nil, nil }, d: 2}
	X := mat.NewDense(2, 2, []float64{0, 1, math.NaN(), 2})
	_, err := o.query(context.Background(), X)
	if err == nil || errors.Is(err, errs.ErrInput) || called {
		t.Errorf("error %v, oracle called %v; want an internal error before the call", err, called)
	}
}
