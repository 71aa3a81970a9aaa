package dataio

import (
	"archive/zip"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// zipOf builds an .npz archive by hand with the given compression method.
func zipOf(t testing.TB, method uint16, members map[string][]byte, order []string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, name := range order {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		w.Write(members[name])
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestNPZRoundTrip(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "d.npz")
	X := mat.NewDense(3, 2, []float64{1, 2, 3, 4, 5, 6.5})
	Y := mat.NewDense(3, 1, []float64{-1, 0, 1})
	if err := WriteNPZ(p, map[string]*mat.Dense{"Y": Y, "X": X}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"X", "X.npy"} {
		got, err := ReadMatrix(p, name)
		if err != nil {
			t.Fatal(err)
		}
		if !mat.Equal(got, X) {
			t.Fatalf("%s: got %v", name, mat.Formatted(got))
		}
	}
	got, err := ReadMatrix(p, "Y")
	if err != nil || !mat.Equal(got, Y) {
		t.Fatalf("Y: %v %v", err, got)
	}
	names, err := NPZNames(p)
	if err != nil || strings.Join(names, ",") != "X,Y" {
		t.Fatalf("names %v %v", names, err)
	}

	// Members in sorted order, stored, named NAME.npy, like numpy.savez.
	b, _ := os.ReadFile(p)
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if len(zr.File) != 2 || zr.File[0].Name != "X.npy" || zr.File[1].Name != "Y.npy" || zr.File[0].Method != zip.Store {
		t.Fatalf("members %v", zr.File)
	}
	// Same arrays, same bytes: manifests' hashes identify content.
	p2 := filepath.Join(dir, "d2.npz")
	WriteNPZ(p2, map[string]*mat.Dense{"X": X, "Y": Y})
	b2, _ := os.ReadFile(p2)
	if !bytes.Equal(b, b2) {
		t.Error("WriteNPZ is not deterministic")
	}

	if err := WriteNPZ(filepath.Join(dir, "e.npz"), nil); !errors.Is(err, ErrEmpty) {
		t.Errorf("no arrays: %v", err)
	}
	if err := WriteNPZ(filepath.Join(dir, "e.npz"), map[string]*mat.Dense{"a/b": X}); err == nil {
		t.Error("name with a slash accepted")
	}
}

func TestNPZCompressedAndNames(t *testing.T) {
	xb := makeNPY(t, 1, ">f4", true, []int{2, 2}, []float64{1, 2, 3, 4})
	yb := makeNPY(t, 1, "<i8", false, []int{2}, []float64{5, 6})
	multi := zipOf(t, zip.Deflate, map[string][]byte{"X.npy": xb, "labels.npy": yb}, []string{"labels.npy", "X.npy"})
	m, err := decodeNPZBytes(multi, "X")
	if err != nil {
		t.Fatal(err)
	}
	denseEqual(t, m, 2, 2, []float64{1, 2, 3, 4})
	m, err = decodeNPZBytes(multi, "labels")
	if err != nil {
		t.Fatal(err)
	}
	denseEqual(t, m, 2, 1, []float64{5, 6})

	_, err = decodeNPZBytes(multi, "Y")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `["X", "labels"]`) {
		t.Fatalf("missing name: %v", err)
	}
	_, err = decodeNPZBytes(multi, "")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "2 arrays") {
		t.Fatalf("empty name, two arrays: %v", err)
	}
	single := zipOf(t, zip.Store, map[string][]byte{"arr_0.npy": xb}, []string{"arr_0.npy"})
	if _, err := decodeNPZBytes(single, ""); err != nil {
		t.Fatalf("single array with empty name: %v", err)
	}
}

func TestNPZCorrupt(t *testing.T) {
	xb := makeNPY(t, 1, "<f8", false, []int{2, 2}, []float64{1, 2, 3, 4})
	for _, method := range []uint16{zip.Store, zip.Deflate} {
		good := zipOf(t, method, map[string][]byte{"X.npy": xb}, []string{"X.npy"})
		for n := 0; n < len(good); n++ {
			_, err := decodeNPZBytes(good[:n], "X")
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("method %d, prefix %d: got %v, want ErrFormat", method, n, err)
			}
		}
		// Flip bytes in the member data: either a zip checksum/inflate error
		// or a bad .npy, never a panic or a silent success with bad shape.
		for i := 0; i < len(good); i += 7 {
			c := append([]byte(nil), good...)
			c[i] ^= 0x55
			if m, err := decodeNPZBytes(c, "X"); err == nil {
				if r, cc := m.Dims(); r != 2 || cc != 2 {
					t.Fatalf("corrupted byte %d: accepted shape %d×%d", i, r, cc)
				}
			}
		}
	}
	// A member that is not an .npy file.
	junk := zipOf(t, zip.Store, map[string][]byte{"X.npy": []byte("hello")}, []string{"X.npy"})
	if _, err := decodeNPZBytes(junk, "X"); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), `"X.npy"`) {
		t.Fatalf("junk member: %v", err)
	}
}

// FuzzReadNPZ checks that no archive makes the .npz reader panic, that its
// errors wrap the package's sentinels, and that whatever it accepts is a
// non-empty matrix. The seeds are archives as numpy.savez (stored) and
// numpy.savez_compressed (deflated) write them, with one and two members,
// and one whose member is truncated.
func FuzzReadNPZ(f *testing.F) {
	x := makeNPY(f, 1, "<f8", false, []int{2, 3}, []float64{1, 2, 3, 4, 5, 6})
	y := makeNPY(f, 1, ">f4", true, []int{2, 2}, []float64{1, 2, 3, 4})
	one := map[string][]byte{"X.npy": x}
	two := map[string][]byte{"X.npy": x, "Y.npy": y}
	f.Add(zipOf(f, zip.Store, one, []string{"X.npy"}), "")
	f.Add(zipOf(f, zip.Deflate, two, []string{"X.npy", "Y.npy"}), "Y")
	f.Add(zipOf(f, zip.Deflate, two, []string{"X.npy", "Y.npy"}), "")
	f.Add(zipOf(f, zip.Store, map[string][]byte{"X.npy": x[:len(x)-5]}, []string{"X.npy"}), "X")
	f.Add([]byte("PK\x05\x06"), "X")
	f.Fuzz(func(t *testing.T, b []byte, name string) {
		m, err := decodeNPZBytes(b, name)
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrEmpty) && !errors.Is(err, ErrNotFound) {
				t.Fatalf("error not wrapping ErrFormat/ErrEmpty/ErrNotFound: %v", err)
			}
			return
		}
		if r, c := m.Dims(); r <= 0 || c <= 0 {
			t.Fatalf("accepted a %d×%d matrix", r, c)
		}
	})
}
