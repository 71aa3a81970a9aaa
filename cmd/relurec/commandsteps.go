package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/relurec/relurec/dataio"
)

// Steps every computing command shares, so that each reads as parse →
// validate → read → call → print without repeating them.

// newManifest starts a command's run manifest: its name, the command line,
// the version, the options and seed as given, and the hash of every input
// file (each once), computed while the command reads them
// (Manifest.HashInputs). It is written next to the output by writeAll. An
// input that cannot be opened is reported here, before any work.
func (a *app) newManifest(command string, options any, seed uint64, inputs ...string) (*dataio.Manifest, error) {
	man := dataio.NewManifest(command, a.args)
	man.Version = relurecVersion()
	man.Options = options
	man.Seed = seed
	paths := uniq(inputs)
	for _, p := range paths {
		// A regular file is opened and closed to report an unreadable one
		// now; a named pipe is not (opening and closing it would cut off
		// its writer).
		fi, err := os.Stat(p)
		if err == nil && fi.Mode().IsRegular() {
			var f *os.File
			if f, err = os.Open(p); err == nil {
				f.Close()
			}
		}
		if err != nil {
			return nil, fmt.Errorf("reading input: %w", err)
		}
	}
	man.HashInputs(paths...)
	return man, nil
}

// checkModelOut checks the flags of a command that writes a model, before
// anything is read: --dtype (lower-cased in place) is f64 or f32, --out
// passes checkOutputs (writable, and neither the model nor its manifest
// would overwrite one of the inputs) and ends in .safetensors or .onnx (any
// case; the format follows it).
func checkModelOut(dtype *string, out string, inputs ...string) error {
	*dtype = strings.ToLower(*dtype)
	if *dtype != "f64" && *dtype != "f32" {
		return usageErrorf("--dtype must be f64 or f32, got %q", *dtype)
	}
	if out == "" {
		return usageErrorf("--out is required")
	}
	// The path's safety first (not an input, not a device), then its format.
	if err := checkOutputs(inputs, [3]string{"out", out, ""}); err != nil {
		return err
	}
	return checkModelExt("out", out)
}
