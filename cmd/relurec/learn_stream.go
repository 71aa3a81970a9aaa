package main

import (
	"context"
	"fmt"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/learner"
	"github.com/relurec/relurec/outofcore"
	"github.com/relurec/relurec/twolayer"
)

// streamed is learn's data when X and Y are .npy files larger than the
// memory budget: the learner fits a random sample of their rows and the
// answer is certified on all of them (package outofcore), two passes over
// the files with one block of rows in memory.
type streamed struct {
	pair       outofcore.Pair
	x, y       *dataio.NPYRows
	rows       int // all rows
	sampleRows int
	certify    time.Duration
}

// streamReport is the JSON record of a streamed run.
type streamReport struct {
	Rows       int   `json:"rows"`
	SampleRows int   `json:"sample_rows"`
	Passes     int   `json:"passes"`
	PeakMemory int64 `json:"peak_memory_bytes"`
}

// openStreamed opens the data flags' X and Y for reading by rows when both
// are .npy files whose float64 values together exceed the memory budget
// (--max-memory); nil when they are read into memory as usual.
func openStreamed(df *dataFlags) (*streamed, error) {
	if df.data != "" || !dataio.IsNPYFile(df.x) || !dataio.IsNPYFile(df.y) {
		return nil, nil
	}
	x, err := dataio.OpenNPYRows(df.x)
	if err != nil {
		return nil, fmt.Errorf("reading X: %w", err)
	}
	y, err := dataio.OpenNPYRows(df.y)
	if err != nil {
		x.Close()
		return nil, fmt.Errorf("reading Y: %w", err)
	}
	n, d := x.Dims()
	_, m := y.Dims()
	if float64(n)*float64(d+m)*8 <= float64(dataio.MemoryBudget()) {
		x.Close()
		y.Close()
		return nil, nil
	}
	s := &streamed{pair: outofcore.Pair{X: x, Y: y}, x: x, y: y}
	if s.rows, err = s.pair.Rows(); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *streamed) close() {
	s.x.Close()
	s.y.Close()
}

// sample draws the rows the learner fits (outofcore.SampleSize: ten times
// the exact route's floor for k = hidden, or m when it is inferred) from
// seed, in one pass that also checks every value.
func (s *streamed) sample(ctx context.Context, hidden int, seed uint64, progress func(stage string, done, total int)) (X, Y *mat.Dense, err error) {
	_, d := s.x.Dims()
	_, m := s.y.Dims()
	k := hidden
	if k <= 0 {
		k = m
	}
	size, err := outofcore.SampleSize(s.rows, twolayer.ExactFloor(d, k), 8*(d+m), dataio.MemoryBudget())
	if err != nil {
		return nil, nil, err
	}
	s.sampleRows = size
	return s.pair.Sample(ctx, outofcore.SampleIndex(s.rows, size, seed), stageProgress(progress, "reading a sample of the rows"))
}

// recertify replaces the certificate of res, measured on the sample, by the
// residual on all rows; it is met when both are.
func (s *streamed) recertify(ctx context.Context, res *learner.Result, progress func(stage string, done, total int)) error {
	began := time.Now()
	model := res.Model()
	resid, rows, err := s.pair.Residual(ctx, model.Forward, stageProgress(progress, "certificate on all rows"))
	if err != nil {
		return err
	}
	onSample := res.Certificate()
	all := certify.New(resid, onSample.Tol, rows)
	all.Met = all.Met && onSample.Met
	res.SetCertificate(all)
	s.certify = time.Since(began)
	return nil
}

// report is the JSON record of the streamed run.
func (s *streamed) report() *streamReport {
	if s == nil {
		return nil
	}
	return &streamReport{Rows: s.rows, SampleRows: s.sampleRows, Passes: 2, PeakMemory: peakMemory()}
}

// tableRow is the human table's line for a streamed run.
func (r *streamReport) tableRow() [][2]string {
	if r == nil {
		return nil
	}
	return [][2]string{{"streamed", fmt.Sprintf("larger than --max-memory: fitted on a random sample of %d of %d rows, certified on all of them (%d passes over the files; peak memory %s)",
		r.SampleRows, r.Rows, r.Passes, dataio.FormatBytes(float64(r.PeakMemory)))}}
}

// stageProgress is progress for one named stage (nil stays nil).
func stageProgress(progress func(stage string, done, total int), stage string) func(done, total int) {
	if progress == nil {
		return nil
	}
	return func(done, total int) { progress(stage, done, total) }
}
