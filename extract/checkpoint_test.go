package extract

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/nn"
)

// checkpointCase is a small extraction: one hidden layer in float64 and in
// float32, and two hidden layers.
type checkpointCase struct {
	name   string
	net    *nn.MLP
	oracle Oracle
	opt    Options
}

func checkpointCases(t *testing.T) []checkpointCase {
	one := teacher(t, 10, 6, 3, 4)
	deep := deepTeacher(t, []int{10, 6, 4, 3}, 1)
	return []checkpointCase{
		{"10-6-3", one, FromMLP(one), Options{Seed: 2}},
		{"10-6-3 float32", one, float32Oracle(one), Options{Seed: 2, Hidden: 6}},
		{"10-6-4-3", deep, FromMLP(deep), Options{Seed: 1, Widths: []int{6, 4}}},
	}
}

// logged wraps an oracle, recording the hash of every batch it is sent and
// cancelling cancel (an interrupt) once it has answered stopAfter batches
// (0: never).
type logged struct {
	f         Oracle
	hashes    [][sha256.Size]byte
	stopAfter int
	cancel    func()
}

func (l *logged) oracle(ctx context.Context, X *mat.Dense) (*mat.Dense, error) {
	if l.stopAfter > 0 && len(l.hashes) == l.stopAfter {
		l.cancel()
		return nil, ctx.Err()
	}
	l.hashes = append(l.hashes, batchHash(X))
	return l.f(ctx, X)
}

// run extracts c with checkpoint file path (none when empty), returning
// the result and the batches the oracle saw.
func (c checkpointCase) run(t *testing.T, path string, stopAfter int) (*Result, *logged, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := &logged{f: c.oracle, stopAfter: stopAfter, cancel: cancel}
	opt := c.opt
	if path != "" {
		cp, err := OpenCheckpoint(path, c.net.In(), opt, "teacher "+c.name)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := cp.Close(); err != nil {
				t.Error(err)
			}
		}()
		opt.Checkpoint = cp
	}
	res, err := Extract(ctx, l.oracle, c.net.In(), opt)
	return res, l, err
}

// sameNetwork fails unless a and b are bit for bit the same network.
func sameNetwork(t *testing.T, what string, a, b *nn.MLP) {
	t.Helper()
	if a == nil || b == nil || len(a.Layers) != len(b.Layers) {
		t.Fatalf("%s: networks %v and %v", what, a, b)
	}
	for k := range a.Layers {
		if !mat.Equal(a.Layers[k].Weight, b.Layers[k].Weight) || !mat.Equal(mat.NewVecDense(len(a.Layers[k].Bias), a.Layers[k].Bias), mat.NewVecDense(len(b.Layers[k].Bias), b.Layers[k].Bias)) {
			t.Fatalf("%s: layer %d differs", what, k)
		}
	}
}

// An extraction sends the same batches in the same order every time, so
// a checkpoint replays a finished run without calling the oracle, and an
// interrupted run resumes from it: in every case the network is bit for
// bit the uninterrupted run's, with the same query totals, and the oracle
// is called only for the batches the log lacks. A record torn by a kill is
// dropped and its batch asked again.
func TestCheckpointReplaysAndResumes(t *testing.T) {
	for _, c := range checkpointCases(t) {
		t.Run(c.name, func(t *testing.T) {
			ref, refLog, err := c.run(t, "", 0)
			if err != nil || !ref.Certificate.Met {
				t.Fatalf("reference run: %v, %+v", err, ref)
			}
			again, againLog, err := c.run(t, "", 0)
			if err != nil {
				t.Fatal(err)
			}
			sameNetwork(t, "second run", ref.Network, again.Network)
			if len(againLog.hashes) != len(refLog.hashes) {
				t.Fatalf("second run sent %d batches, the first %d", len(againLog.hashes), len(refLog.hashes))
			}
			for i := range refLog.hashes {
				if refLog.hashes[i] != againLog.hashes[i] {
					t.Fatalf("batch %d of %d differs between two runs: the extraction is not deterministic", i, len(refLog.hashes))
				}
			}
			calls := len(refLog.hashes)
			same := func(what string, res *Result, l *logged, wantCalls int) {
				t.Helper()
				sameNetwork(t, what, ref.Network, res.Network)
				if res.Queries != ref.Queries || res.Calls != ref.Calls || res.Diagnostics.QueriesCert != ref.Diagnostics.QueriesCert {
					t.Errorf("%s: %d queries in %d calls, the reference %d in %d", what, res.Queries, res.Calls, ref.Queries, ref.Calls)
				}
				if len(l.hashes) != wantCalls {
					t.Errorf("%s: %d oracle calls, want %d", what, len(l.hashes), wantCalls)
				}
			}

			dir := t.TempDir()
			path := filepath.Join(dir, "run.ckpt")
			first, l, err := c.run(t, path, 0)
			if err != nil {
				t.Fatal(err)
			}
			same("logging run", first, l, calls)
			if first.Diagnostics.Replayed != 0 {
				t.Errorf("a fresh checkpoint replayed %d queries", first.Diagnostics.Replayed)
			}
			replay, l, err := c.run(t, path, 0)
			if err != nil {
				t.Fatal(err)
			}
			same("replay", replay, l, 0)
			if replay.Diagnostics.Replayed != replay.Queries {
				t.Errorf("replay: %d of %d queries replayed", replay.Diagnostics.Replayed, replay.Queries)
			}

			// Interrupted after half the batches, then resumed.
			cut := filepath.Join(dir, "cut.ckpt")
			if _, _, err := c.run(t, cut, calls/2); !errors.Is(err, context.Canceled) {
				t.Fatalf("interrupted run: %v", err)
			}
			resumed, l, err := c.run(t, cut, 0)
			if err != nil {
				t.Fatal(err)
			}
			same("resumed", resumed, l, calls-calls/2)
			t.Logf("%d queries in %d batches; resumed after %d batches: %d queries replayed, %d oracle calls", ref.Queries, calls, calls/2, resumed.Diagnostics.Replayed, len(l.hashes))
			if resumed.Diagnostics.Replayed == 0 || resumed.Diagnostics.Replayed >= resumed.Queries {
				t.Errorf("resumed: %d of %d queries replayed", resumed.Diagnostics.Replayed, resumed.Queries)
			}

			// The finished log torn in its last record (the certificate's
			// batch): that record is dropped and asked again.
			torn := filepath.Join(dir, "torn.ckpt")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(torn, b[:len(b)-5], 0o644); err != nil {
				t.Fatal(err)
			}
			cp, err := OpenCheckpoint(torn, c.net.In(), c.opt, "teacher "+c.name)
			if err != nil {
				t.Fatal(err)
			}
			if cp.Dropped() == 0 {
				t.Errorf("a torn record was not dropped")
			}
			cp.Close()
			healed, l, err := c.run(t, torn, 0)
			if err != nil {
				t.Fatal(err)
			}
			same("torn", healed, l, 1)
			if b2, _ := os.ReadFile(torn); !bytes.Equal(b, b2) {
				t.Errorf("the torn log, completed, is not the whole log")
			}
		})
	}
}

