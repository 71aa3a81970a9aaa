package dataio

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/relurec/relurec/internal/memtest"
)

// deflated returns b compressed with raw deflate, as a zip member holds it.
func deflated(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w, err := flate.NewWriter(&out, flate.BestSpeed)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(b)
	w.Close()
	return out.Bytes()
}

// npzClaiming writes an .npz whose one deflated member X.npy holds member
// but whose zip entry declares claimed uncompressed bytes (and the CRC of
// member, so only the size lies).
func npzClaiming(t *testing.T, member []byte, claimed uint64) string {
	t.Helper()
	comp := deflated(t, member)
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	w, err := zw.CreateRaw(&zip.FileHeader{Name: "X.npy", Method: zip.Deflate, CRC32: crc32.ChecksumIEEE(member),
		CompressedSize64: uint64(len(comp)), UncompressedSize64: claimed})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(comp)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "x.npz")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A compressed member whose header and container both declare more than
// its data inflate to — a deflated .npz member whose zip entry matches its
// .npy header, a gzipped IDX whose trailer matches its dimensions — is
// refused after a pass that keeps nothing, before its matrix is allocated
// (the budget alone would let the declared size through).
func TestCompressedSizeLieAllocatesNothing(t *testing.T) {
	SetMemoryBudget(1 << 30)
	defer SetMemoryBudget(0)

	// .npz: the header declares 4Mi × 2 float64 (64 MiB), 16 MiB follow.
	hdr := makeNPY(t, 1, "<f8", false, []int{4 << 20, 2}, nil)
	member := append(hdr, make([]byte, 16<<20)...)
	npz := npzClaiming(t, member, uint64(len(hdr))+64<<20)

	// IDX .gz: 16 Mi uint8 declared (128 MiB as float64), 4 MiB present,
	// the trailer's size faked to match the header.
	gzb := gz(makeIDX(0x08, []uint32{16 << 20}, make([]byte, 4<<20)))
	binary.LittleEndian.PutUint32(gzb[len(gzb)-4:], 8+16<<20)
	idx := filepath.Join(t.TempDir(), "x-ubyte.gz")
	if err := os.WriteFile(idx, gzb, 0o644); err != nil {
		t.Fatal(err)
	}

	for _, path := range []string{npz, idx} {
		var err error
		n := memtest.Allocated(func() { _, err = ReadMatrix(path, "X") })
		if !errors.Is(err, ErrFormat) {
			t.Errorf("%s: got %v, want a format error", filepath.Base(path), err)
		}
		if n > 2<<20 {
			t.Errorf("%s: allocated %s before refusing", filepath.Base(path), FormatBytes(float64(n)))
		}
	}
}

// An honest compressed member is allocated once, at its final size, not
// grown by doubling to up to twice the data.
func TestCompressedMemberAllocatedOnce(t *testing.T) {
	const rows, cols = 1 << 16, 8 // 4 MiB as float64
	v := make([]float64, rows*cols)
	for i := range v {
		v[i] = float64(i % 251)
	}
	dir := t.TempDir()
	npz := filepath.Join(dir, "x.npz")
	if err := os.WriteFile(npz, zipOf(t, zip.Deflate, map[string][]byte{"X.npy": makeNPY(t, 1, "<f8", false, []int{rows, cols}, v)}, []string{"X.npy"}), 0o644); err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, rows*cols)
	for i := range payload {
		payload[i] = byte(i % 251)
	}
	idx := filepath.Join(dir, "x-ubyte.gz")
	if err := os.WriteFile(idx, gz(makeIDX(0x08, []uint32{rows, cols}, payload)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{npz, idx} {
		var err error
		n := memtest.Allocated(func() { _, err = ReadMatrix(path, "X") })
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(path), err)
		}
		if data := uint64(8 * rows * cols); n > data+data/4 {
			t.Errorf("%s: allocated %s for %s of data", filepath.Base(path), FormatBytes(float64(n)), FormatBytes(float64(data)))
		}
	}
}
