package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"

	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/errs"
	"github.com/relurec/relurec/internal/parallel"
)

// ErrInput marks a caller's data or option that a routine of this package
// cannot use: a label out of range, inputs of the wrong width, a network
// that does not validate. The CLI maps it to exit status 2.
// It is the shared errs.ErrInput, so errors.Is matches it whichever package
// returned the error.
var ErrInput = errs.ErrInput

// SoftmaxCrossEntropy returns the mean cross-entropy
// −(1/n) Σ_i log softmax(z_i)[y_i] of the n×c logits z against integer
// labels y, and, when grad is non-nil (n×c), writes its gradient with
// respect to the logits, (softmax(z_i) − e_{y_i})/n, into grad. This is
// PyTorch's nn.CrossEntropyLoss with reduction "mean". The softmax is
// computed after subtracting each row's maximum, so large logits neither
// overflow nor lose the gradient. Labels must lie in [0, c); it panics
// otherwise (check with CheckLabels at the edge).
func SoftmaxCrossEntropy(z *mat.Dense, labels []int, grad *mat.Dense) float64 {
	n, c := z.Dims()
	if len(labels) != n {
		panic(fmt.Sprintf("nn: SoftmaxCrossEntropy: %d labels for %d rows", len(labels), n))
	}
	raw := z.RawMatrix()
	var g blas64.General
	if grad != nil {
		g = grad.RawMatrix()
	}
	inv := 1 / float64(n)
	var loss float64
	for i := 0; i < n; i++ {
		row := raw.Data[i*raw.Stride : i*raw.Stride+c]
		mx := math.Inf(-1)
		for _, v := range row {
			mx = math.Max(mx, v)
		}
		var sum float64
		for _, v := range row {
			sum += math.Exp(v - mx)
		}
		lse := mx + math.Log(sum)
		y := labels[i]
		loss += lse - row[y]
		if grad != nil {
			gr := g.Data[i*g.Stride : i*g.Stride+c]
			for j, v := range row {
				gr[j] = math.Exp(v-lse) * inv
			}
			gr[y] -= inv
		}
	}
	return loss * inv
}

// CheckLabels returns an error wrapping ErrInput unless there are exactly n
// labels, each in [0, classes).
func CheckLabels(labels []int, n, classes int) error {
	if len(labels) != n {
		return fmt.Errorf("nn: %d labels for %d samples: %w", len(labels), n, ErrInput)
	}
	for i, l := range labels {
		if l < 0 || l >= classes {
			return fmt.Errorf("nn: label %d is %d; the network has %d outputs, so labels must lie in [0, %d): %w", i, l, classes, classes, ErrInput)
		}
	}
	return nil
}

// Metrics are a classifier's scores on a labelled data set.
type Metrics struct {
	// Accuracy is the fraction of samples whose largest logit (first one on
	// ties) is the label.
	Accuracy float64 `json:"accuracy"`
	// Loss is the mean softmax cross-entropy.
	Loss float64 `json:"loss"`
	// Correct and Samples give Accuracy = Correct/Samples.
	Correct int `json:"correct"`
	Samples int `json:"samples"`
}

// evalChunk is the number of rows scored by one task of Evaluate.
const evalChunk = 1024

// EvaluateRows is how many of n rows Evaluate scores at once (a chunk of
// rows per core), and so how many rows of activations it holds: what a
// caller that budgets the memory of an evaluation counts.
func EvaluateRows(n int) int { return min(max(n, 0), runtime.GOMAXPROCS(0)*evalChunk) }

// Evaluate scores the network as a classifier on x (n×In) with integer labels
// in [0, Out): accuracy and mean cross-entropy of the logits m.Forward(x). It
// runs in fixed chunks of rows on all cores and sums the chunks in order, so
// the result is identical at any GOMAXPROCS, and it never holds more than a
// few chunks of logits. Errors wrap ErrInput.
func (m *MLP) Evaluate(x *mat.Dense, labels []int) (Metrics, error) {
	if err := m.Validate(); err != nil {
		return Metrics{}, fmt.Errorf("%w: %w", err, ErrInput)
	}
	last := len(m.Layers) - 1
	wt := m.transposedWeights(last)
	return evaluateChunks(x, labels, m.In(), m.Out(), func(xs, z *mat.Dense) {
		m.forwardRows(xs, z, last, wt)
	})
}

