package experiment

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Experiment is one registered, reproducible measurement. Run computes the
// report; Write (or RunAndWrite) turns it into results.json, table.md and
// plot.png.
type Experiment struct {
	// Name is the identifier used on the command line
	// (relurec experiment run NAME): lower case, hyphenated.
	Name string
	// Description says in one or two sentences which claim the experiment
	// checks and at what defaults.
	Description string
	// Run performs the measurement. It must honour ctx, report progress
	// through cfg.Progress when it is non-nil, and derive every random choice
	// from cfg.Seed so that the same Config reproduces the same numbers.
	Run func(ctx context.Context, cfg Config) (*Report, error)
}

// Config is what every experiment accepts. The zero value works: it runs the
// experiment's full default grid with its default number of seeds, starting
// at seed 0, and writes nothing until Write is called.
type Config struct {
	// OutDir is the directory Write puts results.json, table.md and plot.png
	// in. It is created if missing. Required by Write, unused by Run.
	OutDir string
	// Seeds is the number of independent repetitions (seeds Seed,
	// Seed+1, …). 0 means the experiment's default (5 for twolayer-samples,
	// 2 with Quick).
	Seeds int
	// Seed is the first seed. Repetition i uses Seed+i.
	Seed uint64
	// Quick selects a short grid meant to finish in well under a minute.
	Quick bool
	// Version is the relurec version recorded in results.json ("devel" if
	// empty).
	Version string
	// Progress, if non-nil, is called as runs complete (stage, runs done,
	// runs total).
	Progress func(stage string, done, total int)
}

// seeds returns the number of seeds to use given the experiment's defaults.
func (c Config) seeds(full, quick int) int {
	switch {
	case c.Seeds > 0:
		return c.Seeds
	case c.Quick:
		return quick
	default:
		return full
	}
}

func (c Config) progress(stage string, done, total int) {
	if c.Progress != nil {
		c.Progress(stage, done, total)
	}
}

// Report is what an experiment measured, in a form Write can render: a table,
// plot series, notes, and the raw results.
type Report struct {
	// Title heads the table and the plot.
	Title string `json:"title"`
	// Columns and Rows are the Markdown table (cells already formatted).
	Columns []string   `json:"columns"`
	Rows    [][]string `json:"rows"`
	// Plot describes the axes of plot.png; Series are its lines.
	Plot   PlotSpec `json:"plot"`
	Series []Series `json:"series"`
	// Tables are further tables printed after the main one (other metrics
	// of the same runs).
	Tables []Table `json:"tables,omitempty"`
	// Figures are further plots of the same runs, each written to its own
	// PNG file next to plot.png.
	Figures []Figure `json:"figures,omitempty"`
	// Notes are sentences printed under the tables (fitted slopes, caveats).
	Notes []string `json:"notes,omitempty"`
	// Results is the raw, typed data (every run), stored in results.json.
	Results any `json:"results,omitempty"`
}

// Table is a further table of a report, with its own heading.
type Table struct {
	Title   string     `json:"title"`
	Columns []string   `json:"columns"`
	Rows    [][]string `json:"rows"`
}

// Figure is a further plot of a report: File (a base name ending in .png,
// not plot.png) in the output directory, drawn like plot.png.
type Figure struct {
	File   string   `json:"file"`
	Title  string   `json:"title"`
	Plot   PlotSpec `json:"plot"`
	Series []Series `json:"series"`
}

// PlotSpec labels the axes of the report's plot.
type PlotSpec struct {
	XLabel string `json:"x_label"`
	YLabel string `json:"y_label"`
	LogX   bool   `json:"log_x"`
	LogY   bool   `json:"log_y"`
}

// Series is one line of the plot: a central value per x (usually the median
// over seeds) and an optional band (usually min and max over seeds), drawn
// as error bars. Lo and Hi are absolute values, not offsets; nil means no
// band. Dashed series are drawn without markers (reference lines).
type Series struct {
	Name   string    `json:"name"`
	X      []float64 `json:"x"`
	Y      []float64 `json:"y"`
	Lo     []float64 `json:"lo,omitempty"`
	Hi     []float64 `json:"hi,omitempty"`
	Dashed bool      `json:"dashed,omitempty"`
}

var (
	regMu    sync.Mutex
	registry = map[string]Experiment{}
)

// Register adds e to the registry. It panics if the name is empty, already
// taken, or Run is nil: registration happens in init functions, where such
// a mistake is a programming error.
func Register(e Experiment) {
	regMu.Lock()
	defer regMu.Unlock()
	if e.Name == "" || e.Run == nil {
		panic("experiment: Register needs a Name and a Run function")
	}
	if _, dup := registry[e.Name]; dup {
		panic(fmt.Sprintf("experiment: %q registered twice", e.Name))
	}
	registry[e.Name] = e
}

// List returns the registered experiments sorted by name.
func List() []Experiment {
	regMu.Lock()
	defer regMu.Unlock()
	out := make([]Experiment, 0, len(registry))
	for _, e := range registry {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Get returns the experiment registered under name.
func Get(name string) (Experiment, bool) {
	regMu.Lock()
	defer regMu.Unlock()
	e, ok := registry[name]
	return e, ok
}

// Names returns the registered names, sorted, joined by ", " (for error
// messages).
func Names() string {
	var names []string
	for _, e := range List() {
		names = append(names, e.Name)
	}
	return strings.Join(names, ", ")
}

// CommandLine returns the relurec command that reproduces an experiment with
// cfg (OutDir, Progress and Version are not part of it).
func CommandLine(name string, cfg Config) string {
	var b strings.Builder
	b.WriteString("relurec experiment run ")
	b.WriteString(name)
	if cfg.Quick {
		b.WriteString(" --quick")
	}
	if cfg.Seeds > 0 {
		fmt.Fprintf(&b, " --seeds %d", cfg.Seeds)
	}
	fmt.Fprintf(&b, " --seed %d", cfg.Seed)
	return b.String()
}

// RunAndWrite runs the named experiment and writes its files into
// cfg.OutDir. It returns the report and the paths written.
func RunAndWrite(ctx context.Context, name string, cfg Config) (*Report, []string, error) {
	e, ok := Get(name)
	if !ok {
		return nil, nil, fmt.Errorf("%w: %q (known: %s)", ErrUnknown, name, Names())
	}
	if cfg.OutDir == "" {
		return nil, nil, fmt.Errorf("experiment: no output directory given")
	}
	rep, err := e.Run(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("experiment %s: %w", name, err)
	}
	paths, err := Write(e, cfg, rep)
	if err != nil {
		return rep, nil, err
	}
	return rep, paths, nil
}
