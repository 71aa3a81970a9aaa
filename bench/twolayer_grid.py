#!/usr/bin/python3
"""relurec vs Adam in PyTorch over a grid of two-layer problem sizes.

For every cell (d, k, m, n) of the grid and every seed this script generates
one noiseless instance with `relurec gen twolayer` and then, for each thread
count in --threads (default 1, then 2), runs both learners on it exactly as
bench/twolayer_vs_pytorch.py does (it imports that script's functions):

  * `relurec learn twolayer --hidden K` with GOMAXPROCS = threads,
  * Adam on nn.Sequential(Linear(d,k,bias=False), ReLU(), Linear(k,m,bias=False))
    with torch.set_num_threads(threads): float64, lr 1e-2, minibatches of
    1000, ReduceLROnPlateau, stopping at the float64 floor, on a plateau at
    min_lr, or after 100 epochs (same flags and defaults as the pair script),

and scores both models with the same `relurec eval --json` against the
teacher (max relative weight error up to permutation and positive scaling).

Per cell and thread count it prints one table row:
  relurec: median in-process fit time, median wall time of `relurec learn`,
           worst weight error, fraction exact (error <= 1e-9), and how many
           seeds failed (no certified network returned);
  Adam:    median training time, fraction <= 1e-9, fraction <= 1e-4, and the
           number of "wrong network" seeds: error > 1e-4, i.e. Adam ended at a
           different network (a spurious stationary point or a misplaced unit),
           not merely short of float64 precision;
  ratio:   median over seeds of Adam train time / relurec wall time;
  load:    range of the 1-minute load average seen after each seed.
Timing follows the pair script (relurec: whole process, start-up and .npz
read included; Adam: the training loop only, data already in memory).

relurec's exact route needs n >= max(2000, 30*k, 4*d) (its zero-set start);
its moment starts, tried when the first starts miss units, need
n >= max(20*d, 200*k^2, 1000) (docs/twolayer.md). --cond-v sets V's condition
number (gen's --cond-v; default Gaussian rows). A cell where relurec fails is
reported as such, not dropped.

Cells are "d,k,m,n" or "d,k,m,n@S" (S seeds for that cell instead of
--seeds); n accepts 1e5-style numbers. The default grid is

    20,5,8,1e5  20,10,10,1e5  50,10,20,1e5  50,20,20,2e5  100,20,50,2e5
    100,50,50,5e5@1  200,50,50,5e5@1

with 3 seeds per cell except one at k = 50, where one relurec fit takes
about 4 CPU-minutes (see docs/twolayer-vs-pytorch.md#grid).

Run from the repository root with /usr/bin/python3 (Debian python3-torch,
python3-numpy, and python3-matplotlib for the plot):

    go build -o /tmp/relurec-bench ./cmd/relurec
    /usr/bin/python3 bench/twolayer_grid.py --relurec /tmp/relurec-bench \\
        --json-out grid.json --plot twolayer-vs-pytorch-grid.png
    /usr/bin/python3 bench/twolayer_grid.py --cells 20,5,8,2e4 20,10,10,2e4 --seeds 2   # a quick check
    /usr/bin/python3 bench/twolayer_grid.py --relurec /tmp/relurec-bench --wide --markdown  # k = 100 and 200
    /usr/bin/python3 bench/twolayer_grid.py --from-json grid.json --plot grid.png       # table + plot again

--json-out is rewritten after every seed, so an interrupted run keeps what it
measured. The plot needs matplotlib; without it the script says so and skips
it. Exit status 0 when every step ran (whatever the errors were), 1 when a
relurec command failed.
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import twolayer_vs_pytorch as pair  # noqa: E402

REPO = pair.REPO
DEFAULT_CELLS = ["20,5,8,1e5", "20,10,10,1e5", "50,10,20,1e5", "50,20,20,2e5", "100,20,50,2e5",
                 "100,50,50,5e5@1", "200,50,50,5e5@1"]
# --wide: widths 100 and 200 from the rows Adam needs, V of condition
# number 3 (Gaussian rows are ill-conditioned at d = k = 100), one thread
# on both sides.
WIDE_CELLS = ["100,100,100,2e5", "200,200,200,4e5"]
EXACT, NEAR = 1e-9, 1e-4


def parse_cell(spec, default_seeds):
    seeds = default_seeds
    if "@" in spec:
        spec, s = spec.split("@", 1)
        seeds = pair.parse_seeds(s)
    parts = spec.split(",")
    if len(parts) != 4:
        raise argparse.ArgumentTypeError(f"cell {spec!r}: want d,k,m,n")
    d, k, m, n = (int(float(x)) for x in parts)
    if not (1 <= k <= m and k <= d):
        raise argparse.ArgumentTypeError(f"cell {spec!r}: need k <= m and k <= d")
    return {"d": d, "k": k, "m": m, "n": n, "seeds": seeds}


def cell_label(c):
    n = c["n"]
    ns = f"{n / 10 ** int(np.log10(n)):g}e{int(np.log10(n))}" if n >= 1000 else str(n)
    return f"d={c['d']} k={c['k']} m={c['m']} n={ns}"


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarize(rows):
    """One summary per (cell, threads), in the order first seen."""
    groups = {}
    for r in rows:
        key = (tuple(r["cell"][x] for x in ("d", "k", "m", "n")), r["threads"])
        groups.setdefault(key, []).append(r)
    out = []
    for (cell, threads), rs in groups.items():
        cell = dict(zip(("d", "k", "m", "n"), cell))
        rerr = [r["relurec"]["err"] for r in rs]
        terr = [r["torch"]["err"] for r in rs]
        ok = [e for e in rerr if e is not None]
        ratios = [r["torch"]["seconds"] / r["relurec"]["wall"] for r in rs if r["relurec"]["wall"]]
        loads = [r["load"] for r in rs]
        out.append({
            "cell": cell, "threads": threads, "seeds": len(rs),
            "relurec_median_fit_s": median([r["relurec"]["fit"] for r in rs]),
            "relurec_median_wall_s": median([r["relurec"]["wall"] for r in rs]),
            "relurec_worst_err": max(ok) if ok else None,
            "relurec_exact": sum(1 for e in ok if e <= EXACT),
            "relurec_failed": sum(1 for e in rerr if e is None),
            "torch_median_s": median([r["torch"]["seconds"] for r in rs]),
            "torch_le_1e-9": sum(1 for e in terr if e is not None and e <= EXACT),
            "torch_le_1e-4": sum(1 for e in terr if e is not None and e <= NEAR),
            "torch_wrong": sum(1 for e in terr if e is None or e > NEAR),
            "torch_wrong_seeds": [r["seed"] for r in rs if r["torch"]["err"] is None or r["torch"]["err"] > NEAR],
            "torch_worst_err": max((e for e in terr if e is not None), default=None),
            "median_ratio_torch_over_relurec": median(ratios),
            "load_min": min(loads), "load_max": max(loads),
        })
    return out


def f2(x, fmt):
    return "n/a" if x is None else format(x, fmt)


def print_table(summary, markdown=False):
    cols = ["cell", "thr", "seeds", "relurec fit s", "relurec wall s", "relurec worst err", "relurec exact",
            "Adam train s", "Adam ≤1e-9", "Adam ≤1e-4", "Adam wrong net", "Adam/relurec time", "load"]
    lines = []
    for s in summary:
        n = s["seeds"]
        rex = f"{s['relurec_exact']}/{n}" + (f" ({s['relurec_failed']} failed)" if s["relurec_failed"] else "")
        wrong = f"{s['torch_wrong']}/{n}"
        if s["torch_wrong"]:
            wrong += " (seed " + ",".join(str(x) for x in s["torch_wrong_seeds"]) + ")"
        lines.append([cell_label(s["cell"]), str(s["threads"]), str(n),
                      f2(s["relurec_median_fit_s"], ".2f"), f2(s["relurec_median_wall_s"], ".2f"),
                      f2(s["relurec_worst_err"], ".1e"), rex,
                      f2(s["torch_median_s"], ".2f"), f"{s['torch_le_1e-9']}/{n}", f"{s['torch_le_1e-4']}/{n}",
                      wrong, f2(s["median_ratio_torch_over_relurec"], ".2f") + "×",
                      f"{s['load_min']:.1f}–{s['load_max']:.1f}"])
    if markdown:
        print("| " + " | ".join(cols) + " |")
        print("|" + "|".join("---" if i < 1 else "---:" for i in range(len(cols))) + "|")
        for l in lines:
            print("| " + " | ".join(l) + " |")
        return
    w = [max(len(c), *(len(l[i]) for l in lines)) for i, c in enumerate(cols)]
    print("  ".join(c.rjust(w[i]) for i, c in enumerate(cols)))
    print("-" * (sum(w) + 2 * (len(w) - 1)))
    for l in lines:
        print("  ".join(x.rjust(w[i]) for i, x in enumerate(l)))


def plot(rows, summary, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"no plot: matplotlib is not available to {sys.executable} ({e}); "
              f"install python3-matplotlib or run with /usr/bin/python3", file=sys.stderr)
        return
    cells = []
    for s in summary:
        if s["cell"] not in cells:
            cells.append(s["cell"])
    threads = sorted({s["threads"] for s in summary})
    xi = {json.dumps(c, sort_keys=True): i for i, c in enumerate(cells)}
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(11, 8.5), sharex=True)
    off = {t: (j - (len(threads) - 1) / 2) * 0.3 for j, t in enumerate(threads)}
    style = {"relurec": ("tab:blue", "o"), "torch": ("tab:orange", "s")}
    seen = set()
    for r in rows:
        x = xi[json.dumps(r["cell"], sort_keys=True)] + off[r["threads"]]
        for side, tkey in (("relurec", "wall"), ("torch", "seconds")):
            col, mk = style[side]
            t, e = r[side].get(tkey), r[side].get("err")
            dx = -0.04 if side == "relurec" else 0.04
            fill = col if r["threads"] == threads[0] else "none"
            lab = f"{'relurec (wall)' if side == 'relurec' else 'Adam (train)'}, {r['threads']} thread" + \
                  ("s" if r["threads"] > 1 else "")
            kw = dict(color=col, marker=mk, markerfacecolor=fill, linestyle="none", markersize=6)
            if lab not in seen:
                kw["label"] = lab
                seen.add(lab)
            bad = e is None or e > NEAR
            if t is not None:
                ax1.plot(x + dx, t, **kw)
                if bad:
                    ax1.plot(x + dx, t, marker="x", color="red", markersize=12, linestyle="none",
                             label=None if "bad" in seen else "wrong network (err > 1e-4) or failed")
                    seen.add("bad")
            ax2.plot(x + dx, e if e is not None else 10.0, **{k: v for k, v in kw.items() if k != "label"})
            if bad:
                ax2.plot(x + dx, e if e is not None else 10.0, marker="x", color="red", markersize=12,
                         linestyle="none")
    ax1.set_yscale("log")
    ax1.set_ylabel("time per seed (s)")
    ax1.set_title("relurec (learn twolayer, wall) vs Adam in PyTorch (training loop), noiseless Gaussian data")
    ax1.legend(fontsize=8, ncol=2, loc="best")
    ax1.grid(True, which="both", alpha=0.3)
    ax2.set_yscale("log")
    for y, txt in ((EXACT, "1e-9"), (NEAR, "1e-4")):
        ax2.axhline(y, color="gray", linestyle="--", linewidth=0.8)
        ax2.text(len(cells) - 0.5, y, txt, va="bottom", ha="right", fontsize=8, color="gray")
    ax2.set_ylabel("max relative weight error")
    ax2.grid(True, which="both", alpha=0.3)
    ax2.set_xticks(range(len(cells)))
    ax2.set_xticklabels([cell_label(c).replace(" n=", "\nn=") for c in cells], fontsize=8)
    ax2.set_xlim(-0.6, len(cells) - 0.4)
    fig.tight_layout()
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=110)
    os.replace(tmp, path)
    print(f"plot written to {path}")


def write_json(path, payload):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(payload, f, indent=1)
    os.replace(tmp, path)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="See the module docstring (head of this file) for the full settings.")
    p.add_argument("--wide", action="store_true",
                   help="the wide cells %s with --cond-v 3 and --threads 1 (flags given override)" % " ".join(WIDE_CELLS))
    p.add_argument("--cells", nargs="+", default=None,
                   help="grid cells d,k,m,n[@seeds] (default: %(default)s)")
    p.add_argument("--cond-v", type=float, default=None,
                   help="condition number of V after row normalisation (relurec gen --cond-v; default 0 = Gaussian rows)")
    p.add_argument("--seeds", default="3", help="seeds per cell without @: N (1..N), A-B or a list (default 3)")
    p.add_argument("--threads", default=None, help="thread counts, run in this order per seed (default 1,2)")
    p.add_argument("--relurec", help="path to a built relurec binary (default: go build into the work dir)")
    p.add_argument("--epochs", type=int, default=100, help="torch budget in epochs with minibatches (default 100)")
    p.add_argument("--steps", type=int, default=3000, help="torch budget in steps with --batch 0 (default 3000)")
    p.add_argument("--batch", type=int, default=1000, help="minibatch rows; 0 = full batch (default 1000)")
    p.add_argument("--lr", type=float, default=1e-2, help="Adam learning rate (default 1e-2)")
    p.add_argument("--min-lr", type=float, default=1e-6, help="ReduceLROnPlateau min_lr (default 1e-6)")
    p.add_argument("--patience", type=int, help="ReduceLROnPlateau patience (default 3 epochs, or 100 steps)")
    p.add_argument("--tol", type=float, default=1e-28, help="stop at relative training MSE <= tol (default 1e-28)")
    p.add_argument("--float32", action="store_true", help="train in float32 (default float64)")
    p.add_argument("--work", help="keep the generated files in this directory (default: a temporary one)")
    p.add_argument("--json-out", help="write all per-seed rows, the per-cell summary and the environment here "
                                      "(rewritten after every seed)")
    p.add_argument("--plot", default="twolayer-vs-pytorch-grid.png",
                   help="plot file (default %(default)s; empty string: no plot)")
    p.add_argument("--markdown", action="store_true", help="print the summary table as Markdown too")
    p.add_argument("--from-json", help="do not run: print the table and plot from an earlier --json-out file")
    a = p.parse_args()
    if a.cells is None:
        a.cells = WIDE_CELLS if a.wide else DEFAULT_CELLS
    if a.cond_v is None:
        a.cond_v = 3.0 if a.wide else 0.0
    if a.threads is None:
        a.threads = "1" if a.wide else "1,2"

    if a.from_json:
        with open(a.from_json) as f:
            old = json.load(f)
        summary = summarize(old["rows"])
        print_table(summary)
        if a.markdown:
            print()
            print_table(summary, markdown=True)
        if a.plot:
            plot(old["rows"], summary, a.plot)
        return

    default_seeds = pair.parse_seeds(a.seeds)
    cells = [parse_cell(c, default_seeds) for c in a.cells]
    threads = [int(t) for t in a.threads.split(",") if t]

    tmp, work, binary = pair.work_and_binary(a.work, a.relurec, "twolayer_grid_")
    env = pair.environment(binary)
    dtype = "float32" if a.float32 else "float64"
    mode = "full batch" if a.batch <= 0 else f"minibatch {a.batch}"
    print(f"relurec vs PyTorch Adam over {len(cells)} cells, threads {threads} (GOMAXPROCS = torch threads), "
          "noiseless Gaussian inputs")
    print(f"torch: {dtype}, Adam lr={a.lr}, {mode}, ReduceLROnPlateau(0.5, min_lr={a.min_lr}), "
          f"budget {a.steps if a.batch <= 0 else a.epochs} {'steps' if a.batch <= 0 else 'epochs'}, tol {a.tol:g}")
    print("env: " + ", ".join(f"{k}={v}" for k, v in env.items()))
    print()
    head = (f"{'cell':>24} {'seed':>4} {'thr':>3} | {'relurec err':>11} {'wall s':>7} {'fit s':>7} | "
            f"{'torch err':>9} {'train s':>7} {'epochs':>6} {'stop':>8} {'rel MSE':>7} | {'t/r':>6} {'load':>4}")
    print(head)
    print("-" * len(head))

    rows, failed = [], False
    payload = {"argv": sys.argv, "args": vars(a), "env": env, "rows": rows, "summary": []}
    for c in cells:
        cell = {k: c[k] for k in ("d", "k", "m", "n")}
        for s in c["seeds"]:
            try:
                data, teacher = pair.gen_instance(binary, work, s, c["d"], c["k"], c["m"], c["n"], a.cond_v)
            except pair.RelurecError as e:
                failed = True
                print(f"{cell_label(c)} seed {s}: {e}", file=sys.stderr)
                continue
            z = np.load(data)
            X, Y = z["X"], z["Y"]
            for t in threads:
                row, ok = pair.fit_and_score(binary, work, s, c["k"], data, teacher, X, Y, a, t)
                failed = failed or not ok
                row["cell"] = cell
                rows.append(row)
                r, q = row["relurec"], row["torch"]
                ratio = q["seconds"] / r["wall"] if r["wall"] else float("nan")
                nan = float("nan")
                print(f"{cell_label(c):>24} {s:>4} {t:>3} | {pair.fmt_err(r['err']):>11} {r['wall'] or nan:7.2f} "
                      f"{r['fit'] or nan:7.2f} | {pair.fmt_err(q['err']):>9} {q['seconds']:7.2f} "
                      f"{q['rounds']:>6} {q['stop']:>8} {q['rel_mse']:7.1e} | {ratio:6.2f} {row['load']:4.1f}",
                      flush=True)
                if a.json_out:
                    payload["summary"] = summarize(rows)
                    write_json(a.json_out, payload)
            del X, Y, z
            if not a.work:
                for f in (data, teacher):
                    if os.path.exists(f):
                        os.remove(f)

    if not rows:
        sys.exit("no seed completed")
    summary = summarize(rows)
    print()
    print_table(summary)
    if a.markdown:
        print()
        print_table(summary, markdown=True)
    if a.json_out:
        payload["summary"] = summary
        write_json(a.json_out, payload)
    if a.plot:
        plot(rows, summary, a.plot)
    if tmp is not None:
        tmp.cleanup()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
