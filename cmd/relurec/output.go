package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/certify"
	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/jsonsafe"
	"github.com/relurec/relurec/internal/safefile"
	"github.com/relurec/relurec/modelfile"
	"github.com/relurec/relurec/nn"
)

// output.go: the shared code that reads inputs, writes outputs (atomically,
// with manifests) and prints results, used by every command.

// emit prints the result: obj as one JSON object with --json, else the human
// form written by human. A failed write (a full disk, a closed pipe) is an
// error, and the command's outputs are then not committed: a run that
// reports failure has changed no file.
func (a *app) emit(obj any, human func(w io.Writer)) error {
	var err error
	if a.jsonOut {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(jsonsafe.Finite(obj))
	} else {
		w := &checkedWriter{w: a.stdout}
		human(w)
		err = w.err
	}
	if err != nil {
		return fmt.Errorf("printing the result: %w; no output file was changed", err)
	}
	return nil
}

// checkedWriter passes writes on to w until one fails, then keeps the error
// and drops the rest, so that the human form, printed with unchecked
// Fprintf calls, is checked once at the end.
type checkedWriter struct {
	w   io.Writer
	err error
}

func (c *checkedWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.err = err
	return n, err
}

// notef prints a note on stderr unless --quiet or --json.
func (a *app) notef(format string, args ...any) {
	if a.quiet || a.jsonOut {
		return
	}
	fmt.Fprintf(a.stderr, format, args...)
}

// stderrIsTerminal reports whether stderr is an interactive terminal.
func (a *app) stderrIsTerminal() bool {
	f, ok := a.stderr.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progress returns a callback for Options.Progress that drives a progress bar
// on stderr, one bar per stage, and a function that clears it. Both are
// no-ops (the callback is nil) unless stderr is a terminal and neither
// --quiet nor --json is set.
func (a *app) progress() (func(stage string, done, total int), func()) {
	if a.quiet || a.jsonOut || !a.stderrIsTerminal() {
		return nil, func() {}
	}
	var (
		mu    sync.Mutex
		bar   *progressbar.ProgressBar
		stage string
		max   int
	)
	finish := func() {
		if bar != nil {
			_ = bar.Clear()
			bar = nil
		}
	}
	update := func(s string, done, total int) {
		mu.Lock()
		defer mu.Unlock()
		if total <= 0 {
			total = -1 // unknown: a spinner
		}
		if bar == nil || s != stage || total != max {
			finish()
			stage, max = s, total
			bar = progressbar.NewOptions(total,
				progressbar.OptionSetWriter(a.stderr),
				progressbar.OptionSetDescription(s),
				progressbar.OptionSetWidth(30),
				progressbar.OptionShowCount(),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionClearOnFinish(),
				progressbar.OptionSpinnerType(14),
			)
		}
		_ = bar.Set(done)
	}
	return update, func() {
		mu.Lock()
		defer mu.Unlock()
		finish()
	}
}

// table writes aligned "key  value" rows.
func table(w io.Writer, rows [][2]string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
	}
	tw.Flush()
}

// checkOutPath fails early, before any long computation, when out or its
// manifest could not be written at the end: the flag is empty, the path
// names a directory, a device or another non-regular file, its directory is
// missing or not writable, or the name is too long for the file system.
func checkOutPath(flag, out string) error {
	if out == "" {
		return usageErrorf("--%s is required", flag)
	}
	for _, p := range []string{out, dataio.ManifestPath(out)} {
		if err := safefile.CheckWritable(p); err != nil {
			return fmt.Errorf("--%s: %w", flag, err)
		}
	}
	return nil
}

