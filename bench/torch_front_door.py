#!/usr/bin/python3
"""PyTorch networks as users have them, through `relurec learn` with no flag.

For each seed and architecture this script
  1. builds nn.Sequential(nn.Linear(d, k), nn.ReLU(), nn.Linear(k, m)) with
     PyTorch's default initialisation (biases on both layers), seeded with
     torch.manual_seed(seed), in float64;
  2. queries it on n standard Gaussian inputs and saves X and Y with
     numpy.savez (float32 with --float32: both arrays cast, the teacher's
     outputs computed in float64 first);
  3. runs `relurec learn --data q.npz --out m.safetensors --json` (nothing
     else: the learner, the width and the biases come from the data);
  4. loads m.safetensors into the same nn.Sequential with
     load_state_dict(strict=True) and compares its outputs with the teacher's
     on 10 000 fresh inputs (max |difference| / max |teacher output|);
  5. compares the parameters up to permutation and positive scaling of the
     hidden units: each unit's (w_i, b_i) scaled to ‖w_i‖ = 1 with the scale
     moved into column i of the output weight, units matched by cosine, the
     largest error over W, b, A and c relative to each tensor's largest entry.

Prints a table per seed and a summary. Exit status 0 when every run is
within the tolerances (1e-9 for parameters and 1e-12 for outputs in float64;
1e-6 and 1e-6 with --float32).

    /usr/bin/python3 bench/torch_front_door.py                 # 10 seeds, 20-5-8 and 30-10-1, n = 2e5
    /usr/bin/python3 bench/torch_front_door.py --float32 --seeds 3
    /usr/bin/python3 bench/torch_front_door.py --both --seeds 5      # float64 vs float32 time, same run
    /usr/bin/python3 bench/torch_front_door.py --both --threads 1   # ... single-threaded, with CPU times
    /usr/bin/python3 bench/torch_front_door.py --adam --threads 1 --seeds 5 --arch 20,5,8 --arch 50,10,20 --arch 30,10,1

With --adam, the same data also train the student a PyTorch user would
write, nn.Sequential(nn.Linear(d, k), nn.ReLU(), nn.Linear(k, m)) in float64
with Adam (lr 1e-2, batches of 1000, ReduceLROnPlateau; the settings and
stopping rules of bench/twolayer_vs_pytorch.py), seeded like the teacher's
draw but with seed + 1000; its training loop's time and output error are
printed beside relurec's fit, with the ratio Adam time / relurec fit time
and its median over the seeds. --threads 1 makes both sides
single-threaded.

With --both, the fit's wall time (from relurec's JSON) and the whole process's
CPU time (user + system, from getrusage) are compared per seed; on a machine
shared with other work the CPU time is the steadier of the two.

Needs python3-torch and python3-numpy (Debian), and builds ./relurec with go.
"""

import argparse
import json
import os
import resource
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
from torch import nn


def read_safetensors(path):
    """The tensors of a safetensors file as float64 torch tensors."""
    with open(path, "rb") as f:
        (hlen,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(hlen))
        data = f.read()
    dtypes = {"F64": np.float64, "F32": np.float32}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        arr = np.frombuffer(data[a:b], dtype=dtypes[info["dtype"]]).reshape(info["shape"])
        out[name] = torch.from_numpy(arr.astype(np.float64))
    return out


def normalized(w, b, a):
    """Units scaled to ‖w_i‖ = 1 (the scale moved into a's columns)."""
    s = np.linalg.norm(w, axis=1)
    return w / s[:, None], b / s, a * s[None, :]


