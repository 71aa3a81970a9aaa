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
// The .npy and .npz readers are our own rather than
// github.com/sbinet/npyio: docs/files.md ("Why the readers are our own")
// gives the measured comparison. They are fuzzed by FuzzReadNPY and
// FuzzReadNPZ (and IDX by FuzzReadIDX).
package dataio
