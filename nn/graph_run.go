package nn

import (
	"fmt"
	"slices"
	"sort"

	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/internal/parallel"
)

// GraphRun is a run of a graph over many samples paused before one of its
// nodes: for each chunk of samples, the values that node and the later
// ones still need (the others are dropped). A sequential compression
// resumes it on the graph with one more layer rewritten (Advance), so over
// the whole compression each node runs once per sample, not once for every
// later layer, and the chunks run in parallel.
type GraphRun struct {
	n, at  int                // samples; the node the run is paused before
	bounds []int              // chunk c holds samples bounds[c] to bounds[c+1]-1
	chunks []map[string]value // each chunk's live values by name
}

// Start returns a run of g over the samples x (n × In()), paused before
// node 0. An error wraps dataio.ErrTooLarge when all the values of n
// samples (a bound on what the paused run keeps) exceed the memory budget.
func (g *Graph) Start(x *mat.Dense) (*GraphRun, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	n, d := x.Dims()
	if d != g.In() {
		return nil, fmt.Errorf("nn: graph inputs have %d columns, the graph takes %d: %w", d, g.In(), ErrInput)
	}
	// What a paused run keeps is at most every value of every sample.
	if err := dataio.CheckMemory(float64(n)*g.sampleBytes, fmt.Sprintf("nn: the values of a run of the graph over %d samples", n), "use fewer samples"); err != nil {
		return nil, err
	}
	r := &GraphRun{n: n}
	step := g.batchRows()
	for r0 := 0; r0 < n; r0 += step {
		r1 := min(r0+step, n)
		r.bounds = append(r.bounds, r0)
		r.chunks = append(r.chunks, map[string]value{g.Input: g.batch(x.Slice(r0, r1, 0, d).(*mat.Dense))})
	}
	r.bounds = append(r.bounds, n)
	return r, nil
}

// Advance continues the run on h, a graph whose nodes before the pause
// point are those the run has gone through (a graph rewritten from there
// on, e.g. with the layer at the pause point replaced), up to node to of h,
// pauses before it, and returns the rows of node to's first input that pick
// chooses, as InputRows does for one node (pick(total) is called once; a
// nil pick keeps all rows).
func (r *GraphRun) Advance(h *Graph, to int, pick func(total int) []int) (*mat.Dense, error) {
	if err := h.Validate(); err != nil {
		return nil, err
	}
	if to < r.at || to >= len(h.Nodes) {
		return nil, fmt.Errorf("nn: GraphRun.Advance: node %d is not between the pause point %d and the graph's last node %d: %w", to, r.at, len(h.Nodes)-1, ErrInput)
	}
	ax := h.SampleAxis(to)
	if ax < 0 {
		return nil, fmt.Errorf("nn: graph node %d: its first input does not hold the samples on an axis of their own before the last, so its rows are not one sample's: %w", to, ErrInput)
	}
	ins := make([]value, len(r.chunks))
	errs := make([]error, len(r.chunks))
	live := h.liveFrom(to)
	runChunk := func(c int) {
		env := r.chunks[c]
		_, err := h.runFrom(env, r.at, func(i int, _ *GraphNode, in []value) error {
			if i < to {
				return nil
			}
			ins[c] = in[0]
			return errStopRun
		})
		if err != errStopRun {
			if err == nil {
				err = fmt.Errorf("nn: graph node %d was not reached: %w", to, ErrInput)
			}
			errs[c] = err
			return
		}
		ins[c], errs[c] = samplesFirst(ins[c], ax)
		for name := range env {
			if !live[name] {
				delete(env, name)
			}
		}
	}
	// The first chunk alone: its shape gives the rows per sample, and so
	// the total that pick chooses from.
	runChunk(0)
	if errs[0] != nil {
		return nil, errs[0]
	}
	a := ins[0]
	k := a.shape[len(a.shape)-1]
	per := numel(a.shape) / k / (r.bounds[1] - r.bounds[0])
	var rows []int
	if pick != nil {
		rows = pick(r.n * per)
	}
	m := r.n * per
	if rows != nil {
		m = len(rows)
	}
	out := mat.NewDense(max(m, 1), k, nil)
	parallel.For(len(r.chunks)-1, func(_, c int) { runChunk(c + 1) })
	for c := range r.chunks {
		if errs[c] != nil {
			return nil, errs[c]
		}
		copyRows(out, ins[c], k, r.bounds[c]*per, r.bounds[c+1]*per, rows)
	}
	r.at = to
	return out, nil
}

// liveFrom returns the names of the values nodes from index i on read,
// and the output's.
func (g *Graph) liveFrom(i int) map[string]bool {
	live := map[string]bool{g.Output: true}
	for _, n := range g.Nodes[i:] {
		for _, in := range n.Inputs {
			live[in] = true
		}
	}
	return live
}

// samplesFirst returns a, a node's input whose samples are on axis ax,
// with them moved to axis 0: every axis but the last flattened, its rows
// are then one sample's after another's.
func samplesFirst(a value, ax int) (value, error) {
	if ax == 0 {
		return a, nil
	}
	return transpose(a, append([]int{ax}, slices.Delete(seq(len(a.shape)), ax, ax+1)...))
}

// copyRows copies into out the rows of a (k values each) that are rows
// lo..hi-1 of all the samples' rows: all of them at the same positions when
// rows is nil, else those listed in rows (ascending) at their positions in
// rows.
func copyRows(out *mat.Dense, a value, k, lo, hi int, rows []int) {
	if rows == nil {
		copy(out.RawMatrix().Data[lo*k:hi*k], a.data)
		return
	}
	first, last := sort.SearchInts(rows, lo), sort.SearchInts(rows, hi)
	for p := first; p < last; p++ {
		copy(out.RawRowView(p), a.data[(rows[p]-lo)*k:][:k])
	}
}