def param_error(teacher, student):
    """Largest relative parameter error up to permutation and positive scaling."""
    def bias(state, key, rows):
        return np.asarray(state[key]) if key in state else np.zeros(rows)
    k, m = teacher["0.weight"].shape[0], teacher["2.weight"].shape[0]
    tw, tb, ta = normalized(teacher["0.weight"], bias(teacher, "0.bias", k), teacher["2.weight"])
    sw, sb, sa = normalized(student["0.weight"], bias(student, "0.bias", student["0.weight"].shape[0]), student["2.weight"])
    if sw.shape != tw.shape:
        return float("inf")
    cos = tw @ sw.T
    order = np.argmax(cos, axis=1)
    if len(set(order)) != len(order):
        return float("inf")
    sw, sb, sa = sw[order], sb[order], sa[:, order]
    errs = [
        np.abs(tw - sw).max() / np.abs(tw).max(),
        np.abs(tb - sb).max() / max(np.abs(tb).max(), 1e-300),
        np.abs(ta - sa).max() / np.abs(ta).max(),
        np.abs(bias(teacher, "2.bias", m) - bias(student, "2.bias", m)).max() / max(np.abs(bias(teacher, "2.bias", m)).max(), 1e-300),
    ]
    return float(max(errs))


# ENV is relurec's environment: GOMAXPROCS set by --threads.
ENV = dict(os.environ)


