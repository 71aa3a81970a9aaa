#!/usr/bin/python3
"""relurec's provable two-layer learner side by side with Adam in PyTorch.

For each seed this script
  1. generates an instance with relurec's own generator
     (`relurec gen twolayer --d D --k K --m M --n N --seed S`, noiseless
     Gaussian inputs, teacher saved as safetensors),
  2. learns it with `relurec learn twolayer --hidden K` and measures the weight
     error with `relurec eval --json` against the teacher,
  3. trains the student a PyTorch user would write on the same X and Y,
         nn.Sequential(nn.Linear(d, k, bias=False), nn.ReLU(),
                       nn.Linear(k, m, bias=False))
     saves it as safetensors with the same keys (0.weight = V, 2.weight = U)
     and measures its weight error with the same `relurec eval --json`, so both
     sides are scored by one metric: max relative error up to permutation and
     positive scaling of the hidden units (unit rows of V, scale moved into U's
     columns, units matched by signed cosine; the larger of the worst V-row
     error and the worst relative U-column error). A small numpy
     re-implementation of that metric cross-checks eval for the student.
  4. prints a per-seed table and a summary (fraction of seeds with error
     <= 1e-9 and <= 1e-4, median error, median time, time ratio).

PyTorch baseline (defaults; each is a flag):
  * float64 weights and data (--float32 trains in float32 instead; the float32
    precision floor then limits the weight error to roughly 1e-5..1e-3).
  * PyTorch's default initialisation (kaiming-uniform, seeded with
    torch.manual_seed(seed)).
  * Adam(lr=1e-2, betas=(0.9, 0.999), eps=1e-8), MSE loss (nn.MSELoss
    convention: mean over all n*m entries).
  * Minibatches of 1000 rows, reshuffled every epoch (--batch 0 = full batch).
  * ReduceLROnPlateau on the full training MSE, checked once per epoch
    (full batch: once per step): factor 0.5, relative threshold 1e-2,
    patience 3 epochs (full batch: 100 steps), min_lr 1e-6.
  * Stops at the first of: relative training MSE (MSE / mean(Y^2)) <= 1e-28,
    i.e. the float64 floor is reached (--tol, "tol"); the learning rate is at
    min_lr and the loss has not improved by 1e-2 relative for `patience` more
    rounds ("plateau"); the budget --epochs 100 (full batch: --steps 3000) is
    spent ("budget"). --min-lr equal to --lr gives a constant learning rate.
  * torch.set_num_threads(2) (--threads), the cores of the reference machine.
    The same --threads is relurec's GOMAXPROCS (set in the environment of every
    relurec subprocess), so --threads 1 is single-threaded for both sides.
    For this tiny network 1 thread is as fast on an idle machine and far
    faster on a busy one (2 OpenMP threads competing with other jobs slowed
    training 10-20x in our runs); use --threads 1 when timing on a shared
    machine (docs/twolayer-vs-pytorch.md).
  A little tuning went into these: lr 1e-2 converges faster than PyTorch's
  default 1e-3 with no loss of reliability here, and minibatches of 1000 reach
  the float64 floor in fewer FLOPs than full-batch Adam (one epoch costs about
  one full-batch step but makes 100 updates; noiseless data means every
  per-sample gradient vanishes at the teacher, so minibatch noise does not set
  a floor).

Timing: relurec's time is the wall time of the whole `relurec learn` process
(start-up, reading the .npz, fitting, writing the model); its in-process fit
time is reported too. PyTorch's time is the training loop only (the data are
already in memory as tensors), including the per-epoch full-data loss that
drives the scheduler. The ratio t/r is PyTorch time / relurec wall time, so
any bias is against relurec; t/fit is PyTorch time / relurec's in-process fit
time (training loop against fit, the comparison the speed targets of
docs/twolayer-vs-pytorch.md are set in), summarised as its minimum, median and total over the seeds. Both run on the same machine one after the other; on
a shared machine the timings are noisy (an oversubscribed OpenMP pool can make
torch many times slower), so the script prints the load average per seed.

Run from the repository root (python3-torch and python3-numpy from Debian,
hence /usr/bin/python3):

    /usr/bin/python3 bench/twolayer_vs_pytorch.py                # 10 seeds, d=20 k=5 m=8 n=100000
    /usr/bin/python3 bench/twolayer_vs_pytorch.py --seeds 1-30 --json-out results.json
    /usr/bin/python3 bench/twolayer_vs_pytorch.py --relurec /tmp/relurec --float32

Without --relurec the binary is built with `go build ./cmd/relurec` into the
temporary work directory. Exit status 0 when every step ran (whatever the
errors were), 1 when a relurec command failed.
"""
import argparse
import itertools
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
from torch import nn

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "examples"))
from torch_roundtrip import read_safetensors, write_safetensors  # noqa: E402


