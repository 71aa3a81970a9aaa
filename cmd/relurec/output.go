package main

import (
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
	"github.com/relurec/relurec/nn"
)

// output.go: the shared code that reads inputs, writes outputs (atomically,
// with manifests) and prints results, used by every command.

// emit prints the result: obj as one JSON object with --json, else the human
// form written by human.
func (a *app) emit(obj any, human func(w io.Writer)) error {
	if a.jsonOut {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(jsonsafe.Finite(obj))
	}
	human(a.stdout)
	return nil
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

// checkOutPath fails early, before any long computation, when out cannot be
// written: its directory is missing, or it names a directory.
func checkOutPath(flag, out string) error {
	if out == "" {
		return usageErrorf("--%s is required", flag)
	}
	if st, err := os.Stat(out); err == nil && st.IsDir() {
		return usageErrorf("--%s %s is a directory; give a file path", flag, out)
	}
	dir := filepath.Dir(out)
	st, err := os.Stat(dir)
	if err != nil {
		return inputErrorf("--%s %s: directory %s does not exist", flag, out, dir)
	}
	if !st.IsDir() {
		return inputErrorf("--%s %s: %s is not a directory", flag, out, dir)
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

// writeAll writes every output and one manifest next to each, all or
// nothing: on any failure what was written is removed.
func writeAll(man *dataio.Manifest, outs []outFile) ([]string, error) {
	var written []string
	ok := false
	defer func() {
		if !ok {
			for _, p := range written {
				os.Remove(p)
			}
		}
	}()
	for _, o := range outs {
		if err := o.write(o.path); err != nil {
			return nil, err
		}
		written = append(written, o.path)
	}
	for _, o := range outs {
		if err := man.AddOutput(o.path); err != nil {
			return nil, err
		}
	}
	man.Finish()
	files := append([]string(nil), written...)
	for _, p := range files {
		mp := dataio.ManifestPath(p)
		if err := man.Write(mp); err != nil {
			return nil, err
		}
		written = append(written, mp)
	}
	ok = true
	return files, nil
}

// writeModel writes one model file (safetensors, dtype "f32" or "f64") and
// its manifest, all or nothing, and records the write time as
// timings["write"] (pass the map the manifest carries, so it shows there).
func writeModel(man *dataio.Manifest, path string, net *nn.MLP, meta map[string]string, dtype string, timings map[string]float64) error {
	_, err := writeAll(man, []outFile{{path: path, write: func(p string) error {
		t := time.Now()
		if err := nn.SaveModel(p, net, meta, strings.ToUpper(dtype)); err != nil {
			return fmt.Errorf("writing the model: %w", err)
		}
		timings["write"] = time.Since(t).Seconds()
		return nil
	}}})
	return err
}

// checkOutputs validates output paths: writable, distinct, not an input,
// with the expected extension.
func checkOutputs(inputs []string, outs ...[3]string) error {
	var seen []string
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
		for _, s := range seen {
			if dataio.CheckOutputNotInput(path, s) != nil {
				return usageErrorf("two outputs are the same file: %s", path)
			}
		}
		seen = append(seen, path)
		if err := dataio.CheckOutputNotInput(path, inputs...); err != nil {
			return err
		}
		if err := dataio.CheckOutputNotInput(dataio.ManifestPath(path), inputs...); err != nil {
			return err
		}
	}
	return nil
}

// readInput reads a finite matrix from an .npy/.npz/.csv with a name for
// .npz members.
func readInput(label, path, name string) (*mat.Dense, error) {
	m, err := dataio.ReadMatrix(path, name)
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
	return usageErrorf("%s", strings.TrimPrefix(err.Error(), errs.ErrInput.Error()+": "))
}

// warningRows is the warnings part of a learner's table: "none", or one row
// per warning.
func warningRows(warnings []string) [][2]string {
	if len(warnings) == 0 {
		return [][2]string{{"warnings", "none"}}
	}
	return labelled("warnings", warnings)
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