// seconds formats a duration for tables.
func seconds(d time.Duration) string {
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// outFile is one output of a command: its path and how to write it.
type outFile struct {
	path  string
	write func(path string) error
}

// staged is a command's outputs between writeAll and the end of the command:
// one transaction (internal/safefile) for all of them, and what to undo if
// they are not committed.
type staged struct {
	tx   *safefile.Tx
	undo []func()
	// outputs are the outputs' paths (without their manifests), recorded
	// as committed once they are (committed).
	outputs []string
}

// commit renames the staged outputs into place, all or nothing (nothing
// when ctx is cancelled). leaf calls it once the command has returned
// without error, so after its report was printed: a run whose report
// could not be written has changed no file.
func (s *staged) commit(ctx context.Context) error {
	if s.tx == nil {
		return nil
	}
	committed.Lock()
	defer committed.Unlock()
	if err := s.tx.Commit(ctx); err != nil {
		return s.tx.NameTargets(err)
	}
	committed.paths = append(committed.paths, s.outputs...)
	s.tx, s.undo, s.outputs = nil, nil, nil
	return nil
}

// committed lists the outputs this process has renamed into place, so that
// an interrupt is reported truthfully: an output written is not "left as it
// was". The lock is held over each commit and its record, and taken for good
// by the interrupt handler (holdCommitted), so the handler's report is final.
var committed struct {
	sync.Mutex
	paths []string
}

// committedCount is how many outputs this process has committed so far.
func committedCount() int {
	committed.Lock()
	defer committed.Unlock()
	return len(committed.paths)
}

// committedSince returns the outputs committed after the first n.
func committedSince(n int) []string {
	committed.Lock()
	defer committed.Unlock()
	return append([]string(nil), committed.paths[n:]...)
}

// holdCommitted waits for a commit in progress, returns every output this
// process has committed and keeps the lock, so that none is committed
// afterwards. Call it only right before the process exits.
func holdCommitted() []string {
	committed.Lock()
	return committed.paths
}

// interruptedNote is the message of an interrupted command that committed
// the outputs written (none, usually).
func interruptedNote(written []string) string {
	if len(written) == 0 {
		return "relurec: interrupted; outputs left as they were"
	}
	return fmt.Sprintf("relurec: interrupted after writing %s (complete, with manifests); any other output left as it was", strings.Join(written, ", "))
}

// keptOutputs marks a command's error after which the outputs it staged
// are committed all the same: an answer whose certificate is not met,
// written because --approximate asked for it (exit status 3).
type keptOutputs struct{ error }

func (k keptOutputs) Unwrap() error { return k.error }

// discard removes the staged outputs that were not committed (nothing
// after commit), then undoes what was made for them, such as a new output
// directory.
func (s *staged) discard() {
	if s.tx != nil {
		s.tx.Abort()
	}
	for i := len(s.undo) - 1; i >= 0; i-- {
		s.undo[i]()
	}
	s.tx, s.undo, s.outputs = nil, nil, nil
}

// writeAll writes every output and one manifest next to each to temporary
// files of the command's transaction: each file goes to a temporary file
// first and the manifests record the outputs' hashes. The files are
// renamed into place together only when the command has succeeded and
// printed its report (staged.commit); on any failure, or when the command's
// context is cancelled (Ctrl-C), every path is left as it was and no
// temporary file remains. Messages name the outputs' paths, not the
// temporary files'.
func (a *app) writeAll(man *dataio.Manifest, outs []outFile) (files []string, err error) {
	if a.staged.tx == nil {
		a.staged.tx = new(safefile.Tx)
	}
	tx := a.staged.tx
	defer func() { err = tx.NameTargets(err) }()
	for _, o := range outs {
		tmp, err := tx.Create(o.path)
		if err != nil {
			return nil, err
		}
		if err := o.write(tmp); err != nil {
			return nil, err
		}
		d, err := dataio.DigestFile(tmp)
		if err != nil {
			return nil, err
		}
		d.Path = o.path
		man.Outputs = append(man.Outputs, d)
		files = append(files, o.path)
	}
	a.staged.outputs = append(a.staged.outputs, files...)
	man.Finish()
	for _, p := range files {
		tmp, err := tx.Create(dataio.ManifestPath(p))
		if err != nil {
			return nil, err
		}
		if err := man.Write(tmp); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// writeModel writes one model file (dtype "f32" or "f64") and its manifest
// (writeAll: committed together once the report is printed), and records the write time as timings["write"] (pass the
// map the manifest carries, so it shows there). The format follows the
// extension of path, which checkModelOut has checked: .safetensors or .onnx.
func (a *app) writeModel(man *dataio.Manifest, path string, net *nn.MLP, meta map[string]string, dtype string, timings map[string]float64) error {
	_, err := a.writeAll(man, []outFile{{path: path, write: func(p string) error {
		t := time.Now()
		// p is a temporary file; the format is that of the final path.
		if err := saveNetwork(path, p, net, meta, strings.ToUpper(dtype)); err != nil {
			return fmt.Errorf("writing the model: %w", err)
		}
		timings["write"] = time.Since(t).Seconds()
		return nil
	}}})
	return err
}

// Model file formats, chosen by extension (case-insensitive) for --out,
// --model and --truth.
const (
	extSafetensors = ".safetensors"
	extONNX        = ".onnx"
	// modelFormatsHelp says which model files --out accepts.
	modelFormatsHelp = ".safetensors (PyTorch: load_relurec of examples/load_compressed.py, or safetensors.torch.load_file) or .onnx"
)

// torchLoadExample is the --help example for loading a model in
// PyTorch with Debian's packages (python3-torch, python3-numpy).
const torchLoadExample = `  # Load in PyTorch (Debian's python3-torch; no safetensors package needed),
  # into nn.Sequential with load_state_dict(strict=True):
  #   import sys; sys.path.insert(0, "examples")   # relurec's checkout
  #   from load_compressed import load_relurec
  #   net = load_relurec("model.safetensors")`

// checkModelExt refuses a model output path whose extension is neither
// .safetensors nor .onnx, naming the flag.
func checkModelExt(flag, path string) error {
	switch ext := strings.ToLower(filepath.Ext(path)); ext {
	case extSafetensors, extONNX:
		return nil
	case "":
		return usageErrorf("--%s %s: no file extension; use %s", flag, path, modelFormatsHelp)
	default:
		return usageErrorf("--%s %s: unsupported model format %q; use %s", flag, path, filepath.Ext(path), modelFormatsHelp)
	}
}

// saveNetwork writes net to file in the format that path's extension names
// (path is the final name, file where to write it now, e.g. a temporary
// file): ONNX for .onnx, safetensors for .safetensors. dtype is "F64" or
// "F32".
func saveNetwork(path, file string, net *nn.MLP, meta map[string]string, dtype string) error {
	switch strings.ToLower(filepath.Ext(path)) {
	case extONNX:
		return modelfile.SaveONNX(file, net, meta, dtype)
	case extSafetensors:
		return modelfile.SaveModel(file, net, meta, dtype)
	}
	return checkModelExt("out", path)
}

// loadNetwork reads an MLP from a model file by extension: ONNX for .onnx
// (no metadata: nil), safetensors otherwise. A convolutional network is
// refused with a pointer to the command that takes one.
func loadNetwork(path string) (*nn.MLP, map[string]string, error) {
	var m *nn.MLP
	var meta map[string]string
	var err error
	if strings.EqualFold(filepath.Ext(path), extONNX) {
		m, err = modelfile.LoadONNX(path)
	} else {
		m, meta, err = modelfile.LoadModel(path)
	}
	if errors.Is(err, modelfile.ErrNotMLP) {
		return nil, nil, fmt.Errorf("%w\n(this command works on MLPs; relurec eval scores a CNN: relurec eval --model %s --data fashion-mnist)", err, path)
	}
	return m, meta, err
}

// loadAnyNetwork reads an MLP or a CNN from a model file by extension (see
// loadNetwork), for the commands that only run the network.
func loadAnyNetwork(path string) (nn.Network, map[string]string, error) {
	if strings.EqualFold(filepath.Ext(path), extONNX) {
		n, err := modelfile.LoadONNXNetwork(path)
		return n, nil, err
	}
	return modelfile.LoadNetwork(path)
}

// checkOutputs validates output paths before any work, given as
// {flag, path, extension} ("" accepts any extension, an empty path is
// skipped): each path and its manifest writable (checkOutPath), no two of
// them — manifests included — the same file, and none of them an input.
func checkOutputs(inputs []string, outs ...[3]string) error {
	type named struct{ flag, path string }
	var all []named
	for _, o := range outs {
		flag, path, ext := o[0], o[1], o[2]
		if path == "" {
			continue
		}
		if ext != "" && !strings.EqualFold(filepath.Ext(path), ext) {
			return usageErrorf("--%s %s: expected a %s file", flag, path, ext)
		}
		if err := checkOutPath(flag, path); err != nil {
			return err
		}
		all = append(all, named{flag, path}, named{flag + " (its manifest)", dataio.ManifestPath(path)})
	}
	for i, o := range all {
		for _, prev := range all[:i] {
			if dataio.CheckOutputNotInput(o.path, prev.path) != nil {
				return usageErrorf("--%s %s and --%s %s are the same file; give each output its own path", prev.flag, prev.path, o.flag, o.path)
			}
		}
		if err := dataio.CheckOutputNotInput(o.path, inputs...); err != nil {
			return err
		}
	}
	return nil
}

// readInput reads a finite matrix from an .npy/.npz/.csv with a name for
// .npz members, stopping when ctx is cancelled.
func readInput(ctx context.Context, label, path, name string) (*mat.Dense, error) {
	return readInputRows(ctx, label, path, name, 0)
}

// readInputRows is readInput keeping only the first maxRows rows (0: all),
// without reading the rest of the file.
func readInputRows(ctx context.Context, label, path, name string, maxRows int) (*mat.Dense, error) {
	m, err := dataio.ReadMatrixContext(ctx, path, dataio.ReadOptions{Name: name, MaxRows: maxRows})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", label, err)
	}
	if err := dataio.CheckFinite(label, m); err != nil {
		return nil, err
	}
	return m, nil
}

// rowMatrix returns x as a 1×len(x) matrix (a copy).
func rowMatrix(x []float64) *mat.Dense { return mat.NewDense(1, len(x), append([]float64(nil), x...)) }

// dims returns the shape of m, for results.
func dims(m *mat.Dense) [2]int {
	r, c := m.Dims()
	return [2]int{r, c}
}

// manifestList names the manifests written next to files, for tables.
func manifestList(files []string) string {
	var ms []string
	for _, f := range files {
		ms = append(ms, dataio.ManifestPath(f))
	}
	return strings.Join(ms, ", ")
}

// optionsUsageError turns the error of a library Options.Validate (which
// wraps errs.ErrInput and names the option) into a usage error: exit 2 and
// the hint to --help; the option's name becomes its flag when printed.
func optionsUsageError(err error) error {
	if !errors.Is(err, errs.ErrInput) {
		return err
	}
	return &badInputError{msg: strings.TrimPrefix(err.Error(), errs.ErrInput.Error()+": "), usage: true, err: err}
}

// warningRows is the warnings part of a learner's table: "none", or one row
// per warning, and how many notes the JSON output holds.
func warningRows(warnings, notes []string) [][2]string {
	rows := [][2]string{{"warnings", "none"}}
	if len(warnings) > 0 {
		rows = labelled("warnings", warnings)
	}
	if len(notes) > 0 {
		rows = append(rows, [2]string{"notes", fmt.Sprintf("%d on the way to the certified answer (--json lists them)", len(notes))})
	}
	return rows
}

// certificateText is a certificate as a learner's table shows it.
func certificateText(c certify.Certificate) string {
	if c.Met {
		return fmt.Sprintf("%.3g ≤ %.0e: exact", c.Residual, c.Tol)
	}
	return fmt.Sprintf("%.3g (tol %.0e, not met)", c.Residual, c.Tol)
}

// labelled returns one table row per line, the label on the first only.
func labelled(label string, lines []string) [][2]string {
	rows := make([][2]string, len(lines))
	for i, l := range lines {
		rows[i] = [2]string{"", l}
	}
	if len(rows) > 0 {
		rows[0][0] = label
	}
	return rows
}