class RelurecError(RuntimeError):
    pass


def parse_seeds(spec):
    """'10' -> 1..10, '3-7' -> 3..7, '1,4,9' -> those."""
    if "," in spec:
        return [int(s) for s in spec.split(",") if s]
    if "-" in spec:
        a, b = spec.split("-", 1)
        return list(range(int(a), int(b) + 1))
    return list(range(1, int(spec) + 1))


def work_and_binary(work, relurec, prefix):
    """The work directory (a temporary one, returned as tmp to keep it alive, when work is None)
    and the relurec binary's absolute path (built into the work directory when relurec is None)."""
    tmp = None
    if work:
        os.makedirs(work, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix=prefix)
        work = tmp.name
    binary = relurec
    if binary is None:
        binary = os.path.join(work, "relurec")
        r = subprocess.run(["go", "build", "-o", binary, "./cmd/relurec"], cwd=REPO, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"go build ./cmd/relurec failed:\n{r.stderr}")
    return tmp, work, os.path.abspath(binary)


def environment(binary):
    """Versions and machine, recorded with the results."""
    return {
        "relurec": subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip(),
        "go": (subprocess.run(["go", "version"], capture_output=True, text=True).stdout.strip()
               if shutil.which("go") else "n/a"),
        "torch": torch.__version__, "numpy": np.__version__, "python": platform.python_version(),
        "cpus": os.cpu_count(), "machine": platform.machine(),
    }


def run_relurec(binary, args, threads=None):
    """Run a relurec command with --json --quiet; return (parsed JSON, wall seconds).

    threads, when given, sets GOMAXPROCS for the subprocess (Go's worker threads).
    """
    cmd = [binary] + args + ["--json", "--quiet"]
    env = None
    if threads is not None:
        env = dict(os.environ, GOMAXPROCS=str(threads))
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RelurecError(f"`{' '.join(cmd)}` exited {r.returncode}\nstdout: {r.stdout.strip()}\n"
                           f"stderr: {r.stderr.strip()}")
    try:
        return json.loads(r.stdout), wall
    except json.JSONDecodeError as e:
        raise RelurecError(f"`{' '.join(cmd)}` printed no single JSON object on stdout ({e}):\n{r.stdout[:2000]}")


def numpy_weight_error(truth, est):
    """Same metric as relurec eval's max_rel_err, in numpy (brute-force matching, k <= 8)."""
    vt, ut = truth["0.weight"].double().numpy(), truth["2.weight"].double().numpy()
    ve, ue = est["0.weight"].double().numpy(), est["2.weight"].double().numpy()
    k = vt.shape[0]
    if k > 8:
        return None
    nt, ne = np.linalg.norm(vt, axis=1), np.linalg.norm(ve, axis=1)
    if np.any(ne == 0):
        return float("inf")
    vtn, ven = vt / nt[:, None], ve / ne[:, None]
    cos = vtn @ ven.T
    perms = np.array(list(itertools.permutations(range(k))))
    best = perms[np.argmax(cos[np.arange(k), perms].sum(axis=1))]
    err = 0.0
    for i, j in enumerate(best):
        err = max(err, np.linalg.norm(ven[j] - vtn[i]))
        ct, ce = ut[:, i] * nt[i], ue[:, j] * ne[j]
        nc = np.linalg.norm(ct)
        err = max(err, np.linalg.norm(ce - ct) / (nc if nc > 0 else 1.0))
    return float(err)


