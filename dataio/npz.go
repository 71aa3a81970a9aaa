package dataio

import (
	"archive/zip"
	"bufio"
	"bytes"
	"compress/flate"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/gonum/mat"
)

// An .npz file is a zip archive of .npy files, one per array, named
// NAME.npy (numpy.savez stores them, numpy.savez_compressed deflates them).

// readNPZFile reads the array called name from the .npz file at path.
func readNPZFile(path, name string, cfg readCfg) (*mat.Dense, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	m, err := decodeNPZ(f, st.Size(), name, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// npzNames lists the array names of an archive (member names without the
// .npy suffix), sorted.
func npzNames(zr *zip.Reader) []string {
	var names []string
	for _, f := range zr.File {
		names = append(names, strings.TrimSuffix(f.Name, ".npy"))
	}
	sort.Strings(names)
	return names
}

// decodeNPZ reads the array called name from an .npz archive of the given
// size. name may be given with or without the .npy suffix; "" selects the
// only array of a one-array archive.
//
// The member's size, as the archive declares it, must be exactly what its
// .npy header's shape needs: a member that declares a small array and then
// inflates to gigabytes of padding is refused before it is decompressed
// (numpy.load would read the array and ignore the rest). A deflated member
// is decompressed twice: once to confirm that it holds the bytes its
// header declares, without keeping them, then into a matrix allocated once
// at its final size, so one whose archive entry lies about its size costs
// decompression time, not memory.
func decodeNPZ(r io.ReaderAt, size int64, name string, cfg readCfg) (*mat.Dense, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("not a readable .npz (zip) archive (%v): %w", err, ErrFormat)
	}
	names := npzNames(zr)
	var member *zip.File
	switch {
	case name == "" && len(zr.File) == 1:
		member = zr.File[0]
	case name == "":
		return nil, fmt.Errorf("archive holds %d arrays %s; say which one to read: %w", len(names), quoteList(names), ErrNotFound)
	default:
		want := strings.TrimSuffix(name, ".npy")
		for _, f := range zr.File {
			if strings.TrimSuffix(f.Name, ".npy") == want {
				member = f
				break
			}
		}
		if member == nil {
			return nil, fmt.Errorf("no array named %q; the archive holds %s: %w", want, quoteList(names), ErrNotFound)
		}
	}
	var opened []io.Closer
	defer func() {
		for _, c := range opened {
			c.Close()
		}
	}()
	open := func() (io.Reader, error) {
		rc, err := member.Open()
		if err != nil {
			return nil, fmt.Errorf("cannot open member %q (%v): %w", member.Name, err, ErrFormat)
		}
		opened = append(opened, rc)
		return bufio.NewReaderSize(cfg.reader(rc), 1<<16), nil
	}
	r0, err := open()
	if err != nil {
		return nil, err
	}
	// archive/zip enforces the member's declared uncompressed size on the
	// stream, so it bounds every size in the .npy header; a stored member's
	// size is also backed by the bytes of the archive, a deflated one's is
	// only declared, and confirmed by a first pass over the member before
	// the matrix is allocated.
	src := source{total: -1, exact: true}
	if member.UncompressedSize64 <= math.MaxInt64 {
		src.total = int64(member.UncompressedSize64)
	}
	src.trusted = member.Method == zip.Store && member.CompressedSize64 == member.UncompressedSize64 && src.total >= 0 && src.total <= size
	if !src.trusted {
		src.reopen = open
	}
	m, err := readNPY(r0, src, cfg)
	if err != nil {
		// A member cut short (its deflate stream, or the bytes its
		// header declares) ends in io.ErrUnexpectedEOF.
		if errors.Is(err, zip.ErrChecksum) || errors.Is(err, zip.ErrFormat) || errors.Is(err, zip.ErrAlgorithm) || errors.Is(err, io.ErrUnexpectedEOF) || isFlateError(err) {
			err = fmt.Errorf("corrupt (%v): %w", err, ErrFormat)
		}
		return nil, fmt.Errorf("member %q: %w", member.Name, err)
	}
	return m, nil
}

// isFlateError reports whether err comes from a corrupt deflate stream.
func isFlateError(err error) bool {
	var ce flate.CorruptInputError
	return errors.As(err, &ce)
}

func quoteList(names []string) string {
	if len(names) == 0 {
		return "no arrays"
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// npzTime is the modification time stamped on every member. A fixed time
// makes the same arrays give byte-identical archives, so the SHA-256 in a
// run manifest identifies content, not the moment of writing.
var npzTime = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

// WriteNPZ writes arrays to path as an uncompressed .npz archive, one member
// NAME.npy per key in sorted key order, like numpy.savez(path, **arrays).
// The write is atomic: on failure any existing file at path is left
// untouched.
func WriteNPZ(path string, arrays map[string]*mat.Dense) error {
	if len(arrays) == 0 {
		return fmt.Errorf("dataio: WriteNPZ needs at least one array: %w", ErrEmpty)
	}
	keys := make([]string, 0, len(arrays))
	for k, m := range arrays {
		if k == "" || strings.ContainsAny(k, "/\\") {
			return fmt.Errorf("dataio: array name %q is not usable as an .npz member name; use a plain name such as \"X\"", k)
		}
		if err := checkWritable(m); err != nil {
			return fmt.Errorf("array %q: %w", k, err)
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return AtomicWriteFile(path, func(w io.Writer) error {
		zw := zip.NewWriter(w)
		for _, k := range keys {
			fw, err := zw.CreateHeader(&zip.FileHeader{Name: k + ".npy", Method: zip.Store, Modified: npzTime})
			if err != nil {
				return err
			}
			if err := encodeNPY(fw, arrays[k]); err != nil {
				return err
			}
		}
		return zw.Close()
	})
}

// NPZNames lists the names of the arrays in the .npz file at path (without
// the .npy suffix), sorted, so a CLI can tell users what a file offers.
func NPZNames(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	zr, err := zip.NewReader(f, st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: not a readable .npz (zip) archive (%v): %w", path, err, ErrFormat)
	}
	return npzNames(zr), nil
}

// decodeNPZBytes is decodeNPZ over an in-memory archive (used by tests and
// the fuzzer).
func decodeNPZBytes(b []byte, name string) (*mat.Dense, error) {
	return decodeNPZ(bytes.NewReader(b), int64(len(b)), name, readCfg{})
}
