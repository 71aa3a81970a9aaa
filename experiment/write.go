package experiment

import (
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/jsonsafe"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/relurec/relurec/dataio"
)

// ErrUnknown marks an experiment name that is not registered.
var ErrUnknown = errs.New("unknown experiment", errs.ErrInput)

// File names Write produces inside Config.OutDir.
const (
	ResultsFile = "results.json"
	TableFile   = "table.md"
	PlotFile    = "plot.png"
)

// Environment records where and with what an experiment ran.
type Environment struct {
	GoVersion  string `json:"go_version"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Date       string `json:"date"`
	Version    string `json:"relurec_version"`
}

// Results is the content of results.json.
type Results struct {
	Experiment  string      `json:"experiment"`
	Description string      `json:"description"`
	Command     string      `json:"command"`
	Config      ConfigJSON  `json:"config"`
	Environment Environment `json:"environment"`
	Report      *Report     `json:"report"`
}

// ConfigJSON is the serialisable part of Config.
type ConfigJSON struct {
	Seeds int    `json:"seeds"`
	Seed  uint64 `json:"seed"`
	Quick bool   `json:"quick"`
}

// CurrentEnvironment describes this process; version is the relurec version
// ("devel" if empty).
func CurrentEnvironment(version string) Environment {
	if version == "" {
		version = "devel"
	}
	return Environment{
		GoVersion:  runtime.Version(),
		OS:         runtime.GOOS,
		Arch:       runtime.GOARCH,
		CPUs:       runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		Date:       time.Now().UTC().Format(time.RFC3339),
		Version:    version,
	}
}

// Write puts results.json, table.md and plot.png for rep into cfg.OutDir,
// creating the directory if needed. Each file is written atomically. It
// returns the paths written.
func Write(e Experiment, cfg Config, rep *Report) ([]string, error) {
	if cfg.OutDir == "" {
		return nil, fmt.Errorf("experiment: no output directory given")
	}
	if rep == nil {
		return nil, fmt.Errorf("experiment %s: no report to write", e.Name)
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("experiment: create output directory: %w", err)
	}
	env := CurrentEnvironment(cfg.Version)
	cmd := CommandLine(e.Name, cfg)
	res := Results{
		Experiment:  e.Name,
		Description: e.Description,
		Command:     cmd,
		Config:      ConfigJSON{Seeds: cfg.Seeds, Seed: cfg.Seed, Quick: cfg.Quick},
		Environment: env,
		Report:      rep,
	}
	var written []string
	write := func(name string, fn func(io.Writer) error) error {
		p := filepath.Join(cfg.OutDir, name)
		if err := dataio.AtomicWriteFile(p, fn); err != nil {
			return fmt.Errorf("experiment: write %s: %w", p, err)
		}
		written = append(written, p)
		return nil
	}
	if err := write(ResultsFile, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(jsonsafe.Finite(res))
	}); err != nil {
		return written, err
	}
	if err := write(TableFile, func(w io.Writer) error {
		_, err := io.WriteString(w, Markdown(e, rep, cmd, env))
		return err
	}); err != nil {
		return written, err
	}
	if len(rep.Series) > 0 {
		wt, err := PlotPNG(rep)
		if err != nil {
			return written, fmt.Errorf("experiment: plot: %w", err)
		}
		if err := write(PlotFile, func(w io.Writer) error { _, err := wt.WriteTo(w); return err }); err != nil {
			return written, err
		}
	}
	for _, f := range rep.Figures {
		if f.File != filepath.Base(f.File) || filepath.Ext(f.File) != ".png" || f.File == PlotFile {
			return written, fmt.Errorf("experiment %s: figure file %q: want a base name ending in .png other than %s", e.Name, f.File, PlotFile)
		}
		if len(f.Series) == 0 {
			continue
		}
		wt, err := PlotPNG(&Report{Title: f.Title, Plot: f.Plot, Series: f.Series})
		if err != nil {
			return written, fmt.Errorf("experiment: plot %s: %w", f.File, err)
		}
		if err := write(f.File, func(w io.Writer) error { _, err := wt.WriteTo(w); return err }); err != nil {
			return written, err
		}
	}
	return written, nil
}

// nullable converts xs for JSON: NaN and ±Inf (a failed run, an undefined
// median) become null, which encoding/json cannot otherwise represent.
func nullable(xs []float64) []*float64 {
	if xs == nil {
		return nil
	}
	out := make([]*float64, len(xs))
	for i, v := range xs {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			v := v
			out[i] = &v
		}
	}
	return out
}

// MarshalJSON writes the series with non-finite values as null.
func (s Series) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Name   string     `json:"name"`
		X      []*float64 `json:"x"`
		Y      []*float64 `json:"y"`
		Lo     []*float64 `json:"lo,omitempty"`
		Hi     []*float64 `json:"hi,omitempty"`
		Dashed bool       `json:"dashed,omitempty"`
	}{s.Name, nullable(s.X), nullable(s.Y), nullable(s.Lo), nullable(s.Hi), s.Dashed})
}

// UnmarshalJSON reads what MarshalJSON writes (null becomes NaN).
func (s *Series) UnmarshalJSON(b []byte) error {
	var raw struct {
		Name   string     `json:"name"`
		X      []*float64 `json:"x"`
		Y      []*float64 `json:"y"`
		Lo     []*float64 `json:"lo"`
		Hi     []*float64 `json:"hi"`
		Dashed bool       `json:"dashed"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	conv := func(ps []*float64) []float64 {
		if ps == nil {
			return nil
		}
		out := make([]float64, len(ps))
		for i, p := range ps {
			out[i] = math.NaN()
			if p != nil {
				out[i] = *p
			}
		}
		return out
	}
	*s = Series{Name: raw.Name, X: conv(raw.X), Y: conv(raw.Y), Lo: conv(raw.Lo), Hi: conv(raw.Hi), Dashed: raw.Dashed}
	return nil
}

