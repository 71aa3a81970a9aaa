#!/usr/bin/python3
"""Paired comparison of model files on the Fashion-MNIST test images (McNemar's exact test).

Accuracy differences of a few test images between two compressed models are within the noise of a
10 000-image test set. This script says how far: it evaluates every model with PyTorch (loading the
safetensors files with load_state_dict, as a user would), then, for the first model against each
of the others, counts the images only one of them gets right (b and c) and gives the two-sided
exact binomial p-value of McNemar's test, P(|B − C| ≥ |b − c|) under B + C = b + c, B ~ Bin(b + c, ½).

    relurec train mlp --data fashion-mnist --hidden 512,256 --seed 1 --out mlp.safetensors
    relurec compress --model mlp.safetensors --data fashion-mnist --keep 0.6 --method data --sequential --out seq.safetensors
    relurec compress --model mlp.safetensors --data fashion-mnist --keep 0.6 --method svd --out svd.safetensors
    relurec compress --model mlp.safetensors --data fashion-mnist --keep 0.6 --method asvd --out asvd.safetensors
    /usr/bin/python3 bench/compress_paired.py seq.safetensors svd.safetensors asvd.safetensors mlp.safetensors

`relurec eval --model seq.safetensors --truth svd.safetensors --data fashion-mnist` computes the same
counts and p-value in Go (metrics.CompareLogits); this script checks them through PyTorch.

Needs Fashion-MNIST (scripts/install-datasets.sh), python3-torch and python3-numpy.
"""
import math
import os
import sys
from fractions import Fraction

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
sys.path.insert(0, HERE)
from torch_roundtrip import build_sequential, read_safetensors  # noqa: E402
from compress_torch_roundtrip import DATA, idx  # noqa: E402


def mcnemar_exact(b, c):
    """Two-sided exact p-value of McNemar's test for discordant counts b, c."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = Fraction(sum(math.comb(n, i) for i in range(k + 1)), 2 ** n)  # exact: 2.0 ** n overflows past n = 1023
    return min(1.0, float(2 * tail))


def main():
    paths = sys.argv[1:]
    if len(paths) < 2:
        sys.exit(__doc__)
    x = torch.from_numpy(idx(os.path.join(DATA, "t10k-images-idx3-ubyte.gz")).reshape(-1, 784).astype(np.float64) / 255)
    y = torch.from_numpy(idx(os.path.join(DATA, "t10k-labels-idx1-ubyte.gz")).astype(np.int64))
    right = []
    for p in paths:
        tensors, meta = read_safetensors(p)
        model = build_sequential(tensors, meta).double()
        with torch.no_grad():
            ok = (model(x).argmax(1) == y).numpy()
        right.append(ok)
        print(f"{p}: accuracy {ok.mean():.4f}")
    first = right[0]
    for p, ok in zip(paths[1:], right[1:]):
        b = int(np.sum(first & ~ok))  # only the first model right
        c = int(np.sum(~first & ok))  # only the other right
        print(f"{paths[0]} vs {p}: only first right {b}, only second right {c}, net {b - c:+d} images, McNemar exact p = {mcnemar_exact(b, c):.3f}")


if __name__ == "__main__":
    main()