// evaluateChunks is Evaluate for a network of in inputs and out outputs
// whose forward pass fwd writes the logits of the rows xs into z: it checks
// x and the labels, scores fixed chunks of evalChunk rows on all cores and
// sums them in order.
func evaluateChunks(x *mat.Dense, labels []int, in, out int, fwd func(xs, z *mat.Dense)) (Metrics, error) {
	if x == nil || x.IsEmpty() {
		return Metrics{}, fmt.Errorf("nn: Evaluate: the inputs x are nil or empty; expected n×%d (the network's input width): %w", in, ErrInput)
	}
	n, d := x.Dims()
	if d != in {
		return Metrics{}, fmt.Errorf("nn: inputs have %d columns but the network takes %d: %w", d, in, ErrInput)
	}
	if err := CheckLabels(labels, n, out); err != nil {
		return Metrics{}, err
	}
	chunks := (n + evalChunk - 1) / evalChunk
	losses := make([]float64, chunks)
	correct := make([]int, chunks)
	parallel.For(chunks, func(_, c int) {
		r0, r1 := c*evalChunk, min((c+1)*evalChunk, n)
		z := mat.NewDense(r1-r0, out, nil)
		fwd(x.Slice(r0, r1, 0, d).(*mat.Dense), z)
		losses[c] = SoftmaxCrossEntropy(z, labels[r0:r1], nil) * float64(r1-r0)
		correct[c] = CountCorrect(z, labels[r0:r1])
	})
	var res Metrics
	for c := range losses {
		res.Loss += losses[c]
		res.Correct += correct[c]
	}
	res.Samples = n
	res.Loss /= float64(n)
	res.Accuracy = float64(res.Correct) / float64(n)
	return res, nil
}

// Predict returns the index of the largest logit of each row of m.Forward(x)
// (the first one on ties), like torch.argmax(model(x), dim=1).
func (m *MLP) Predict(x *mat.Dense) []int { return ArgmaxRows(m.Forward(x)) }

// ArgmaxRows returns the index of the largest entry of each row of z (the
// first one on ties): the classes a classifier with logits z predicts.
func ArgmaxRows(z *mat.Dense) []int {
	n, _ := z.Dims()
	out := make([]int, n)
	for i := range out {
		out[i] = argmax(z.RawRowView(i))
	}
	return out
}

func argmax(row []float64) int {
	best := 0
	for j, v := range row {
		if v > row[best] {
			best = j
		}
	}
	return best
}

// CountCorrect counts the rows of the logits z whose largest entry (the
// first one on ties) is at the row's label.
func CountCorrect(z *mat.Dense, labels []int) int {
	k := 0
	for i, l := range labels {
		if argmax(z.RawRowView(i)) == l {
			k++
		}
	}
	return k
}

// MultiplyAdds is the number of multiply-adds of one forward pass per
// sample: Σ in·out over the layers (a factored layer counts both of its
// factors, r·(in + out)).
func (m *MLP) MultiplyAdds() int {
	s := 0
	for _, l := range m.Layers {
		s += l.In() * l.Out()
	}
	return s
}

// NewMLP returns a network of Linear layers with biases mapping sizes[0]
// inputs through hidden widths sizes[1:len−1] to sizes[len−1] outputs, ReLU
// after every layer but the last (whose logits stay linear), initialised as
// PyTorch's nn.Linear does: weights and biases uniform in ±1/√in (Kaiming
// uniform with a = √5). The draws come from a PCG generator seeded with seed,
// layer by layer, weights row-major then biases.
func NewMLP(sizes []int, seed uint64) (*MLP, error) {
	if len(sizes) < 2 {
		return nil, fmt.Errorf("nn: NewMLP needs at least an input and an output size, got %v: %w", sizes, ErrInput)
	}
	for _, s := range sizes {
		if s <= 0 {
			return nil, fmt.Errorf("nn: NewMLP: layer sizes must be positive, got %v: %w", sizes, ErrInput)
		}
	}
	rng := rand.New(rand.NewPCG(seed, 0x6e6e2d696e6974)) // "nn-init"
	m := &MLP{}
	for i := 0; i+1 < len(sizes); i++ {
		in, out := sizes[i], sizes[i+1]
		bound := 1 / math.Sqrt(float64(in))
		w := make([]float64, out*in)
		for k := range w {
			w[k] = bound * (2*rng.Float64() - 1)
		}
		b := make([]float64, out)
		for k := range b {
			b[k] = bound * (2*rng.Float64() - 1)
		}
		act := ReLU
		if i+2 == len(sizes) {
			act = Identity
		}
		m.Layers = append(m.Layers, Layer{Weight: mat.NewDense(out, in, w), Bias: b, Act: act})
	}
	return m, nil
}
