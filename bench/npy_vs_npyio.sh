#!/usr/bin/env bash
# Compares relurec's hand-written readers with the maintained Go modules that
# read the same formats, and prints the numbers quoted in docs/files.md
# ("Why the readers are our own"):
#
#   .npy/.npz   dataio.ReadMatrix          vs github.com/sbinet/npyio v0.9.0
#   protobuf    modelfile.ReadONNX (own wire      vs google.golang.org/protobuf v1.36.11
#               reader, modelfile/protobuf.go)       (encoding/protowire, the low-level
#                                             piece usable without generated
#                                             ONNX types)
#
# It builds a throwaway module OUTSIDE the repository (default /tmp/npycmp,
# or $NPYCMP_DIR) that requires this checkout through a replace directive and
# the two modules at pinned versions from the Go module proxy, so relurec's
# own go.mod never gains them and nothing of theirs is copied here. It is not
# part of `go test ./...`.
#
# Usage: bench/npy_vs_npyio.sh [ROWS [COLS]]   (default 1000000 × 50, a
# 400 MB float64 .npy; it needs about 3 GB of free memory and disk)
set -euo pipefail

ROWS=${1:-1000000}
COLS=${2:-50}
REPO=$(cd "$(dirname "$0")/.." && pwd)
DIR=${NPYCMP_DIR:-/tmp/npycmp}
NPYIO=github.com/sbinet/npyio@v0.9.0
PROTO=google.golang.org/protobuf@v1.36.11

mkdir -p "$DIR"
cd "$DIR"
rm -f go.mod go.sum
cat > go.mod <<EOF
module npycmp

go 1.26

require github.com/relurec/relurec v0.0.0

replace github.com/relurec/relurec => $REPO
EOF
cp "$REPO/go.sum" .

cat > main.go <<'EOF'
// Command npycmp is written by relurec's bench/npy_vs_npyio.sh; see there.
package main

import (
	"archive/zip"
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/sbinet/npyio"
	"github.com/sbinet/npyio/npz"
	"google.golang.org/protobuf/encoding/protowire"
	"gonum.org/v1/gonum/mat"

	"github.com/relurec/relurec/dataio"
	"github.com/relurec/relurec/modelfile"
)

func main() {
	switch os.Args[1] {
	case "gen":
		gen(os.Args[2], atoi(os.Args[3]), atoi(os.Args[4]))
	case "hostile":
		hostile(os.Args[2])
	case "read":
		read(os.Args[2], os.Args[3])
	case "onnx":
		onnx(os.Args[2])
	}
}

func atoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

// gen writes a rows×cols float64 .npy with relurec's writer (numpy's layout:
// v1.0 header, C order, '<f8').
func gen(path string, rows, cols int) {
	rng := rand.New(rand.NewPCG(1, 2))
	m := mat.NewDense(rows, cols, nil)
	for i := range m.RawMatrix().Data {
		m.RawMatrix().Data[i] = rng.NormFloat64()
	}
	if err := dataio.WriteNPY(path, m); err != nil {
		panic(err)
	}
}

// npy returns a .npy file with the given header fields and data bytes.
func npy(descr, fortran, shape string, data []byte, major byte) []byte {
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", descr, fortran, shape)
	hdr := dict + strings.Repeat(" ", (64-(12+len(dict)+1)%64)%64) + "\n"
	var b bytes.Buffer
	b.WriteString("\x93NUMPY")
	b.Write([]byte{major, 0})
	if major == 1 {
		binary.Write(&b, binary.LittleEndian, uint16(len(hdr)))
	} else {
		binary.Write(&b, binary.LittleEndian, uint32(len(hdr)))
	}
	b.WriteString(hdr)
	b.Write(data)
	return b.Bytes()
}

// values encodes vals in byte order o, as float64 or float32.
func values(o binary.ByteOrder, f32 bool, vals ...float64) []byte {
	var b bytes.Buffer
	for _, v := range vals {
		if f32 {
			binary.Write(&b, o, float32(v))
		} else {
			binary.Write(&b, o, v)
		}
	}
	return b.Bytes()
}

