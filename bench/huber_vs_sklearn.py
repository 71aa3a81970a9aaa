#!/usr/bin/python3
"""Robust code recovery: relurec's generalized LASSO (Huber by semismooth Newton)
against scikit-learn's HuberRegressor, side by side.

Setup (the timing instance of docs/robust.md): d = 20000 observations of a k = 50 code,
v = ReLU(A c* + b) + e + w with A Gaussian, ||c*|| = 1, b ~ N(0, 0.5^2)
(so the target is mu c* with mu = 0.5), 5% outliers (s = 1000) of magnitude
50 U[0.5, 1.5] with random signs, w ~ U[-0.1, 0.1].

For each seed, `relurec gen robust` writes the instance; then

  relurec   `relurec recover latent --json` (MAD threshold, no truth used; and
            again with a fixed --lambda, --lambda-fixed),
            per-solve wall time as reported by the command (solve phase only,
            A^T A included once for all rows), GOMAXPROCS = --threads;
  sklearn   HuberRegressor(epsilon=1.35, alpha=0, fit_intercept=False), one
            fit per observation, timed around .fit(); BLAS threads = --threads.

Both target mu c*; the error is ||c_hat - mu c*||. HuberRegressor estimates a
scale sigma jointly with the coefficients; when that estimate drifts upward
every residual falls inside the quadratic zone and the fit is least squares.
The script flags such fits ("~OLS": within 1% of the least-squares solution,
which here is far from mu c*) and fits that stopped at max_iter.

Usage (from the repository root; Debian python3-numpy python3-sklearn):
  /usr/bin/python3 bench/huber_vs_sklearn.py                 # 3 seeds x 5 observations
  /usr/bin/python3 bench/huber_vs_sklearn.py --seeds 1-5 --n 10 --threads 1 --relurec ./relurec
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings


def parse_seeds(s):
    if "-" in s:
        a, b = s.split("-")
        return list(range(int(a), int(b) + 1))
    return [int(x) for x in s.split(",")]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="1-3")
    ap.add_argument("--n", type=int, default=5, help="observations per seed")
    ap.add_argument("--d", type=int, default=20000)
    ap.add_argument("--k", type=int, default=50)
    ap.add_argument("--s", type=int, default=1000)
    ap.add_argument("--magnitude", type=float, default=50)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--relurec", default="", help="relurec binary (default: go build into a temp dir)")
    ap.add_argument("--max-iter", type=int, default=100, help="HuberRegressor max_iter (its default)")
    ap.add_argument("--lambda-fixed", type=float, default=1e-4,
                    help="also time relurec with this fixed lambda (tau = lambda*d; 1e-4 gives tau = 2 at d = 20000); 0 skips")
    ap.add_argument("--json-out", default="")
    args = ap.parse_args()

    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(args.threads))
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import numpy as np
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import HuberRegressor

    work = tempfile.mkdtemp(prefix="huber-bench-")
    exe = args.relurec
    if not exe:
        exe = os.path.join(work, "relurec")
        subprocess.run(["go", "build", "-o", exe, "./cmd/relurec"], check=True)
    env = dict(os.environ, GOMAXPROCS=str(args.threads))
    mu = 0.5
    rows = []
    print(f"d={args.d} k={args.k} s={args.s} magnitude={args.magnitude} threads={args.threads}")
    print(f"{'seed':>4} {'relurec err':>12} {'relurec s':>10} {'fixed-λ err':>12} {'fixed-λ s':>10} {'sklearn err':>12} {'sklearn s':>10} {'OLS err':>9} {'sk ~OLS':>8} {'sk maxit':>8} {'time ratio':>10}")
    for seed in parse_seeds(args.seeds):
        data = os.path.join(work, f"rob{seed}.npz")
        subprocess.run([exe, "gen", "robust", "--d", str(args.d), "--k", str(args.k), "--n", str(args.n), "--s", str(args.s),
                        "--magnitude", str(args.magnitude), "--bias", "gaussian:0,0.5", "--seed", str(seed), "--out", data, "--quiet"],
                       check=True, stdout=subprocess.DEVNULL, env=env)
        z = np.load(data)
        A, V, C = z["A"], z["V"], z["C"]
        out = subprocess.run([exe, "recover", "latent", "--a", data, "--v", data, "--truth", data, "--bias", "gaussian:0,0.5",
                              "--out", os.path.join(work, f"C{seed}.npy"), "--json"], check=True, capture_output=True, text=True, env=env)
        rr = json.loads(out.stdout)
        Chat = np.load(os.path.join(work, f"C{seed}.npy"))
        rel_err = float(np.mean(np.linalg.norm(Chat - mu * C, axis=1)))
        rel_t = rr["seconds_per_solve"]
        fix_err, fix_t = float("nan"), float("nan")
        if args.lambda_fixed > 0:
            out = subprocess.run([exe, "recover", "latent", "--a", data, "--v", data, "--lambda", str(args.lambda_fixed),
                                  "--out", os.path.join(work, f"Cf{seed}.npy"), "--json"], check=True, capture_output=True, text=True, env=env)
            fix_t = json.loads(out.stdout)["seconds_per_solve"]
            fix_err = float(np.mean(np.linalg.norm(np.load(os.path.join(work, f"Cf{seed}.npy")) - mu * C, axis=1)))
        sk_err, sk_t, ols_err, near_ols, maxit = [], [], [], 0, 0
        for i in range(args.n):
            v = V[i]
            ols = np.linalg.lstsq(A, v, rcond=None)[0]
            ols_err.append(np.linalg.norm(ols - mu * C[i]))
            h = HuberRegressor(epsilon=1.35, alpha=0.0, fit_intercept=False, max_iter=args.max_iter)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                t0 = time.perf_counter()
                h.fit(A, v)
                sk_t.append(time.perf_counter() - t0)
            if any(issubclass(w.category, ConvergenceWarning) for w in caught) or h.n_iter_ >= args.max_iter:
                maxit += 1
            sk_err.append(np.linalg.norm(h.coef_ - mu * C[i]))
            if np.linalg.norm(h.coef_ - ols) <= 0.01 * np.linalg.norm(ols):
                near_ols += 1
        row = dict(seed=seed, relurec_err=rel_err, relurec_s=rel_t, sklearn_err=float(np.mean(sk_err)),
                   sklearn_s=float(np.median(sk_t)), ols_err=float(np.mean(ols_err)), sklearn_near_ols=near_ols,
                   sklearn_maxiter=maxit, relurec_certified=rr["all_certified"], n=args.n,
                   relurec_fixed_err=fix_err, relurec_fixed_s=fix_t)
        rows.append(row)
        print(f"{seed:>4} {rel_err:>12.4f} {rel_t:>10.4f} {fix_err:>12.4f} {fix_t:>10.4f} {row['sklearn_err']:>12.4f} {row['sklearn_s']:>10.4f} {row['ols_err']:>9.4f} "
              f"{near_ols:>5}/{args.n} {maxit:>5}/{args.n} {row['sklearn_s'] / rel_t:>10.1f}")
    med = lambda key: float(np.median([r[key] for r in rows]))
    print(f"median: relurec error {med('relurec_err'):.4f} in {med('relurec_s'):.4f} s/solve (MAD threshold), "
          f"{med('relurec_fixed_err'):.4f} in {med('relurec_fixed_s'):.4f} s/solve (fixed lambda); "
          f"sklearn error {med('sklearn_err'):.4f} in {med('sklearn_s'):.4f} s/fit; "
          f"sklearn/relurec time {med('sklearn_s') / med('relurec_s'):.1f}x; "
          f"relurec KKT-certified on every seed: {all(r['relurec_certified'] for r in rows)}")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