def train_torch(X, Y, k, seed, a, bias=False):
    """Adam on the matched student (with biases on both layers when bias);
    returns (state_dict, info)."""
    dtype = torch.float32 if a.float32 else torch.float64
    n, d = X.shape
    m = Y.shape[1]
    Xt = torch.from_numpy(X).to(dtype)
    Yt = torch.from_numpy(Y).to(dtype)
    torch.manual_seed(seed)
    net = nn.Sequential(nn.Linear(d, k, bias=bias), nn.ReLU(), nn.Linear(k, m, bias=bias)).to(dtype)
    opt = torch.optim.Adam(net.parameters(), lr=a.lr)
    full = a.batch <= 0 or a.batch >= n
    patience = a.patience if a.patience is not None else (100 if full else 3)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=patience,
                                                       threshold=1e-2, threshold_mode="rel", min_lr=a.min_lr)
    loss_fn = nn.MSELoss()
    y2 = float((Yt.double() ** 2).mean())
    rounds = a.steps if full else a.epochs
    stop, rel = "budget", float("nan")
    t0, c0 = time.perf_counter(), time.process_time()
    done = 0
    for r in range(rounds):
        if full:
            # Check the loss before stepping: Adam's step has size ~lr even
            # for a vanishing gradient, so a step taken at the floor undoes it.
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(net(Xt), Yt)
            mse = float(loss)
            done = r
            if mse / y2 <= a.tol:
                stop = "tol"
                break
            loss.backward()
            opt.step()
        else:
            perm = torch.randperm(n)
            for b in range(0, n, a.batch):
                idx = perm[b:b + a.batch]
                opt.zero_grad(set_to_none=True)
                loss = loss_fn(net(Xt[idx]), Yt[idx])
                loss.backward()
                opt.step()
            with torch.no_grad():
                mse = float(loss_fn(net(Xt), Yt))
        done = r + 1
        rel = mse / y2
        if not np.isfinite(mse):
            stop = "diverged"
            break
        if rel <= a.tol:
            stop = "tol"
            break
        sched.step(mse)
        # Plateau at the floor of the schedule: lr is at min_lr and the loss has
        # not improved for `patience` rounds (with --min-lr >= --lr, a constant lr).
        if opt.param_groups[0]["lr"] <= a.min_lr * (1 + 1e-12) and sched.num_bad_epochs >= patience:
            stop = "plateau"
            break
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    with torch.no_grad():
        mse = float(loss_fn(net(Xt), Yt))
    state = {k_: v.detach().clone() for k_, v in net.state_dict().items()}
    return state, {"seconds": seconds, "cpu_seconds": cpu, "mse": mse, "rel_mse": mse / y2, "rounds": done,
                   "unit": "steps" if full else "epochs", "stop": stop}


def gen_instance(binary, work, s, d, k, m, n, cond_v=0):
    """`relurec gen twolayer`: a noiseless instance (V with condition number cond_v after its rows
    are normalised; 0 = Gaussian rows); returns (data .npz path, teacher safetensors path)."""
    tag = f"d{d}_k{k}_m{m}_n{n}_c{cond_v:g}_{s}"
    data = os.path.join(work, f"data_{tag}.npz")
    teacher = os.path.join(work, f"teacher_{tag}.safetensors")
    run_relurec(binary, ["gen", "twolayer", "--d", str(d), "--k", str(k), "--m", str(m),
                         "--n", str(n), "--seed", str(s), "--cond-v", f"{cond_v:g}",
                         "--out", data, "--model-out", teacher])
    return data, teacher


def fit_and_score(binary, work, s, k, data, teacher, X, Y, a, threads):
    """One seed: relurec learn + eval and Adam training + eval, both limited to `threads` threads.

    Returns (row, ok); ok is False when relurec learn/eval failed (the row then has err None and
    the error text). The model files are removed unless a.work is set.
    """
    torch.set_num_threads(threads)
    row = {"seed": s, "threads": threads}
    tag = f"{s}_t{threads}"
    ok = True
    rmodel = os.path.join(work, f"relurec_{tag}.safetensors")
    try:
        learn, wall = run_relurec(binary, ["learn", "twolayer", "--data", data, "--hidden", str(k),
                                           "--seed", str(s), "--out", rmodel], threads=threads)
        ev, _ = run_relurec(binary, ["eval", "--model", rmodel, "--truth", teacher, "--data", data],
                            threads=threads)
        row["relurec"] = {"err": ev["weights"]["max_rel_err"], "wall": wall,
                          "fit": learn.get("timings", {}).get("fit"), "route": learn.get("route"),
                          "residual": ev.get("residual"), "warnings": learn.get("warnings")}
    except RelurecError as e:
        ok = False
        print(f"seed {s}: relurec learn/eval failed:\n{e}", file=sys.stderr)
        row["relurec"] = {"err": None, "wall": None, "fit": None, "error": str(e)}

    state, info = train_torch(X, Y, k, s, a)
    tmodel = os.path.join(work, f"torch_{tag}.safetensors")
    write_safetensors(tmodel, state, {"format": "pt"})
    truth_tensors, _ = read_safetensors(teacher)
    np_err = numpy_weight_error(truth_tensors, state)
    try:
        ev, _ = run_relurec(binary, ["eval", "--model", tmodel, "--truth", teacher, "--data", data],
                            threads=threads)
        info["err"] = ev["weights"]["max_rel_err"]
        info["residual"] = ev.get("residual")
    except RelurecError as e:  # e.g. a dead (all-zero) unit, which eval refuses
        info["err"], info["residual"] = np_err, None
        info["eval_error"] = str(e)
        print(f"seed {s}: relurec eval refused the torch student, using the numpy metric:\n{e}",
              file=sys.stderr)
    info["numpy_err"] = np_err
    if np_err is not None and info["err"] is not None and \
            abs(np_err - info["err"]) > 1e-6 * max(1.0, info["err"]) + 1e-12:
        print(f"seed {s}: numpy metric {np_err:.3e} disagrees with relurec eval {info['err']:.3e}",
              file=sys.stderr)
    row["torch"] = info
    row["load"] = os.getloadavg()[0]
    for f in (rmodel, tmodel):
        if not a.work and os.path.exists(f):
            os.remove(f)
    return row, ok