// hostile writes the test files into dir.
func hostile(dir string) {
	le, be := binary.LittleEndian, binary.BigEndian
	six := []float64{1, 2, 3, 4, 5, 6} // the 3×2 matrix [[1 2] [3 4] [5 6]]
	files := map[string][]byte{
		"c-order.npy":         npy("<f8", "False", "(3, 2)", values(le, false, six...), 1),
		"big-endian.npy":      npy(">f8", "False", "(3, 2)", values(be, false, six...), 1),
		"fortran.npy":         npy("<f8", "True", "(3, 2)", values(le, false, 1, 3, 5, 2, 4, 6), 1),
		"float32.npy":         npy("<f4", "False", "(3, 2)", values(le, true, six...), 1),
		"truncated.npy":       npy("<f8", "False", "(3, 2)", values(le, false, 1, 2, 3), 1),
		"trailing.npy":        npy("<f8", "False", "(3, 2)", values(le, false, 1, 2, 3, 4, 5, 6, 7), 1),
		"huge-shape.npy":      npy("<f8", "False", "(200000000, 1)", values(le, false, 1, 2), 1),
		"overflow-shape.npy":  npy("<f8", "False", "(4611686018427387904, 4)", values(le, false, 1, 2), 1),
		"negative-shape.npy":  npy("<f8", "False", "(3, -2)", values(le, false, six...), 1),
		"no-newline.npy":      []byte("\x93NUMPY\x01\x00\x08\x00{}      "),
		"huge-header-v2.npy":  append([]byte("\x93NUMPY\x02\x00"), 0xf0, 0xff, 0xff, 0xff, '{'),
		"not-npy.npy":         []byte("hello, world"),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			panic(err)
		}
	}
	// An .npz as numpy.savez writes it (stored members), and one whose
	// member is truncated.
	for name, member := range map[string][]byte{
		"savez.npz":     files["c-order.npy"],
		"truncated.npz": files["truncated.npy"],
	} {
		var b bytes.Buffer
		zw := zip.NewWriter(&b)
		w, _ := zw.CreateHeader(&zip.FileHeader{Name: "X.npy", Method: zip.Deflate})
		w.Write(member)
		zw.Close()
		os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644)
	}
}

// read reads path with lib (dataio, npyio, npyio-bufio) and prints one line:
// the outcome, the time, the bytes allocated and the peak RSS.
func read(lib, path string) {
	defer func() {
		if p := recover(); p != nil {
			report(lib, path, nil, fmt.Errorf("PANIC: %v", p), 0)
		}
	}()
	start := time.Now()
	var m *mat.Dense
	var err error
	isNPZ := strings.HasSuffix(path, ".npz")
	switch lib {
	case "dataio":
		m, err = dataio.ReadMatrix(path, "X")
	case "npyio", "npyio-bufio":
		var f *os.File
		f, err = os.Open(path)
		if err != nil {
			break
		}
		defer f.Close()
		var d mat.Dense
		switch {
		case isNPZ:
			st, _ := f.Stat()
			var zr *npz.Reader
			if zr, err = npz.NewReader(f, st.Size()); err == nil {
				err = zr.Read("X.npy", &d)
			}
		case lib == "npyio-bufio":
			err = npyio.Read(bufio.NewReaderSize(f, 1<<16), &d)
		default:
			err = npyio.Read(f, &d)
		}
		if !d.IsEmpty() {
			m = &d
		}
	}
	report(lib, path, m, err, time.Since(start))
}

func report(lib, path string, m *mat.Dense, err error, el time.Duration) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	out := ""
	if m != nil {
		r, c := m.Dims()
		sum := 0.0
		for i := 0; i < r; i++ {
			for j := 0; j < c; j++ {
				sum += m.At(i, j)
			}
		}
		out = fmt.Sprintf("%d×%d", r, c)
		if r*c <= 8 {
			out += fmt.Sprintf(" %v", mat.Formatted(m, mat.FormatPython(), mat.Squeeze()))
		} else {
			out += fmt.Sprintf(" sum=%.6g", sum)
		}
	}
	if err != nil {
		msg := err.Error()
		if len(msg) > 90 {
			msg = msg[:90] + "…"
		}
		if out != "" {
			out += " AND "
		}
		out += "error: " + msg
	}
	if out == "" {
		out = "no matrix, no error"
	}
	fmt.Printf("%-12s %-20s %8.3fs alloc %7.1f MB  peak RSS %7.1f MB  %s\n", lib, filepath.Base(path),
		el.Seconds(), float64(ms.TotalAlloc)/1e6, float64(ru.Maxrss)/1e3, strings.ReplaceAll(out, "\n", " "))
}

