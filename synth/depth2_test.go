package synth

import (
	"errors"
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"
)

func TestDepth2Teacher(t *testing.T) {
	cfg := Depth2Config{D: 4, M: 7, Outputs: 2, MinSeparation: 0.3, OutputBias: true}
	net, err := Depth2Teacher(cfg, NewRand(1))
	if err != nil {
		t.Fatal(err)
	}
	W, b := net.Layers[0].Weight, net.Layers[0].Bias
	A, c := net.Layers[1].Weight, net.Layers[1].Bias
	if r, cc := W.Dims(); r != 7 || cc != 4 {
		t.Fatalf("W is %d×%d", r, cc)
	}
	if r, cc := A.Dims(); r != 2 || cc != 7 || len(c) != 2 || len(b) != 7 {
		t.Fatalf("A is %d×%d, |c| = %d", r, cc, len(c))
	}
	for i := 0; i < 7; i++ {
		if n := mat.Norm(W.RowView(i), 2); math.Abs(n-1) > 1e-12 {
			t.Errorf("row %d norm %v", i, n)
		}
		if math.Abs(b[i]) > 1 {
			t.Errorf("bias %v outside [−1, 1]", b[i])
		}
		for t2 := 0; t2 < 2; t2++ {
			if a := math.Abs(A.At(t2, i)); a < 0.5 || a > 2 {
				t.Errorf("|a| = %v outside [0.5, 2]", a)
			}
		}
		for j := 0; j < i; j++ {
			cs := math.Abs(mat.Dot(W.RowView(i), W.RowView(j)))
			if math.Sqrt(2-2*cs) < 0.3-1e-12 {
				t.Errorf("units %d, %d closer than 0.3 up to sign", i, j)
			}
		}
	}
	again, _ := Depth2Teacher(cfg, NewRand(1))
	if !mat.Equal(again.Layers[0].Weight, W) {
		t.Error("same seed, different teacher")
	}
	for _, bad := range []Depth2Config{{D: 0, M: 2}, {D: 3, M: 2, Biases: []float64{1}}, {D: 3, M: 2, AMin: 2, AMax: 1}, {D: 3, M: 2, MinSeparation: 2}} {
		if _, err := Depth2Teacher(bad, NewRand(1)); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", bad, err)
		}
	}
	X, _ := GaussianInputs(1000, 4, nil, NewRand(2))
	Y, sigma, err := Depth2Data(net, X, Noise{Kind: NoiseGaussian, Level: 0.1}, NewRand(3))
	if err != nil || sigma <= 0 {
		t.Fatalf("Depth2Data: %v, σ = %v", err, sigma)
	}
	clean := net.Forward(X)
	var diff mat.Dense
	diff.Sub(Y, clean)
	if rms := mat.Norm(&diff, 2) / math.Sqrt(2000); math.Abs(rms-sigma) > 0.1*sigma {
		t.Errorf("noise RMS %v, σ %v", rms, sigma)
	}
	if _, _, err := Depth2Data(net, mat.NewDense(3, 5, nil), Noise{}, nil); !errors.Is(err, ErrShape) {
		t.Errorf("wrong width: %v", err)
	}
}