def fmt_err(e):
    return "   fail" if e is None else f"{e:7.1e}"


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="See the module docstring (head of this file) for the full settings.")
    p.add_argument("--seeds", default="10", help="N (seeds 1..N), A-B, or a comma list (default 10)")
    p.add_argument("--n", type=int, default=100000, help="samples (default 100000)")
    p.add_argument("--d", type=int, default=20, help="input dimension (default 20)")
    p.add_argument("--k", type=int, default=5, help="hidden units (default 5)")
    p.add_argument("--m", type=int, default=8, help="outputs (default 8)")
    p.add_argument("--relurec", help="path to a built relurec binary (default: go build into the work dir)")
    p.add_argument("--epochs", type=int, default=100, help="torch budget in epochs with minibatches (default 100)")
    p.add_argument("--steps", type=int, default=3000, help="torch budget in steps with --batch 0 (default 3000)")
    p.add_argument("--batch", type=int, default=1000, help="minibatch rows; 0 = full batch (default 1000)")
    p.add_argument("--lr", type=float, default=1e-2, help="Adam learning rate (default 1e-2)")
    p.add_argument("--min-lr", type=float, default=1e-6, help="ReduceLROnPlateau min_lr; a plateau there stops (default 1e-6; = --lr for a constant lr)")
    p.add_argument("--patience", type=int, help="ReduceLROnPlateau patience (default 3 epochs, or 100 full-batch steps)")
    p.add_argument("--tol", type=float, default=1e-28, help="stop at relative training MSE <= tol (default 1e-28)")
    p.add_argument("--float32", action="store_true", help="train in float32 (default float64)")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads and relurec's GOMAXPROCS (default 2)")
    p.add_argument("--work", help="keep the generated files in this directory (default: a temporary one)")
    p.add_argument("--json-out", help="also write all per-seed results and the environment to this JSON file")
    a = p.parse_args()
    seeds = parse_seeds(a.seeds)
    torch.set_num_threads(a.threads)

    tmp, work, binary = work_and_binary(a.work, a.relurec, "twolayer_vs_pytorch_")
    env = environment(binary)
    env["torch_threads"] = torch.get_num_threads()
    dtype = "float32" if a.float32 else "float64"
    mode = "full batch" if a.batch <= 0 else f"minibatch {a.batch}"
    print(f"relurec vs PyTorch Adam: d={a.d} k={a.k} m={a.m} n={a.n}, noiseless Gaussian inputs, {len(seeds)} seeds")
    print(f"torch: {dtype}, Adam lr={a.lr}, {mode}, ReduceLROnPlateau(0.5, min_lr={a.min_lr}), "
          f"budget {a.steps if a.batch <= 0 else a.epochs} {'steps' if a.batch <= 0 else 'epochs'}, tol {a.tol:g}")
    print("env: " + ", ".join(f"{k}={v}" for k, v in env.items()))
    print()
    head = (f"{'seed':>4} | {'relurec err':>11} {'wall s':>6} {'fit s':>5} {'resid':>7} | "
            f"{'torch err':>9} {'train s':>7} {'rounds':>6} {'stop':>8} {'rel MSE':>7} {'resid':>7} | "
            f"{'t/r':>5} {'t/fit':>5} {'load':>4}")
    print(head)
    print("-" * len(head))

    rows, failed = [], False
    for s in seeds:
        try:
            data, teacher = gen_instance(binary, work, s, a.d, a.k, a.m, a.n)
            z = np.load(data)
            row, ok = fit_and_score(binary, work, s, a.k, data, teacher, z["X"], z["Y"], a, a.threads)
            failed = failed or not ok
            if not a.work:
                for f in (data,):
                    if os.path.exists(f):
                        os.remove(f)
        except RelurecError as e:
            failed = True
            print(f"seed {s}: {e}", file=sys.stderr)
            continue
        rows.append(row)
        r, t = row["relurec"], row["torch"]
        ratio = t["seconds"] / r["wall"] if r["wall"] else float("nan")
        fit_ratio = t["seconds"] / r["fit"] if r.get("fit") else float("nan")
        rres = f"{r['residual']:7.1e}" if r.get("residual") is not None else "    n/a"
        tres = f"{t['residual']:7.1e}" if t.get("residual") is not None else "    n/a"
        print(f"{s:>4} | {fmt_err(r['err']):>11} {r['wall'] or float('nan'):6.2f} {r['fit'] or float('nan'):5.2f} "
              f"{rres} | {fmt_err(t['err']):>9} {t['seconds']:7.2f} {t['rounds']:>6} {t['stop']:>8} "
              f"{t['rel_mse']:7.1e} {tres} | {ratio:5.1f} {fit_ratio:5.2f} {row['load']:4.1f}", flush=True)

    if not rows:
        sys.exit("no seed completed")
    nseeds = len(rows)

    def frac(side, tol):
        c = sum(1 for r in rows if r[side]["err"] is not None and r[side]["err"] <= tol)
        return f"{c}/{nseeds} ({100 * c / nseeds:.0f}%)"

    rw = [r["relurec"]["wall"] for r in rows]
    tw = [r["torch"]["seconds"] for r in rows]
    ratios = [t / w for t, w in zip(tw, rw) if w]
    rf = [r["relurec"]["fit"] for r in rows]
    fit_ratios = [t / f for t, f in zip(tw, rf) if f]
    summary = {
        "relurec": {"le_1e-9": frac("relurec", 1e-9), "le_1e-4": frac("relurec", 1e-4),
                    "median_err": median([r["relurec"]["err"] for r in rows]),
                    "max_err": max((r["relurec"]["err"] for r in rows if r["relurec"]["err"] is not None),
                                   default=float("nan")),
                    "median_seconds": median(rw),
                    "median_fit_seconds": median([r["relurec"]["fit"] for r in rows])},
        "torch": {"le_1e-9": frac("torch", 1e-9), "le_1e-4": frac("torch", 1e-4),
                  "median_err": median([r["torch"]["err"] for r in rows]),
                  "max_err": max((r["torch"]["err"] for r in rows if r["torch"]["err"] is not None),
                                 default=float("nan")),
                  "median_seconds": median(tw)},
        "median_time_ratio_torch_over_relurec": median(ratios),
        "total_time_ratio_torch_over_relurec": sum(tw) / sum(rw),
        "min_fit_ratio_torch_over_relurec": min(fit_ratios, default=float("nan")),
        "median_fit_ratio_torch_over_relurec": median(fit_ratios),
        "total_fit_ratio_torch_over_relurec": sum(tw) / sum(f for f in rf if f) if any(rf) else float("nan"),
    }
    print()
    print(f"{'summary':24s} {'relurec':>16} {'pytorch adam':>16}")
    for label, key in (("weight err <= 1e-9", "le_1e-9"), ("weight err <= 1e-4", "le_1e-4")):
        print(f"{label:24s} {summary['relurec'][key]:>16} {summary['torch'][key]:>16}")
    for label, key in (("median weight err", "median_err"), ("worst weight err", "max_err")):
        print(f"{label:24s} {summary['relurec'][key]:>16.1e} {summary['torch'][key]:>16.1e}")
    print(f"{'median time (s)':24s} {summary['relurec']['median_seconds']:>16.2f} "
          f"{summary['torch']['median_seconds']:>16.2f}")
    print(f"{'  relurec fit only (s)':24s} {summary['relurec']['median_fit_seconds']:>16.2f}")
    print(f"time ratio torch / relurec: median per seed {summary['median_time_ratio_torch_over_relurec']:.1f}x, "
          f"total {summary['total_time_ratio_torch_over_relurec']:.1f}x")
    print(f"fit ratio torch train / relurec fit: min {summary['min_fit_ratio_torch_over_relurec']:.2f}x, "
          f"median {summary['median_fit_ratio_torch_over_relurec']:.2f}x, "
          f"total {summary['total_fit_ratio_torch_over_relurec']:.2f}x")

    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"argv": sys.argv, "args": vars(a), "env": env, "rows": rows, "summary": summary}, f, indent=1)
    if tmp is not None:
        tmp.cleanup()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