// onnx times modelfile.ReadONNX on path against a protowire walk of the same
// messages (ModelProto → GraphProto → its nodes and initializers), and runs
// both on truncated copies.
func onnx(path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	const reps = 2000
	t0 := time.Now()
	for range reps {
		if _, err := modelfile.ReadONNX(bytes.NewReader(b)); err != nil {
			panic(err)
		}
	}
	own := time.Since(t0) / reps
	t0 = time.Now()
	fields := 0
	for range reps {
		fields = walk(b, 0)
	}
	pw := time.Since(t0) / reps
	fmt.Printf("%s (%d bytes): modelfile.ReadONNX (wire parse + MLP) %v per file; protowire walk of the same messages (wire only, %d fields) %v per file\n",
		filepath.Base(path), len(b), own, fields, pw)
	bad := 0
	for cut := 1; cut < len(b); cut++ {
		_, err1 := modelfile.ReadONNX(bytes.NewReader(b[:cut]))
		if err1 == nil {
			bad++
		}
	}
	fmt.Printf("modelfile.ReadONNX on all %d truncations of the file: %d accepted, the rest rejected with an error (no panic)\n", len(b)-1, bad)
}

// walk decodes every field of msg and recurses into the ONNX messages an
// MLP needs (ModelProto.graph; GraphProto.node/initializer/input/output),
// returning the number of fields seen, or -1 on a malformed message.
func walk(msg []byte, depth int) int {
	n := 0
	for len(msg) > 0 {
		num, typ, k := protowire.ConsumeTag(msg)
		if k < 0 {
			return -1
		}
		msg = msg[k:]
		k = protowire.ConsumeFieldValue(num, typ, msg)
		if k < 0 {
			return -1
		}
		if typ == protowire.BytesType && ((depth == 0 && num == 7) || (depth == 1 && (num == 1 || num == 5 || num == 11 || num == 12))) {
			v, _ := protowire.ConsumeBytes(msg)
			if c := walk(v, depth+1); c < 0 {
				return -1
			} else {
				n += c
			}
		}
		msg = msg[k:]
		n++
	}
	return n
}


EOF

echo "== fetching the compared modules (pinned) from the Go module proxy"
go get "$NPYIO" "$PROTO" >/dev/null 2>&1 || go get "$NPYIO" "$PROTO"
go mod tidy >/dev/null 2>&1 || go mod tidy
go build -o npycmp .

echo
echo "== module size (non-test Go lines), to set against dataio/npy.go+npz.go and modelfile/protobuf.go"
MOD=$(go env GOMODCACHE)
for m in "$NPYIO" "$PROTO"; do
	path=${m%@*}; ver=${m#*@}
	lines=$(find "$MOD/$path@$ver" -name '*.go' ! -name '*_test.go' -print0 | xargs -0 cat | wc -l)
	echo "$m: $lines lines"
done
echo "relurec dataio/npy.go + dataio/npz.go: $(cat "$REPO"/dataio/npy.go "$REPO"/dataio/npz.go | wc -l) lines; modelfile/protobuf.go: $(wc -l < "$REPO"/modelfile/protobuf.go) lines"
echo "npyio v0.9.0 requires: $(go mod graph | awk '$1 ~ /^github.com\/sbinet\/npyio@/ {print $2}' | tr '\n' ' ')"

echo
echo "== reading a ${ROWS}×${COLS} float64 .npy (each read in a fresh process)"
BIG=$DIR/big.npy
[ -f "$BIG" ] && [ "$(cat "$DIR/big.shape" 2>/dev/null)" = "${ROWS}x${COLS}" ] || { ./npycmp gen "$BIG" "$ROWS" "$COLS"; echo "${ROWS}x${COLS}" > "$DIR/big.shape"; }
ls -l "$BIG" | awk '{printf "file: %.1f MB\n", $5/1e6}'
for lib in dataio npyio-bufio; do
	for run in 1 2 3; do ./npycmp read "$lib" "$BIG"; done
done
# npyio.Read on the bare *os.File (its documented use) reads 8 bytes per
# system call: one run is enough to see it.
./npycmp read npyio "$BIG"

echo
echo "== hostile and unusual files (each read in a fresh process, address space limited to 4 GB, 60 s)"
H=$DIR/hostile
rm -rf "$H"; mkdir -p "$H"
./npycmp hostile "$H"
for f in c-order big-endian fortran float32 truncated trailing huge-shape overflow-shape negative-shape no-newline huge-header-v2 not-npy; do
	for lib in dataio npyio; do
		( ulimit -v 4000000; timeout 60 ./npycmp read "$lib" "$H/$f.npy" 2>&1 | head -1 ) || echo "$lib $f.npy: killed or out of memory (exit $?)"
	done
done
for f in savez truncated; do
	for lib in dataio npyio; do
		( ulimit -v 4000000; timeout 60 ./npycmp read "$lib" "$H/$f.npz" 2>&1 | head -1 ) || echo "$lib $f.npz: killed or out of memory (exit $?)"
	done
done

echo
echo "== ONNX: modelfile's wire reader vs protowire"
./npycmp onnx "$REPO/modelfile/testdata/torch_mlp.onnx"