// A checkpoint written for another extraction — other inputs, options
// that change the queries, another model, or a file that is no checkpoint
// — is refused with an error wrapping errs.ErrInput that names the
// difference, and the file is left as it was. Options that do not change
// the queries (MaxQueries, Exact) and defaults given explicitly match.
func TestCheckpointRefusesAnotherExtraction(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.ckpt")
	opt := Options{Seed: 3, Hidden: 4}
	cp, err := OpenCheckpoint(path, 8, opt, "model A")
	if err != nil {
		t.Fatal(err)
	}
	net := teacher(t, 8, 4, 2, 1)
	opt.Checkpoint = cp
	if _, err := Extract(context.Background(), FromMLP(net), 8, opt); err != nil {
		t.Fatal(err)
	}
	cp.Close()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	notCkpt := filepath.Join(dir, "notes.txt")
	os.WriteFile(notCkpt, []byte("some other file\n"), 0o644)
	for _, c := range []struct {
		path, model, want string
		d                 int
		opt               Options
	}{
		{path, "model A", "d = 8 inputs (this run: 9)", 9, Options{Seed: 3, Hidden: 4}},
		{path, "model A", `Options.Seed = 3 (this run: 4)`, 8, Options{Seed: 4, Hidden: 4}},
		{path, "model A", `Options.Widths = none (this run: 4,2)`, 8, Options{Seed: 3, Widths: []int{4, 2}}},
		{path, "model B", `the model "model A" (this run: "model B")`, 8, Options{Seed: 3, Hidden: 4}},
		{notCkpt, "model A", "not a relurec extract checkpoint", 8, Options{Seed: 3, Hidden: 4}},
	} {
		_, err := OpenCheckpoint(c.path, c.d, c.opt, c.model)
		if !errors.Is(err, errs.ErrInput) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: %v, want an input error naming %q", c.model, c.opt, err, c.want)
		}
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Errorf("a refused checkpoint was modified")
	}
	if after, _ := os.ReadFile(notCkpt); string(after) != "some other file\n" {
		t.Errorf("a file that is no checkpoint was modified")
	}
	cp, err = OpenCheckpoint(path, 8, Options{Seed: 3, Widths: []int{4}, Reach: 40, MaxQueries: 1 << 20, Exact: true}, "model A")
	if err != nil {
		t.Fatalf("the same queries with another budget: %v", err)
	}
	// Extract refuses options other than those the checkpoint was opened
	// for.
	if _, err := Extract(context.Background(), FromMLP(net), 8, Options{Seed: 5, Checkpoint: cp}); !errors.Is(err, errs.ErrInput) || !strings.Contains(err.Error(), "Options.Seed = 3 (this run: 5)") {
		t.Errorf("Extract with other options: %v", err)
	}
	cp.Close()
}

// A batch sent twice in a run is logged twice, and a rerun takes the
// first answer for its first occurrence and the second for its second,
// so that even an oracle that answers the same batch differently is
// replayed as it answered.
func TestCheckpointReplaysRepeatedBatchesInOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.ckpt")
	calls := 0
	oracle := func(_ context.Context, X *mat.Dense) (*mat.Dense, error) {
		calls++
		r, _ := X.Dims()
		Y := mat.NewDense(r, 2, nil)
		Y.Set(0, 0, float64(calls))
		return Y, nil
	}
	X := mat.NewDense(3, 4, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	ask := func(n int) []float64 {
		cp, err := OpenCheckpoint(path, 4, Options{}, "m")
		if err != nil {
			t.Fatal(err)
		}
		defer cp.Close()
		f := cp.wrap(oracle)
		var got []float64
		for i := 0; i < n; i++ {
			Y, err := f(context.Background(), X)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, Y.At(0, 0))
		}
		return got
	}
	if got := ask(2); got[0] != 1 || got[1] != 2 || calls != 2 {
		t.Fatalf("first run: answers %v after %d calls", got, calls)
	}
	if got := ask(3); got[0] != 1 || got[1] != 2 || got[2] != 3 || calls != 3 {
		t.Errorf("rerun: answers %v after %d calls, want 1, 2 from the log and 3 from the oracle", got, calls)
	}
}