def child_cpu():
    """CPU seconds (user + system) used so far by finished child processes."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# BIAS is False with --no-bias: teachers and students without biases.
BIAS = True


def sequential(d, k, m):
    return nn.Sequential(nn.Linear(d, k, bias=BIAS), nn.ReLU(), nn.Linear(k, m, bias=BIAS)).double()


def run(exe, tmp, d, k, m, n, seed, f32):
    torch.manual_seed(seed)
    teacher = sequential(d, k, m)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    with torch.no_grad():
        y = teacher(torch.from_numpy(x)).numpy()
    dt = np.float32 if f32 else np.float64
    data = os.path.join(tmp, "q.npz")
    model = os.path.join(tmp, "m.safetensors")
    np.savez(data, X=x.astype(dt), Y=y.astype(dt))
    t0, c0 = time.perf_counter(), child_cpu()
    p = subprocess.run([exe, "learn", "--data", data, "--out", model, "--json"], capture_output=True, text=True, env=ENV)
    wall, cpu = time.perf_counter() - t0, child_cpu() - c0
    if p.returncode != 0:
        return {"seed": seed, "error": p.stderr.strip()}
    res = json.loads(p.stdout)
    student = sequential(d, k, m)
    state = read_safetensors(model)
    try:
        student.load_state_dict(state, strict=True)
    except RuntimeError as e:
        return {"seed": seed, "error": "load_state_dict: %s" % str(e).splitlines()[0], "learner": res.get("learner", {}).get("learner")}
    x2 = torch.from_numpy(np.random.default_rng(seed + 10**6).standard_normal((10000, d)))
    with torch.no_grad():
        yt, ys = teacher(x2), student(x2)
    out_err = float((yt - ys).abs().max() / yt.abs().max())
    tstate = {k_: v.detach().numpy() for k_, v in teacher.state_dict().items()}
    sstate = {k_: v.numpy() for k_, v in state.items()}
    return {
        "_data": (x, y, teacher, x2, yt),
        "seed": seed,
        "learner": res["learner"]["learner"],
        "hidden": res["hidden"],
        "route": res["route"],
        "residual": res["certificate"]["residual"],
        "param_err": param_error(tstate, sstate),
        "out_err": out_err,
        "fit_s": res["timings"]["fit"],
        "wall_s": wall,
        "cpu_s": cpu,
    }


def adam(x, y, k, seed, teacher, x2, yt):
    """Adam with biases on (x, y) (bench/twolayer_vs_pytorch.py's trainer and
    defaults); returns its training loop's wall and CPU seconds, stop reason
    and output error on the fresh inputs x2 against the teacher's outputs
    yt."""
    import types
    from twolayer_vs_pytorch import train_torch
    a = types.SimpleNamespace(float32=False, lr=1e-2, batch=1000, patience=None, min_lr=1e-6,
                              steps=3000, epochs=100, tol=1e-28)
    state, info = train_torch(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64), k, seed + 1000, a, bias=BIAS)
    student = sequential(x.shape[1], k, y.shape[1])
    student.load_state_dict(state, strict=True)
    with torch.no_grad():
        ys = student(x2)
    return info["seconds"], info["cpu_seconds"], info["stop"], float((yt - ys).abs().max() / yt.abs().max())


def compare_adam(args, archs):
    """relurec's fit and Adam's training loop on the same data, per seed."""
    if not os.path.exists(args.relurec):
        subprocess.run(["go", "build", "-o", args.relurec, "./cmd/relurec"], check=True)
    torch.set_num_threads(args.threads or torch.get_num_threads())
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for d, k, m in archs:
            print("# nn.Sequential(Linear(%d, %d), ReLU(), Linear(%d, %d)), n = %d, %s data: relurec learn vs Adam (float64, with biases)" % (
                d, k, k, m, args.n, "float32" if args.float32 else "float64"))
            print("%4s %15s %10s %10s %8s %9s %10s %8s %7s %8s %9s %7s" % ("seed", "route", "param_err", "out_err", "fit_s", "adam_s", "adam_err", "stop", "t/fit", "cpu_s", "adam_cpu", "c/c"))
            ratios, cpus = [], []
            for seed in range(args.seeds):
                r = run(args.relurec, tmp, d, k, m, args.n, seed, args.float32)
                if "error" in r:
                    ok = False
                    print("%4d FAILED: %s" % (seed, r["error"]))
                    continue
                x, y, teacher, x2, yt = r.pop("_data")
                secs, cpu, stop, aerr = adam(x, y, k, seed, teacher, x2, yt)
                ratios.append(secs / r["fit_s"])
                cpus.append(cpu / r["cpu_s"])
                ok = ok and r["out_err"] <= 1e-9 and r["hidden"] == k
                print("%4d %15s %10.1e %10.1e %8.2f %9.2f %10.1e %8s %7.1f %8.2f %9.2f %7.1f" % (
                    seed, r["route"], r["param_err"], r["out_err"], r["fit_s"], secs, aerr, stop, ratios[-1], r["cpu_s"], cpu, cpus[-1]))
            ratios.sort()
            cpus.sort()
            if ratios:
                print("# Adam's training loop / relurec's fit, wall time: median %.1f (range %.1f-%.1f); Adam's loop / relurec's whole process, CPU time: median %.1f (range %.1f-%.1f)\n" % (
                    ratios[len(ratios) // 2], ratios[0], ratios[-1], cpus[len(cpus) // 2], cpus[0], cpus[-1]))
    return 0 if ok else 1


def compare_dtypes(args, archs):
    """float64 and float32 side by side, alternating per seed."""
    if not os.path.exists(args.relurec):
        subprocess.run(["go", "build", "-o", args.relurec, "./cmd/relurec"], check=True)
    torch.set_num_threads(1)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for d, k, m in archs:
            print("# nn.Sequential(Linear(%d, %d), ReLU(), Linear(%d, %d)), n = %d: float64 vs float32" % (d, k, k, m, args.n))
            print("%4s %10s %10s %10s %10s %8s %8s %7s %8s %8s %7s" % ("seed", "err64", "err32", "resid64", "resid32", "fit64_s", "fit32_s", "ratio", "cpu64_s", "cpu32_s", "ratio"))
            ratios, cpus = [], []
            for seed in range(args.seeds):
                a = run(args.relurec, tmp, d, k, m, args.n, seed, False)
                b = run(args.relurec, tmp, d, k, m, args.n, seed, True)
                a.pop("_data", None)
                b.pop("_data", None)
                if "error" in a or "error" in b:
                    ok = False
                    print("%4d FAILED: %s" % (seed, a.get("error") or b.get("error")))
                    continue
                ratios.append(b["fit_s"] / a["fit_s"])
                cpus.append(b["cpu_s"] / a["cpu_s"])
                ok = ok and a["param_err"] <= 1e-9 and b["param_err"] <= 1e-6 and a["hidden"] == k and b["hidden"] == k
                print("%4d %10.1e %10.1e %10.1e %10.1e %8.2f %8.2f %7.2f %8.2f %8.2f %7.2f" % (
                    seed, a["param_err"], b["param_err"], a["residual"], b["residual"], a["fit_s"], b["fit_s"], ratios[-1],
                    a["cpu_s"], b["cpu_s"], cpus[-1]))
            ratios.sort()
            cpus.sort()
            if ratios:
                print("# float32/float64: fit wall time median %.2f (range %.2f-%.2f); whole-process CPU time median %.2f (range %.2f-%.2f)\n" % (
                    ratios[len(ratios) // 2], ratios[0], ratios[-1], cpus[len(cpus) // 2], cpus[0], cpus[-1]))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--n", type=int, default=200000)
    ap.add_argument("--float32", action="store_true", help="save X and Y as float32")
    ap.add_argument("--both", action="store_true", help="per seed, float64 then float32 on the same network and inputs; prints the fit-time ratio")
    ap.add_argument("--no-bias", action="store_true", help="teachers (and Adam's student) without biases: nn.Linear(..., bias=False)")
    ap.add_argument("--adam", action="store_true", help="also train Adam (float64, with biases) on the same data and print the ratio of its training time to relurec's fit")
    ap.add_argument("--arch", action="append", help="d,k,m (default 20,5,8 and 30,10,1)")
    ap.add_argument("--relurec", default="./relurec", help="the relurec binary (built with go build when missing)")
    ap.add_argument("--json-out", help="also write the rows as JSON here")
    ap.add_argument("--threads", type=int, help="GOMAXPROCS for relurec (default: all cores); 1 with CPU times is the fair measure on a busy machine")
    args = ap.parse_args()
    global BIAS
    BIAS = not args.no_bias
    if args.threads:
        ENV["GOMAXPROCS"] = str(args.threads)
    archs = [tuple(int(v) for v in a.split(",")) for a in (args.arch or ["20,5,8", "30,10,1"])]
    if args.both:
        sys.exit(compare_dtypes(args, archs))
    if args.adam:
        sys.exit(compare_adam(args, archs))
    if not os.path.exists(args.relurec):
        subprocess.run(["go", "build", "-o", args.relurec, "./cmd/relurec"], check=True)
    ptol, otol = (1e-6, 1e-6) if args.float32 else (1e-9, 1e-12)
    torch.set_num_threads(1)
    rows, ok = [], True
    with tempfile.TemporaryDirectory() as tmp:
        for d, k, m in archs:
            print("# nn.Sequential(Linear(%d, %d), ReLU(), Linear(%d, %d)), n = %d, %s" % (d, k, k, m, args.n, "float32" if args.float32 else "float64"))
            print("%4s %9s %6s %15s %10s %10s %10s %7s %7s" % ("seed", "learner", "hidden", "route", "residual", "param_err", "out_err", "fit_s", "wall_s"))
            for seed in range(args.seeds):
                r = run(args.relurec, tmp, d, k, m, args.n, seed, args.float32)
                r.pop("_data", None)
                r["arch"] = [d, k, m]
                rows.append(r)
                if "error" in r:
                    ok = False
                    print("%4d FAILED: %s" % (seed, r["error"]))
                    continue
                good = r["param_err"] <= ptol and r["out_err"] <= otol and r["hidden"] == k
                ok = ok and good
                print("%4d %9s %6d %15s %10.1e %10.1e %10.1e %7.2f %7.2f%s" % (
                    seed, r["learner"], r["hidden"], r["route"], r["residual"], r["param_err"], r["out_err"], r["fit_s"], r["wall_s"], "" if good else "  <-- outside tolerance"))
            mine = [r for r in rows if r["arch"] == [d, k, m]]
            good = [r for r in mine if "error" not in r and r["param_err"] <= ptol and r["out_err"] <= otol and r["hidden"] == k]
            fits = sorted(r["fit_s"] for r in mine if "fit_s" in r)
            print("# %d/%d within %.0e (parameters) and %.0e (outputs); median fit %.2f s\n" % (
                len(good), len(mine), ptol, otol, fits[len(fits) // 2] if fits else float("nan")))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(rows, f, indent=1)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
