#!/usr/bin/python3
"""`relurec learn twolayer` on an X/Y .npy pair larger than --max-memory,
side by side with the in-memory run on the same rows.

For each seed this script
  1. generates a noiseless instance with `relurec gen twolayer --x X.npy
     --y Y.npy` (unit-row V with condition number --cond-v, Gaussian U and
     inputs; the teacher saved as safetensors), n rows of d inputs and m
     outputs: n*(d+m)*8 bytes of float64 (8.0 GB at the defaults),
  2. learns it streamed: `relurec --max-memory BUDGET learn twolayer` (the
     pair exceeds the budget, so learn fits a random sample of rows and
     certifies on all of them, two passes over the files),
  3. learns it in memory: `relurec --max-memory 20GB learn twolayer` on the
     same files,
  4. scores both models with `relurec eval --truth teacher --json` (max
     relative weight error up to permutation and positive scaling).

Peak RSS is each process's own (os.wait4's ru_maxrss), wall time the whole
process (reading included). Both runs use GOMAXPROCS = --threads and the
files are in the page cache for both (the generator has just written them;
a first `cat` pass warms them when --no-gen reuses a directory).

Run from the repository root (needs ~2*8 GB of free disk for the defaults
plus the page cache; the in-memory run needs ~20 GB of RAM):

    go build -o /tmp/relurec-bench ./cmd/relurec
    /usr/bin/python3 bench/twolayer_stream.py --relurec /tmp/relurec-bench --work /var/tmp/stream
    /usr/bin/python3 bench/twolayer_stream.py --n 2e5 --budget 100MB --seeds 1   # a quick check

Exit status 0 when every step ran, 1 when a relurec command failed.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def run(cmd, env):
    """Runs cmd; returns (exit code, stdout, stderr, wall seconds, peak RSS bytes)."""
    began = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - began
        out.seek(0)
        err.seek(0)
        code = os.waitstatus_to_exitcode(status)
        return code, out.read().decode(), err.read().decode(), wall, ru.ru_maxrss * 1024


def fnum(s):
    return int(float(s))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--d", type=int, default=100)
    p.add_argument("--k", type=int, default=100)
    p.add_argument("--m", type=int, default=100)
    p.add_argument("--n", type=fnum, default=5_000_000, help="rows (default 5e6: 8.0 GB at d = m = 100)")
    p.add_argument("--cond-v", type=float, default=3, help="condition number of V (default 3)")
    p.add_argument("--budget", default="2GB", help="--max-memory of the streamed run (default 2GB)")
    p.add_argument("--seeds", default="1", help="seeds: N (1..N) or a comma list (default 1)")
    p.add_argument("--threads", type=int, default=2, help="GOMAXPROCS of both runs (default 2)")
    p.add_argument("--relurec", help="path to a built relurec binary (default: go build into the work dir)")
    p.add_argument("--work", help="directory for the data (default: a temporary one, removed at the end)")
    p.add_argument("--no-memory-run", action="store_true", help="skip the in-memory run")
    p.add_argument("--json-out", help="write the rows here")
    a = p.parse_args()

    seeds = [int(s) for s in a.seeds.split(",")] if "," in a.seeds else list(range(1, int(a.seeds) + 1))
    work = a.work or tempfile.mkdtemp(prefix="relurec-stream-")
    os.makedirs(work, exist_ok=True)
    exe = a.relurec
    if not exe:
        exe = os.path.join(work, "relurec")
        subprocess.run(["go", "build", "-o", exe, "./cmd/relurec"], check=True)
    env = dict(os.environ, GOMAXPROCS=str(a.threads))
    gb = a.n * (a.d + a.m) * 8 / 1e9
    print(f"d={a.d} k={a.k} m={a.m} n={a.n} ({gb:.2f} GB of float64 X and Y), cond(V)={a.cond_v}, "
          f"streamed budget {a.budget}, GOMAXPROCS={a.threads}", flush=True)
    print(f"{'seed':>4} {'run':>9} | {'exit':>4} {'wall s':>7} {'read s':>7} {'fit s':>6} {'cert s':>6} "
          f"{'peak RSS':>9} {'sample':>7} {'residual':>9} {'weight err':>10}", flush=True)
    rows, failed = [], False
    for seed in seeds:
        x, y, teacher = (os.path.join(work, f) for f in ("X.npy", "Y.npy", "teacher.safetensors"))
        code, _, err, wall, _ = run([exe, "--max-memory", "20GB", "gen", "twolayer", "--d", str(a.d), "--k", str(a.k),
                                     "--m", str(a.m), "--n", str(a.n), "--cond-v", str(a.cond_v), "--seed", str(seed),
                                     "--x", x, "--y", y, "--model-out", teacher], env)
        if code != 0:
            sys.exit(f"gen failed ({code}): {err}")
        modes = [("streamed", a.budget)] + ([] if a.no_memory_run else [("in-memory", "20GB")])
        for mode, budget in modes:
            model = os.path.join(work, f"{mode}.safetensors")
            code, out, err, wall, rss = run([exe, "--max-memory", budget, "learn", "twolayer", "--x", x, "--y", y,
                                             "--seed", str(seed), "--out", model, "--json"], env)
            row = {"seed": seed, "mode": mode, "budget": budget, "exit": code, "wall_s": wall, "peak_rss_bytes": rss,
                   "n": a.n, "d": a.d, "k": a.k, "m": a.m, "gb": gb}
            if code in (0, 3) and out.strip():
                r = json.loads(out)
                row.update(timings=r.get("timings"), certificate=r.get("certificate"),
                           sample_rows=(r.get("streamed") or {}).get("sample_rows", a.n))
            else:
                failed = True
                row["stderr"] = err.strip()[-500:]
            if code == 0:
                c2, o2, e2, _, _ = run([exe, "eval", "--model", model, "--truth", teacher, "--json"], env)
                if c2 == 0:
                    row["weight_err"] = json.loads(o2)["weights"]["max_rel_err"]
            rows.append(row)
            t = row.get("timings") or {}
            cert = row.get("certificate") or {}
            print(f"{seed:>4} {mode:>9} | {code:>4} {wall:7.1f} {t.get('read', 0):7.1f} {t.get('fit', 0):6.1f} "
                  f"{t.get('certify', 0):6.1f} {rss / 1e9:7.2f}GB {row.get('sample_rows', 0):>7} "
                  f"{cert.get('residual', float('nan')):9.1e} {row.get('weight_err', float('nan')):10.1e}", flush=True)
            if code != 0:
                print("      " + row.get("stderr", ""), flush=True)
        pair = [r for r in rows if r["seed"] == seed]
        if len(pair) == 2 and all(r["exit"] == 0 for r in pair):
            print(f"     streamed/in-memory wall time: {pair[0]['wall_s'] / pair[1]['wall_s']:.2f}", flush=True)
        if a.json_out:
            with open(a.json_out, "w") as f:
                json.dump(rows, f, indent=1)
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
