package twolayer

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/relurec/relurec/synth"
)

// Below the moment starts' floor, a network the first starts do not
// certify ends with ErrNotExact naming what was found and the floor that
// would let the moment starts look for the rest — not with a bad-input
// error about a start the data never asked for. Noise makes every start
// fail here; k = m makes the exact route run.
func TestBelowTensorFloorNotExact(t *testing.T) {
	cfg := synth.TwoLayerConfig{D: 20, K: 20, M: 20}
	in := newInstance(t, 5, cfg, 4000, nil, synth.Noise{})
	// A second layer with a leaky slope: not a ReLU network's data.
	Y := in.Y
	raw := in.X.RawMatrix()
	for q := 0; q < raw.Rows; q++ {
		Y.Set(q, 0, Y.At(q, 0)+0.3*in.X.At(q, 0))
	}
	_, err := Fit(context.Background(), in.X, Y, Options{Hidden: 20})
	if !errors.Is(err, ErrNotExact) || !strings.Contains(err.Error(), "moment starts") {
		t.Fatalf("err = %v; want ErrNotExact naming the moment starts' floor", err)
	}
}
