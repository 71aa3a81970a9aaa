#!/usr/bin/python3
"""relurec compress vs a plain numpy implementation of the same method, side by side.

The method: sequential data-driven low-rank compression (Zhang & Saab, Alg 2c inside Alg 3):
for each layer, with X the original network's inputs, X̌ the compressed network's inputs and
Ỹ = X·Wᵀ + b the original pre-activations, solve
    min over rank-r Z and bias c of ‖Ỹ − X̌·Z − 1·cᵀ‖_F
by centring, QR whitening X̌_c = Q·R, an SVD of Qᵀ·Ỹ_c, and Z = R⁻¹·[Qᵀ·Ỹ_c]_r. numpy calls
LAPACK/OpenBLAS; relurec is pure Go, or OpenBLAS when built with the openblas tag
(scripts/openblas.sh build; `relurec --version` names the backend). Both use the same ranks (relurec's global allocation at
--keep, read from its JSON report) and the same 10 000 calibration images.

Prints per layer: rank, relative calibration error ‖Ỹ − Ŷ‖/‖Ỹ‖ from each, and their difference;
then test accuracy of both compressed models, and the compression wall times (relurec's
"compress" timing excludes reading the data; numpy's excludes reading too).

    /usr/bin/python3 bench/compress_vs_numpy.py --model mlp.safetensors --keep 0.1
    /usr/bin/python3 bench/compress_vs_numpy.py --model mlp.safetensors --keep 0.5 --relurec ./relurec

Needs Fashion-MNIST (scripts/install-datasets.sh), python3-numpy, and a relurec binary
(built from the repository with `go build -o relurec ./cmd/relurec` when --relurec is not given).
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "examples"))
DATA = os.environ.get("RELUREC_FASHION_MNIST", "/usr/share/datasets/fashion-mnist")


def idx(path):
    with gzip.open(path, "rb") as f:
        b = f.read()
    ndim = b[3]
    dims = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(b, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_layers(path):
    """(weight out×in, bias, act) per layer from a relurec safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    arch = json.loads(meta["relurec.architecture"])
    buf = data[8 + n:]
    dt = {"F64": "<f8", "F32": "<f4"}
    tensors = {}
    for name, info in header.items():
        a, e = info["data_offsets"]
        tensors[name] = np.frombuffer(buf[a:e], dtype=dt[info["dtype"]]).astype(np.float64).reshape(info["shape"])
    layers, k = [], 0
    for layer in arch:
        w = tensors[f"{k}.weight"]
        b = tensors.get(f"{k}.bias")
        layers.append((w, b, layer["act"]))
        k += 2 if layer["act"] == "relu" else 1
    return layers


def forward(layers, x):
    for w, b, act in layers:
        x = x @ w.T
        if b is not None:
            x = x + b
        if act == "relu":
            x = np.maximum(x, 0)
    return x


