#!/usr/bin/python3
"""relurec's empirical Hermite-moment kernel side by side with numpy.

The depth-2 learner (package depth2) needs the empirical Hermite moments
T_r = (1/n) sum_q y_q He_r(z_q), r = 0..4, of n samples in k (reduced)
dimensions: all C(k+r-1, r) distinct entries of every order, entry
alpha = (i_1 <= ... <= i_r) being mean(y * prod_j He_{n_j}(z_j)) with n_j the
multiplicity of j in alpha (the product form of specs/004 section 2.2).

Go side: tensor.HermiteMoments (Hermite monomials of degree <= 2 per sample,
one weighted GEMM per chunk of 4096 samples in pure-Go gonum, linearisation of
He_a*He_b for the rest, 2 goroutines, fixed reduction order). Its speed is
read from `go test -bench BenchmarkHermiteMoments/k=K/order=4` (samples per
second, n = 1e6 per operation).

numpy side, on the same n, k and order, timed here:
  (a) "vectorized": the natural numpy code - a table H[n, k, 5] of univariate
      He_0..He_4 values, then for each of the C(k+4, 4) entries of orders
      0..4 the product of its columns and a mean against y. Every operation
      is a vectorized numpy call over n; this is the formulation the speed
      target ("at least 3x numpy's vectorized version") refers to.
  (b) "GEMM": the same algorithm as relurec (degree-<=2 Hermite features F,
      G = (F * y)^T F through OpenBLAS, then the linearisation), which hands
      the work to OpenBLAS's optimised, multithreaded GEMM.
Both numpy results are checked against each other (max abs difference).

The Go benchmark uses random Gaussian z and y, numpy the same distribution
(not the same numbers): timing does not depend on the values. Threads: Go
uses GOMAXPROCS=2; numpy's elementwise code is single-threaded by nature and
OpenBLAS uses OPENBLAS_NUM_THREADS (default here: 2) for (b).

Run from the repository root (needs the Go toolchain and Debian's
python3-numpy, hence /usr/bin/python3):

    /usr/bin/python3 bench/depth2_moments_vs_numpy.py            # k = 5 and 10, n = 1e6
    /usr/bin/python3 bench/depth2_moments_vs_numpy.py --k 5 --repeat 5
"""

import argparse
import itertools
import os
import re
import subprocess
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")

import numpy as np  # noqa: E402


def hermite_table(z, order):
    """H[q, j, r] = He_r(z[q, j]) for r = 0..order."""
    n, k = z.shape
    H = np.empty((n, k, order + 1))
    H[:, :, 0] = 1.0
    if order >= 1:
        H[:, :, 1] = z
    for r in range(1, order):
        H[:, :, r + 1] = z * H[:, :, r] - r * H[:, :, r - 1]
    return H


def moments_vectorized(z, y, order):
    """Version (a): per entry, a vectorized product of columns and a mean."""
    n, k = z.shape
    H = hermite_table(z, order)
    out = {}
    for r in range(order + 1):
        for alpha in itertools.combinations_with_replacement(range(k), r):
            counts = {}
            for j in alpha:
                counts[j] = counts.get(j, 0) + 1
            prod = y
            for j, c in counts.items():
                prod = prod * H[:, j, c]
            out[alpha] = prod.mean()
    return out


def lin_coeff(a, b, i):
    c = 1.0
    for l in range(i):
        c *= (a - l) * (b - l) / (l + 1)
    return c


def moments_gemm(z, y, order):
    """Version (b): Hermite features of degree <= order/2, one GEMM, linearisation."""
    n, k = z.shape
    dl, dr = (order + 1) // 2, order // 2
    H = hermite_table(z, dl)
    feats = [()]
    for r in range(1, dl + 1):
        feats += list(itertools.combinations_with_replacement(range(k), r))
    index = {f: i for i, f in enumerate(feats)}
    F = np.empty((n, len(feats)))
    for i, f in enumerate(feats):
        col = np.ones(n)
        counts = {}
        for j in f:
            counts[j] = counts.get(j, 0) + 1
        for j, c in counts.items():
            col = col * H[:, j, c]
        F[:, i] = col
    nr = sum(1 for f in feats if len(f) <= dr)
    G = (F * y[:, None]).T @ F[:, :nr] / n
    out = {}
    for r in range(order + 1):
        ha = (r + 1) // 2
        for g in itertools.combinations_with_replacement(range(k), r):
            a, b = g[:ha], g[ha:]
            v = G[index[a], index[b]]
            if a and b and a[-1] == b[0]:
                j = b[0]
                na = sum(1 for x in a if x == j)
                nb = sum(1 for x in b if x == j)
                for i in range(1, min(na, nb) + 1):
                    lower = a[: len(a) - na] + (j,) * (na + nb - 2 * i) + b[nb:]
                    v -= lin_coeff(na, nb, i) * out[lower]
            out[g] = v
    return out


def go_samples_per_second(k, order, benchtime):
    pattern = f"BenchmarkHermiteMoments/k={k}/order={order}$"
    cmd = ["go", "test", "-run", "^$", "-bench", pattern, "-benchtime", benchtime, "./tensor/"]
    env = dict(os.environ, GOMAXPROCS=os.environ.get("GOMAXPROCS", "2"))
    res = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if res.returncode != 0:
        sys.exit(f"go benchmark failed:\n{res.stdout}\n{res.stderr}")
    m = re.search(r"([0-9.e+]+) samples/s", res.stdout)
    if not m:
        sys.exit(f"no samples/s in go output:\n{res.stdout}")
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, nargs="+", default=[5, 10], help="reduced dimensions (Go benchmarks exist for 5 and 10)")
    ap.add_argument("--n", type=int, default=1_000_000, help="samples for numpy (the Go benchmark uses 1e6)")
    ap.add_argument("--repeat", type=int, default=3, help="numpy repetitions; the fastest is reported")
    ap.add_argument("--benchtime", default="5x", help="go test -benchtime")
    args = ap.parse_args()
    order = 4
    rng = np.random.default_rng(1)
    print(f"order-{order} Hermite moments (all orders 0..{order}), n = {args.n}; load average {os.getloadavg()[0]:.2f}")
    print(f"{'k':>3} {'entries':>8} {'Go samples/s':>14} {'numpy (a) samples/s':>20} {'ratio Go/(a)':>13} {'numpy (b) samples/s':>20} {'ratio Go/(b)':>13} {'max |a-b|':>10}")
    for k in args.k:
        z = rng.standard_normal((args.n, k))
        y = rng.standard_normal(args.n)
        ta, tb = float("inf"), float("inf")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            ra = moments_vectorized(z, y, order)
            ta = min(ta, time.perf_counter() - t0)
            t0 = time.perf_counter()
            rb = moments_gemm(z, y, order)
            tb = min(tb, time.perf_counter() - t0)
        diff = max(abs(ra[key] - rb[key]) for key in ra)
        go = go_samples_per_second(k, order, args.benchtime)
        sa, sb = args.n / ta, args.n / tb
        print(f"{k:>3} {len(ra):>8} {go:>14.3g} {sa:>20.3g} {go / sa:>13.2f} {sb:>20.3g} {go / sb:>13.2f} {diff:>10.1e}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
