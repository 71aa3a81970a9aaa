#!/usr/bin/python3
"""PyTorch -> ONNX -> relurec compress -> safetensors -> PyTorch, on Fashion-MNIST.

1. Builds an nn.Sequential MLP (784-256-128-10 by default) in PyTorch and trains it for a few
   epochs on Fashion-MNIST (torch, CPU), then exports it with torch.onnx.export: no safetensors
   package needed.
2. relurec evaluates the ONNX model (`relurec eval --data fashion-mnist`) and compresses it
   (`relurec compress --model m.onnx --data fashion-mnist --keep K --sequential`).
3. PyTorch loads the compressed safetensors file into the matching nn.Sequential (two Linear
   modules per compressed layer; architecture from the file's metadata) with
   load_state_dict(strict=True) and evaluates it on the 10 000 test images.

Checks that PyTorch's accuracies equal relurec's reported ones to 1e-4, for the original model
and for the compressed one; exit status 0 when they do.

    /usr/bin/python3 bench/compress_torch_roundtrip.py
    /usr/bin/python3 bench/compress_torch_roundtrip.py --hidden 512,256 --epochs 3 --keep 0.2 --relurec ./relurec

Needs Fashion-MNIST (scripts/install-datasets.sh), python3-torch and python3-numpy, and a
relurec binary (built with `go build` when --relurec is not given).
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "examples"))
from torch_roundtrip import build_sequential, read_safetensors  # noqa: E402

DATA = os.environ.get("RELUREC_FASHION_MNIST", "/usr/share/datasets/fashion-mnist")


def idx(path):
    with gzip.open(path, "rb") as f:
        b = f.read()
    ndim = b[3]
    dims = [int.from_bytes(b[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(b, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def accuracy(model, x, y):
    with torch.no_grad():
        return float((model(x).argmax(1) == y).double().mean())


def train_mlp(sizes, epochs, xtr, ytr):
    """An nn.Sequential of Linear/ReLU with these sizes, trained with Adam (lr 1e-3, minibatches of
    128) on (xtr, ytr) for epochs epochs from torch's current seed, in eval mode."""
    mods = []
    for i in range(len(sizes) - 1):
        mods.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            mods.append(nn.ReLU())
    model = nn.Sequential(*mods)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(epochs):
        perm = torch.randperm(len(xtr))
        for k in range(0, len(xtr), 128):
            b = perm[k:k + 128]
            opt.zero_grad()
            nn.functional.cross_entropy(model(xtr[b]), ytr[b]).backward()
            opt.step()
    return model.eval()


def relurec(exe, *args):
    r = subprocess.run([exe, *args, "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"relurec {' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hidden", default="256,128")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--keep", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--relurec", default="")
    args = ap.parse_args()
    torch.manual_seed(args.seed)

    xtr = torch.from_numpy(idx(os.path.join(DATA, "train-images-idx3-ubyte.gz")).reshape(-1, 784).astype(np.float32) / 255)
    ytr = torch.from_numpy(idx(os.path.join(DATA, "train-labels-idx1-ubyte.gz")).astype(np.int64))
    xte = torch.from_numpy(idx(os.path.join(DATA, "t10k-images-idx3-ubyte.gz")).reshape(-1, 784).astype(np.float32) / 255)
    yte = torch.from_numpy(idx(os.path.join(DATA, "t10k-labels-idx1-ubyte.gz")).astype(np.int64))

    model = train_mlp([784] + [int(h) for h in args.hidden.split(",")] + [10], args.epochs, xtr, ytr)

    with tempfile.TemporaryDirectory() as tmp:
        exe = args.relurec
        if not exe:
            exe = os.path.join(tmp, "relurec")
            subprocess.run(["go", "build", "-o", exe, "./cmd/relurec"], cwd=REPO, check=True)
        onnx_path = os.path.join(tmp, "mlp.onnx")
        torch.onnx.export(model, xte[:1], onnx_path, input_names=["x"], output_names=["logits"],
                          dynamic_axes={"x": {0: "n"}})
        # relurec computes in float64; compare with the same model in float64.
        torch_orig = accuracy(model.double(), xte.double(), yte)
        ev = relurec(exe, "eval", "--model", onnx_path, "--data", "fashion-mnist")
        small = os.path.join(tmp, "small.safetensors")
        rep = relurec(exe, "compress", "--model", onnx_path, "--data", "fashion-mnist", "--keep", str(args.keep),
                      "--sequential", "--out", small)
        tensors, meta = read_safetensors(small)
        back = build_sequential(tensors, meta)
        torch_small = accuracy(back, xte.to(next(back.parameters()).dtype), yte)

    print(f"PyTorch {torch.__version__}: {model}".replace("\n", " "))
    print(f"original  : PyTorch {torch_orig:.4f}, relurec eval {ev['test']['accuracy']:.4f}")
    print(f"compressed: keep {args.keep} -> {rep['params']} of {rep['dense_params']} parameters, "
          f"ranks {[l['rank'] for l in rep['layers']]}; relurec reports {rep['compressed']['accuracy']:.4f}, "
          f"PyTorch measures {torch_small:.4f} on the loaded file ({back})".replace("\n", " "))
    d1 = abs(torch_orig - ev["test"]["accuracy"])
    d2 = abs(torch_small - rep["compressed"]["accuracy"])
    ok = d1 <= 1e-4 and d2 <= 1e-4
    print(f"|difference|: original {d1:.1e}, compressed {d2:.1e} -> {'agree to 1e-4' if ok else 'MISMATCH'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