// Markdown renders the report as a Markdown document: title, description,
// table, notes, and how to reproduce it.
func Markdown(e Experiment, rep *Report, command string, env Environment) string {
	var b strings.Builder
	title := rep.Title
	if title == "" {
		title = e.Name
	}
	fmt.Fprintf(&b, "### %s\n\n", title)
	if e.Description != "" {
		fmt.Fprintf(&b, "%s\n\n", e.Description)
	}
	b.WriteString(MarkdownTable(rep.Columns, rep.Rows))
	for _, t := range rep.Tables {
		fmt.Fprintf(&b, "\n%s\n\n%s", t.Title, MarkdownTable(t.Columns, t.Rows))
	}
	if len(rep.Notes) > 0 {
		b.WriteString("\n")
		for _, n := range rep.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	fmt.Fprintf(&b, "\nReproduce with `%s` (measured %s, relurec %s, %s, %s/%s, %d CPUs).\n",
		command, env.Date, env.Version, env.GoVersion, env.OS, env.Arch, env.CPUs)
	return b.String()
}

// MarkdownTable renders a GitHub-flavoured Markdown table.
func MarkdownTable(cols []string, rows [][]string) string {
	var b strings.Builder
	esc := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	line := func(cells []string) {
		b.WriteString("|")
		for i := range cols {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			b.WriteString(" " + esc(c) + " |")
		}
		b.WriteString("\n")
	}
	line(cols)
	b.WriteString("|")
	for range cols {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, r := range rows {
		line(r)
	}
	return b.String()
}

// logFloor replaces values a log axis cannot show (≤ 0, NaN, Inf).
const logFloor = 1e-17

// PlotPNG draws the report's series: lines with markers, error bars from Lo
// to Hi, labelled axes, and a legend to the right of the axes so it never
// hides data. Non-positive values are clamped to 1e-17 on a log axis and
// missing (NaN, +Inf) points are dropped.
func PlotPNG(rep *Report) (io.WriterTo, error) {
	p := plot.New()
	p.Title.Text = wrapWords(rep.Title, titleWidth)
	p.Title.Padding = vg.Points(10)
	p.X.Label.Text = rep.Plot.XLabel
	// The y label is drawn by hand below: gonum/plot sizes a rotated axis
	// label by its unrotated width and shrinks the plot to make room.
	if rep.Plot.LogX {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = decadeTicks{}
	}
	if rep.Plot.LogY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = decadeTicks{}
	}
	p.Add(plotter.NewGrid())
	legend := plot.NewLegend()
	legend.Top = true
	legend.Left = true
	for i, s := range rep.Series {
		pts, errs, hasBand := seriesPoints(s, rep.Plot)
		if len(pts) == 0 {
			continue
		}
		if err := addSeries(p, &legend, i, s, pts, errs, hasBand); err != nil {
			return nil, err
		}
	}
	const width, height, legendWidth = 9 * vg.Inch, 5 * vg.Inch, 2.6 * vg.Inch
	cw, err := draw.NewFormattedCanvas(width, height, "png")
	if err != nil {
		return nil, err
	}
	dc := draw.New(cw)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	ysty := p.Y.Label.TextStyle
	ysty.Rotation = math.Pi / 2
	ysty.XAlign = draw.XCenter
	ysty.YAlign = draw.YCenter
	labelWidth := ysty.Font.Size * 2
	p.Draw(draw.Crop(dc, labelWidth, -legendWidth, 0, 0))
	dc.FillText(ysty, vg.Point{X: labelWidth / 2, Y: height / 2}, rep.Plot.YLabel)
	legendArea := draw.Crop(dc, width-legendWidth+vg.Points(10), 0, 0, -vg.Points(30))
	legend.Draw(legendArea)
	return cw, nil
}

// plotValue is v as PlotPNG draws it on an axis: ok is false for a
// missing value (NaN, ±Inf), and a non-positive one is clamped to
// logFloor on a log axis.
func plotValue(v float64, logAxis bool) (float64, bool) {
	if math.IsNaN(v) || math.IsInf(v, 1) {
		return 0, false
	}
	if logAxis && v <= 0 {
		return logFloor, true
	}
	return v, !math.IsInf(v, 0)
}

// seriesPoints returns the points of s that the plot can show and, when s
// has a band (Lo and Hi for every point), their error bars.
func seriesPoints(s Series, spec PlotSpec) (pts plotter.XYs, errs plotter.YErrors, hasBand bool) {
	fix := plotValue
	hasBand = len(s.Lo) == len(s.Y) && len(s.Hi) == len(s.Y)
	for j := range s.X {
		x, okx := fix(s.X[j], spec.LogX)
		y, oky := fix(s.Y[j], spec.LogY)
		if !okx || !oky {
			continue
		}
		pts = append(pts, plotter.XY{X: x, Y: y})
		if hasBand {
			lo, okl := fix(s.Lo[j], spec.LogY)
			hi, okh := fix(s.Hi[j], spec.LogY)
			if !okl {
				lo = y
			}
			if !okh {
				hi = y
			}
			errs = append(errs, struct{ Low, High float64 }{math.Max(0, y-lo), math.Max(0, hi-y)})
		}
	}
	return pts, errs, hasBand
}

// addSeries draws series i (its points pts) on p in its colour and marker
// shape, dashed without markers when s.Dashed, with its error bars when it
// has a band, and adds it to the legend.
func addSeries(p *plot.Plot, legend *plot.Legend, i int, s Series, pts plotter.XYs, errs plotter.YErrors, hasBand bool) error {
	c := plotColor(i)
	line, scatter, err := plotter.NewLinePoints(pts)
	if err != nil {
		return err
	}
	line.Color = c
	line.Width = vg.Points(1.5)
	scatter.Color = c
	scatter.Shape = plotShape(i)
	scatter.Radius = vg.Points(3)
	if s.Dashed {
		line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		p.Add(line)
		legend.Add(s.Name, line)
		return nil
	}
	p.Add(line, scatter)
	legend.Add(s.Name, line, scatter)
	if hasBand {
		eb, err := plotter.NewYErrorBars(struct {
			plotter.XYs
			plotter.YErrors
		}{pts, errs})
		if err != nil {
			return err
		}
		eb.LineStyle.Color = c
		eb.LineStyle.Width = vg.Points(1)
		p.Add(eb)
	}
	return nil
}

// decadeTicks labels powers of ten ("1e-14", "100", "1e5"), thinning labels
// over wide ranges, with unlabelled minor ticks at 2–9 × 10^k over narrow
// ones. Only ticks inside [min, max] are returned (a label outside the range
// would make the plot pad the axes for it); a range inside one decade labels
// its minor ticks.
type decadeTicks struct{}

func (decadeTicks) Ticks(min, max float64) []plot.Tick {
	lo := int(math.Floor(math.Log10(min)))
	hi := int(math.Ceil(math.Log10(max)))
	span := hi - lo
	step := 1
	for span/step > 8 {
		step++
	}
	in := func(v float64) bool { return v >= min*(1-1e-9) && v <= max*(1+1e-9) }
	var ticks []plot.Tick
	labelled := 0
	for e := lo; e <= hi; e++ {
		v := math.Pow10(e)
		if in(v) {
			label := ""
			if (e-lo)%step == 0 {
				label = decadeLabel(e)
				labelled++
			}
			ticks = append(ticks, plot.Tick{Value: v, Label: label})
		}
		if span <= 4 {
			for m := 2; m < 10; m++ {
				if w := float64(m) * v; in(w) {
					ticks = append(ticks, plot.Tick{Value: w})
				}
			}
		}
	}
	if labelled < 2 {
		for i := range ticks {
			ticks[i].Label = strconv.FormatFloat(ticks[i].Value, 'g', 2, 64)
		}
	}
	return ticks
}

func decadeLabel(e int) string {
	if e >= 0 && e <= 3 {
		return fmt.Sprintf("%d", int(math.Pow10(e)))
	}
	return fmt.Sprintf("1e%d", e)
}

// titleWidth is the longest title line, in characters, that fits the plot.
const titleWidth = 90

// wrapWords breaks s at spaces into lines of at most width characters
// (a longer word stays whole on its own line).
func wrapWords(s string, width int) string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && utf8.RuneCountInString(line)+1+utf8.RuneCountInString(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return strings.Join(append(lines, line), "\n")
}

func plotColor(i int) color.Color {
	palette := []color.Color{
		color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
		color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
		color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
		color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
		color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
		color.RGBA{R: 0x55, G: 0x55, B: 0x55, A: 0xff},
		color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
		color.RGBA{R: 0xe3, G: 0x77, B: 0xc2, A: 0xff},
		color.RGBA{R: 0xbc, G: 0xbd, B: 0x22, A: 0xff},
		color.RGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff},
	}
	return palette[i%len(palette)]
}

func plotShape(i int) draw.GlyphDrawer {
	shapes := []draw.GlyphDrawer{
		draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{},
		draw.PlusGlyph{}, draw.CrossGlyph{}, draw.RingGlyph{},
		draw.BoxGlyph{}, draw.PyramidGlyph{},
	}
	return shapes[i%len(shapes)]
}
