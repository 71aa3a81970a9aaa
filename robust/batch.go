package robust

import (
	"context"
	"fmt"
	"math"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/internal/parallel"
)

// BatchResult is RecoverAll's answer for n observations.
type BatchResult struct {
	// C is n×k: row i is ĉ for observation i (estimates μ·c*_i).
	C *mat.Dense
	// E is n×d: row i is ê for observation i.
	E *mat.Dense
	// PerRow holds each observation's Result without its C and E slices.
	PerRow []*Result
	// AllCertified reports that every row's KKT certificate is met.
	AllCertified bool
	// MaxStationarity is the worst row's KKT stationarity.
	MaxStationarity float64
	Elapsed         time.Duration
}

// RecoverAll solves (47) for every row of V (n×d, one observation per row,
// as in the CLI's files) with the same A and options, in parallel over rows;
// AᵀA is computed once. Each row gets its own threshold when τ comes from a
// rule. OracleZW is not accepted here (it is per observation). progress, if
// non-nil, is called with (rows done, n) from one goroutine at a time.
func RecoverAll(ctx context.Context, A, V *mat.Dense, opt Options, progress func(done, total int)) (*BatchResult, error) {
	began := time.Now()
	if opt.Rule == RuleOracle && opt.Tau == 0 && opt.Lambda == 0 {
		return nil, fmt.Errorf("%w: the oracle threshold is per observation; use Recover", ErrInput)
	}
	s, err := NewSolver(A, opt)
	if err != nil {
		return nil, err
	}
	if V == nil || V.IsEmpty() {
		return nil, fmt.Errorf("%w: V is nil or empty", ErrInput)
	}
	n, d := V.Dims()
	if d != s.d {
		return nil, fmt.Errorf("%w: V has %d columns but A has %d rows: V must hold one observation (length d = %d) per row", ErrInput, d, s.d, s.d)
	}
	if err := checkFiniteMat("V", V); err != nil {
		return nil, err
	}
	out := &BatchResult{C: mat.NewDense(n, s.k, nil), E: mat.NewDense(n, d, nil), PerRow: make([]*Result, n), AllCertified: true}
	errs := make([]error, n)
	const chunk = 16
	nc := (n + chunk - 1) / chunk
	done := make(chan int, nc)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		count := 0
		for c := range done {
			count += c
			if progress != nil {
				progress(count, n)
			}
		}
	}()
	parallel.For(nc, func(_, ci int) {
		for i := ci * chunk; i < min(n, (ci+1)*chunk); i++ {
			if ctx.Err() != nil {
				errs[i] = ctx.Err()
				continue
			}
			r, err := s.Solve(V.RawRowView(i))
			if err != nil {
				errs[i] = fmt.Errorf("row %d: %w", i, err)
				continue
			}
			out.C.SetRow(i, r.C)
			out.E.SetRow(i, r.E)
			r.C, r.E = nil, nil
			out.PerRow[i] = r
		}
		done <- min(n, (ci+1)*chunk) - ci*chunk
	})
	close(done)
	<-finished
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, e := range errs {
		if e != nil {
			return nil, e
		}
	}
	for _, r := range out.PerRow {
		out.AllCertified = out.AllCertified && r.Certificate.Met
		out.MaxStationarity = math.Max(out.MaxStationarity, r.Certificate.Stationarity)
	}
	out.Elapsed = time.Since(began)
	return out, nil
}

// MeanCodeErrors scores recovered codes C (n×k, one per row) against the
// true codes (n×k): the mean over rows of ‖ĉ − scale·c*‖ (scale = μ when C
// estimates μ·c*, 1 when it estimates c*) and of the direction error
// ‖ĉ/‖ĉ‖ − c*/‖c*‖‖.
func MeanCodeErrors(C, truth *mat.Dense, scale float64) (meanErr, meanDir float64) {
	n := C.RawMatrix().Rows
	for i := 0; i < n; i++ {
		ch, cs := C.RawRowView(i), truth.RawRowView(i)
		var e, dn, cn, chn float64
		for j := range ch {
			e += (ch[j] - scale*cs[j]) * (ch[j] - scale*cs[j])
			cn += cs[j] * cs[j]
			chn += ch[j] * ch[j]
		}
		for j := range ch {
			x := ch[j]/math.Sqrt(chn) - cs[j]/math.Sqrt(cn)
			dn += x * x
		}
		meanErr += math.Sqrt(e) / float64(n)
		meanDir += math.Sqrt(dn) / float64(n)
	}
	return meanErr, meanDir
}
