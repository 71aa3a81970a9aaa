package twolayer

import (
	"context"
	"errors"
	"math"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// noPanic runs f and fails the test if it panics.
func noPanic(t *testing.T, name string, f func() error) error {
	t.Helper()
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("%s panicked: %v", name, r)
			}
		}()
		err = f()
	}()
	return err
}

// Alg8GridK1 and Alg8Select refuse a sketch or candidate of the wrong shape,
// and a negative MaxCandidates, with ErrInput instead of panicking.
func TestReviewAlg8BadSketchNoPanic(t *testing.T) {
	_, X, Y, _, _ := alg8Instance(t, 1, 4, 1, 3, 1, 200)
	// S with the wrong number of columns (2 instead of m = 3).
	S := mat.NewDense(1, 2, []float64{1, 1})
	err := noPanic(t, "Alg8GridK1", func() error {
		_, err := Alg8GridK1(context.Background(), X, Y, S, Alg8GridOptions{})
		return err
	})
	if !errors.Is(err, ErrInput) {
		t.Errorf("wrong-width sketch: err = %v, want ErrInput", err)
	}
	err = noPanic(t, "Alg8GridK1 empty S", func() error {
		_, err := Alg8GridK1(context.Background(), X, Y, &mat.Dense{}, Alg8GridOptions{})
		return err
	})
	if !errors.Is(err, ErrInput) {
		t.Errorf("empty sketch: err = %v, want ErrInput", err)
	}
	err = noPanic(t, "Alg8GridK1 negative MaxCandidates", func() error {
		_, err := Alg8GridK1(context.Background(), X, Y, mat.NewDense(1, 3, []float64{1, 0, 0}), Alg8GridOptions{MaxCandidates: -1})
		return err
	})
	if !errors.Is(err, ErrInput) {
		t.Errorf("MaxCandidates -1: err = %v, want ErrInput", err)
	}
	err = noPanic(t, "Alg8Select empty candidate", func() error {
		_, err := Alg8Select(context.Background(), X, Y, mat.NewDense(1, 3, []float64{1, 0, 0}), []*mat.Dense{{}}, Alg8Options{})
		return err
	})
	if !errors.Is(err, ErrInput) {
		t.Errorf("empty candidate: err = %v, want ErrInput", err)
	}
}

// CheckGaussian and CheckResidual refuse a nil matrix with ErrInput.
func TestReviewDetectNilNoPanic(t *testing.T) {
	err := noPanic(t, "CheckGaussian(nil)", func() error {
		_, err := CheckGaussian(nil, 1)
		return err
	})
	if !errors.Is(err, ErrInput) {
		t.Errorf("CheckGaussian(nil): err = %v, want ErrInput", err)
	}
	err = noPanic(t, "CheckResidual(nil)", func() error {
		_, err := CheckResidual(nil, 1)
		return err
	})
	if !errors.Is(err, ErrInput) {
		t.Errorf("CheckResidual(nil): err = %v, want ErrInput", err)
	}
}

// IterativeLP refuses a NaN in X with ErrInput.
func TestReviewIterativeLPNonFinite(t *testing.T) {
	in := cubeInstance(1, 12, 3, 2, 2)
	B := basis(t, in.Y, 2)
	X := mat.DenseCopyOf(in.X)
	X.Set(0, 0, math.NaN())
	S := PatternOf(mat.Col(nil, 0, in.Y), 1e-9)
	_, _, _, err := IterativeLP(X, B, S, nil, WorstCaseOptions{})
	if !errors.Is(err, ErrInput) {
		t.Errorf("NaN in X: err = %v, want ErrInput", err)
	}
}
