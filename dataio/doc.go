// Package dataio reads and writes the data files relurec works with and
// records how every output was produced.
//
// Arrays are 2-D with samples as rows, as in numpy, PyTorch and
// scikit-learn. ReadMatrix reads .npy, .npz and .csv files (format chosen by
// extension) into a float64 *mat.Dense whatever the stored dtype, byte order
// or memory order; WriteNPY and WriteNPZ write float64 arrays that
// numpy.load reads. The .npy parser is our own and fuzzed: a corrupt or
// truncated file gives an error wrapping ErrFormat, never a panic, and no
// size field in a file is trusted before it is checked against the bytes
// present.
//
// Every file this package writes goes through AtomicWriteFile (temporary
// file, fsync, rename), so a crash or an error never leaves a half-written
// output or destroys the previous one, and CheckOutputNotInput lets commands
// refuse to overwrite their own inputs. CheckFinite rejects NaN and Inf at
// the edge with a message naming the entry.
//
// A Manifest (inputs' SHA-256, options, seed, version, timings, results) is
// written next to each output, at ManifestPath(out).
//
// # Why the .npy reader is our own
//
// The maintained Go module for numpy files is github.com/sbinet/npyio. We
// compared it with ours (bench/npy_vs_npyio.sh rebuilds the comparison in a
// throwaway module and prints these numbers; npyio v0.9.0, one process per
// read, 2 cores):
//
//   - Speed and memory, a 1 000 000 × 50 float64 .npy (400 MB): ReadMatrix
//     1.4–1.8 s, 402 MB allocated, 398 MB peak RSS; npyio.Read into a
//     mat.Dense through a bufio.Reader 1.6–2.2 s, 400 MB, 396 MB (a 2-core
//     machine with other work on it); npyio.Read on the bare *os.File, as
//     its documentation shows, 93–114 s (one system call per element).
//     Before our reader streamed regular files it took 3.8 s and 800 MB
//     (the file and the matrix).
//   - Dtypes: both read big-endian, Fortran-order and .npz files right;
//     npyio refuses a float32 file read into a mat.Dense ("types don't
//     match") where ReadMatrix converts every float, int, uint and bool
//     dtype to float64.
//   - Hostile or broken files (address space limited to 4 GB): a truncated
//     file gives ours an ErrFormat error, npyio a matrix whose missing
//     entries repeat the last value read, together with a bare EOF (also
//     inside an .npz); a 142-byte file declaring shape (200000000, 1) gives
//     ours an error at once, and makes npyio allocate and fill 1.6 GB over
//     12 s before returning EOF; a shape that overflows, a negative
//     dimension and a header without its closing newline make npyio panic;
//     a version 2.0 header claiming 4 GB makes it die out of memory. Ours
//     returns an ErrFormat error for each, within 5 MB of RSS.
//
// npyio would also bring four modules (gopickle, embedmd, go-difflib,
// x/text) for 4 200 lines of Go, against our 690 lines of npy.go and
// npz.go. So we keep ours, fuzzed by FuzzReadNPY and FuzzReadNPZ (and IDX
// by FuzzReadIDX).
package dataio