def compress_numpy(layers, x0, ranks, ridges):
    """Sequential Alg 2c with QR whitening; ranks[i] == 0 keeps layer i dense (refit on the
    compressed inputs after the first layer). ridges[i] is the
    relative ridge δ relurec reported for layer i (λ = δ·‖X̌_c‖_F²/d, added as √λ·I rows under
    X̌_c): relurec adds one only when the inputs are numerically singular, e.g. dead ReLU units."""
    out, errs = [], []
    xo, xc = x0, x0
    for i, ((w, b, act), r, rel) in enumerate(zip(layers, ranks, ridges)):
        y = xo @ w.T + (b if b is not None else 0)
        if r == 0 and (i == 0 or b is None):
            yc = xc @ w.T + (b if b is not None else 0)
            out.append((w, b, act))
        else:
            # A layer kept dense after the first is refit on the compressed
            # inputs (full-rank least squares), as relurec's sequential driver does.
            dense = r == 0
            if dense:
                r = min(w.shape)
            xbar, ybar = xc.mean(0), y.mean(0)
            z, t = xc - xbar, y - ybar
            if rel > 0:
                lam = rel * np.linalg.norm(z) ** 2 / z.shape[1]
                z = np.vstack([z, np.sqrt(lam) * np.eye(z.shape[1])])
                t = np.vstack([t, np.zeros((z.shape[1], t.shape[1]))])
            q, rr = np.linalg.qr(z)
            u, s, vt = np.linalg.svd(q.T @ t, full_matrices=False)
            a = np.linalg.solve(rr, u[:, :r] * s[:r])  # R⁻¹·U_r·S_r  (d×r)
            bmat = vt[:r]  # r×d2
            bias = ybar - (xbar @ a) @ bmat
            if dense:
                out.append(((a @ bmat).T, bias, act))
            else:
                out.append((a.T, None, "identity"))
                out.append((bmat.T, bias, act))
            yc = (xc @ a) @ bmat + bias
        errs.append(np.linalg.norm(y - yc) / np.linalg.norm(y))
        xo = np.maximum(y, 0) if act == "relu" else y
        xc = np.maximum(yc, 0) if act == "relu" else yc
    return out, errs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="trained model (relurec train mlp)")
    ap.add_argument("--keep", type=float, default=0.1)
    ap.add_argument("--calib", type=int, default=10000)
    ap.add_argument("--relurec", default="", help="relurec binary (default: build one)")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        exe = args.relurec
        if not exe:
            exe = os.path.join(tmp, "relurec")
            subprocess.run(["go", "build", "-o", exe, "./cmd/relurec"], cwd=REPO, check=True)
        out = os.path.join(tmp, "small.safetensors")
        cmd = [exe, "compress", "--model", args.model, "--data", "fashion-mnist", "--calib-samples", str(args.calib),
               "--keep", str(args.keep), "--fast", "--sequential", "--route", "qr", "--out", out, "--json"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"relurec compress failed ({r.returncode}): {r.stderr}")
        rep = json.loads(r.stdout)
        ranks = [0 if l["dense"] else l["rank"] for l in rep["layers"]]
        go_errs = [l["error"] for l in rep["layers"]]
        ridges = [(l.get("whitening") or {}).get("rel_ridge", 0) for l in rep["layers"]]
        go_time = rep["timings"]["compress"]
        go_acc = rep["compressed"]["accuracy"]
        version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.strip()
        blas = version.split("(BLAS: ", 1)[1][:-1] if "(BLAS: " in version else "unknown BLAS"

    layers = load_layers(args.model)
    xtr = idx(os.path.join(DATA, "train-images-idx3-ubyte.gz")).reshape(-1, 784).astype(np.float64) / 255
    xte = idx(os.path.join(DATA, "t10k-images-idx3-ubyte.gz")).reshape(-1, 784).astype(np.float64) / 255
    yte = idx(os.path.join(DATA, "t10k-labels-idx1-ubyte.gz")).astype(np.int64)
    x0 = xtr[:args.calib]
    t0 = time.perf_counter()
    small, np_errs = compress_numpy(layers, x0, ranks, ridges)
    np_time = time.perf_counter() - t0
    dense_acc = float((forward(layers, xte).argmax(1) == yte).mean())
    np_acc = float((forward(small, xte).argmax(1) == yte).mean())

    print(f"sequential data-driven compression (Alg 2c + Alg 3, QR whitening), keep {args.keep}, "
          f"{args.calib} calibration images, ranks {ranks} (0 = dense), relative ridges {ridges}")
    print(f"{'layer':>5} {'rank':>6} {'error relurec':>14} {'error numpy':>12} {'|diff|':>9}")
    for i, (r_, a, b) in enumerate(zip(ranks, go_errs, np_errs)):
        print(f"{i:>5} {r_ if r_ else 'dense':>6} {a:>14.6f} {b:>12.6f} {abs(a - b):>9.2e}")
    print(f"test accuracy: dense {dense_acc:.4f}, relurec {go_acc:.4f}, numpy {np_acc:.4f}")
    print(f"compression time: relurec {go_time:.2f} s ({blas}, GOMAXPROCS {os.environ.get('GOMAXPROCS', 'default')}), numpy {np_time:.2f} s "
          f"(OpenBLAS, {os.environ.get('OPENBLAS_NUM_THREADS', 'default')} threads); ratio {go_time / np_time:.2f}")
    ok = max(abs(a - b) for a, b in zip(go_errs, np_errs)) < 1e-6 and abs(go_acc - np_acc) < 2e-3
    print("agree" if ok else "DISAGREE")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
