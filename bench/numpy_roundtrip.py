#!/usr/bin/python3
"""Check that relurec's .npy/.npz files and numpy's agree, in both directions.

Run from the repository root with a Python that has numpy (Debian:
`apt-get install python3-numpy`, then use /usr/bin/python3):

    /usr/bin/python3 bench/numpy_roundtrip.py

It writes numpy arrays in many dtypes and layouts (float32, Fortran order,
big-endian, ints, bool, 1-D, format 2.0, savez_compressed, CSV with header)
into a temporary directory, runs the Go half
(`go test ./dataio -run TestNumpyInterop` with RELUREC_INTEROP_DIR set),
which reads each with dataio.ReadMatrix and writes it back with
dataio.WriteNPY, then checks with numpy that every value survived and that
numpy.load reads the files relurec wrote. Exit status 0 means all agree.
Not part of `go test`.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    rng = np.random.default_rng(0)
    base = rng.standard_normal((5, 3))
    cases = {
        "f8_c": base,
        "f4_c": base.astype(np.float32),
        "f4_fortran": np.asfortranarray(base.astype(np.float32)),
        "f8_bigendian": base.astype(">f8"),
        "f4_bigendian_fortran": np.asfortranarray(base.astype(">f4")),
        "f2": base.astype(np.float16),
        "i1": (base * 50).astype(np.int8),
        "i4_bigendian": (base * 1e6).astype(">i4"),
        "i8": (base * 1e12).astype(np.int64),
        "u1": (np.abs(base) * 50).astype(np.uint8),
        "u8": (np.abs(base) * 1e15).astype(np.uint64),
        "bool": base > 0,
        "vector_1d": base[:, 0].copy(),
        "wide_fortran": np.asfortranarray(rng.standard_normal((4, 200))),
    }
    expected = {}
    with tempfile.TemporaryDirectory() as d:
        for name, a in cases.items():
            np.save(os.path.join(d, f"in_{name}.npy"), a)
            expected[name] = a
        # Format version 2.0 (numpy writes it for huge headers; force it).
        with open(os.path.join(d, "in_v2.npy"), "wb") as f:
            np.lib.format.write_array(f, base, version=(2, 0))
        expected["v2"] = base
        np.savez(os.path.join(d, "in_npz_stored.npz"), X=base, Y=base[:, :1])
        np.savez_compressed(os.path.join(d, "in_npz_deflated.npz"), X=np.asfortranarray(base.astype(np.float32)), Z=base)
        expected["npz_stored"] = base
        expected["npz_deflated"] = base.astype(np.float32)
        np.savetxt(os.path.join(d, "in_csv_header.csv"), base, delimiter=",", header="a,b,c", comments="")
        expected["csv_header"] = base

        env = dict(os.environ, RELUREC_INTEROP_DIR=d)
        r = subprocess.run(["go", "test", "./dataio", "-run", "^TestNumpyInterop$", "-count=1", "-v"],
                           cwd=repo, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            print(r.stdout, r.stderr)
            sys.exit("go test failed")

        bad = 0
        for name, a in expected.items():
            want = np.asarray(a, dtype=np.float64)
            if want.ndim == 1:
                want = want[:, None]
            got = np.load(os.path.join(d, f"out_{name}.npy"))
            same = got.shape == want.shape and got.dtype == np.float64 and np.array_equal(got, want)
            print(f"{name:24s} {str(a.dtype):8s} fortran={a.flags.f_contiguous and not a.flags.c_contiguous!s:5s} "
                  f"-> {got.shape} {'ok' if same else 'MISMATCH'}")
            bad += not same

        # Files relurec wrote, loaded by numpy.
        m = np.array([[10 * i + j + 0.125 for j in range(4)] for i in range(3)])
        m[2, 3], m[2, 2], m[1, 3] = -np.inf, -0.0, 1e-310
        g = np.load(os.path.join(d, "go_matrix.npy"))
        ok = g.dtype == np.float64 and g.flags.c_contiguous and np.array_equal(g, m) and np.signbit(g[2, 2])
        print(f"{'go_matrix.npy':24s} numpy.load -> {g.shape} {g.dtype} {'ok' if ok else 'MISMATCH'}")
        bad += not ok
        with np.load(os.path.join(d, "go_arrays.npz")) as z:
            ok = sorted(z.files) == ["X", "Y"] and np.array_equal(z["X"], m) and np.array_equal(z["Y"], [[-1.0], [0.0], [1.0]])
            print(f"{'go_arrays.npz':24s} numpy.load -> files {z.files} {'ok' if ok else 'MISMATCH'}")
            bad += not ok
        with open(os.path.join(d, "go_matrix.npy"), "rb") as f:
            version = np.lib.format.read_magic(f)
            hdr = np.lib.format.read_array_header_1_0(f)
            print(f"{'go_matrix.npy header':24s} version {version}, {hdr}, data offset {f.tell()}")
            bad += version != (1, 0) or f.tell() % 64 != 0
    print("numpy", np.__version__, "- all agree" if bad == 0 else f"- {bad} MISMATCHES")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
