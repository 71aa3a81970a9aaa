#!/usr/bin/python3
"""`relurec compress` with its default flags on PyTorch-trained Fashion-MNIST MLPs, beside baselines.

Per seed: trains a 784-512-256-10 nn.Sequential in PyTorch (Adam, lr 1e-3, minibatches of 128,
--epochs epochs, float32), saves its state_dict as safetensors (nn.Sequential keys, as a user
would), then at every --keep runs

    relurec compress --model mlp.safetensors --data fashion-mnist --keep K --out default.safetensors

with no other flag, and the baselines at the same keep: --fast, the per-layer methods svd, asvd and
svd-llm (global allocation), and SVD-LLM V2 (its allocation and its truncation). Every compressed file is loaded back in PyTorch
with examples/load_compressed.py and evaluated on the 10 000 test images; the script prints the
points lost against the original, the compression time, and McNemar's exact test of the default
against each baseline (b = images only the default gets right, c = only the baseline; a negative
net with p < 0.05 means the default is significantly less accurate).

    /usr/bin/python3 bench/compress_defaults.py --work /tmp/cd                      # 3 seeds, keep 0.05 and 0.1
    /usr/bin/python3 bench/compress_defaults.py --work /tmp/cd --keeps 0.05 --baselines fast

--work keeps the trained models (reused when present) and the compressed files. Needs Fashion-MNIST
(scripts/install-datasets.sh), python3-torch and python3-numpy, and a relurec binary (built with
`go build` when --relurec is not given).
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "examples"))
sys.path.insert(0, HERE)
from load_compressed import load_relurec, write_safetensors  # noqa: E402
from compress_paired import mcnemar_exact  # noqa: E402
from compress_torch_roundtrip import DATA, idx, train_mlp  # noqa: E402

BASELINES = {
    "fast": ["--fast"],
    "svd": ["--fast", "--method", "svd"],
    "asvd": ["--fast", "--method", "asvd"],
    "svd-llm": ["--fast", "--method", "svd-llm"],
    # SVD-LLM V2 as its paper states it: its ratio allocation and its two-round SVD truncation
    "svd-llm-v2": ["--fast", "--method", "svd-llm-v2", "--allocation", "svd-llm-v2"],
}


def load_split(kind):
    x = idx(os.path.join(DATA, f"{kind}-images-idx3-ubyte.gz")).reshape(-1, 784).astype(np.float32) / 255
    y = idx(os.path.join(DATA, f"{kind}-labels-idx1-ubyte.gz")).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def train(seed, epochs, path):
    torch.manual_seed(seed)
    model = train_mlp([784, 512, 256, 10], epochs, *load_split("train"))
    write_safetensors(path, model.state_dict(), {"format": "pt"})


def right(path, x, y):
    model = load_relurec(path)
    with torch.no_grad():
        return (model(x.to(next(model.parameters()).dtype)).argmax(1) == y).numpy()


def pvalue(p):
    """"= p", or "< 1e-300" where p underflowed to 0."""
    return "< 1e-300" if p == 0 else f"= {p:.3g}"


def compress(exe, model, keep, out, extra, reuse):
    """Runs relurec compress; with reuse, an earlier run's file and report (OUT.json) are taken."""
    if reuse and os.path.exists(out) and os.path.exists(out + ".json"):
        with open(out + ".json") as f:
            rep = json.load(f)
        return rep["bench_seconds"], rep, ""
    if reuse and os.path.exists(out) and os.path.exists(out + ".manifest.json"):  # a run without OUT.json
        with open(out + ".manifest.json") as f:
            man = json.load(f)
        rep = dict(man["results"], estimate={"seconds": float("nan")})
        return sum(man["timings"].values()), rep, ""
    t = time.time()
    r = subprocess.run([exe, "compress", "--model", model, "--data", "fashion-mnist", "--keep", str(keep),
                        "--out", out, "--json", *extra], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"relurec compress {' '.join(extra)} failed ({r.returncode}): {r.stderr}")
    rep = json.loads(r.stdout)
    rep["bench_seconds"] = time.time() - t
    with open(out + ".json", "w") as f:
        json.dump(rep, f)
    return rep["bench_seconds"], rep, r.stderr


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--keeps", default="0.05,0.1")
    ap.add_argument("--baselines", default="fast,svd,asvd,svd-llm-v2", help="from " + ", ".join(BASELINES))
    ap.add_argument("--threads", type=int, default=1, help="torch threads and relurec's GOMAXPROCS")
    ap.add_argument("--relurec", default="")
    ap.add_argument("--reuse", action="store_true", help="take the compressed files and reports of an earlier run in --work")
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    os.environ["GOMAXPROCS"] = str(args.threads)
    os.makedirs(args.work, exist_ok=True)
    exe = args.relurec
    if not exe:
        exe = os.path.join(args.work, "relurec")
        subprocess.run(["go", "build", "-o", exe, "./cmd/relurec"], cwd=REPO, check=True)
    xte, yte = load_split("t10k")
    xte = xte.double()
    baselines = [b for b in args.baselines.split(",") if b]
    summary = {}
    for seed in [int(s) for s in args.seeds.split(",")]:
        mpath = os.path.join(args.work, f"mlp{seed}.safetensors")
        if not os.path.exists(mpath):
            t = time.time()
            train(seed, args.epochs, mpath)
            print(f"seed {seed}: trained in {time.time() - t:.0f} s", flush=True)
        orig = right(mpath, xte, yte)
        for keep in [float(k) for k in args.keeps.split(",")]:
            runs = {}
            for name, extra in [("default", [])] + [(b, BASELINES[b]) for b in baselines]:
                out = os.path.join(args.work, f"s{seed}-k{keep}-{name}.safetensors")
                secs, rep, stderr = compress(exe, mpath, keep, out, extra, args.reuse)
                ok = right(out, xte, yte)
                if abs(ok.mean() - rep["compressed"]["accuracy"]) > 1e-4:
                    sys.exit(f"{out}: PyTorch measures {ok.mean():.4f}, relurec reported {rep['compressed']['accuracy']:.4f}")
                warn = [w for w in rep.get("warnings") or []] + [w for l in rep["layers"] for w in l.get("warnings") or []]
                runs[name] = ok
                lost = 100 * (orig.mean() - ok.mean())
                summary.setdefault((keep, name), []).append(lost)
                print(f"seed {seed} keep {keep} {name:11s}: accuracy {orig.mean():.4f} -> {ok.mean():.4f} "
                      f"({lost:.2f} points lost), {rep['params']} params, {secs:.1f} s (estimated {rep['estimate']['seconds']:.0f} s), "
                      f"{len(warn)} warnings", flush=True)
            for name in baselines:
                b = int(np.sum(runs["default"] & ~runs[name]))
                c = int(np.sum(~runs["default"] & runs[name]))
                print(f"    default vs {name:11s}: only default right {b}, only {name} right {c}, net {b - c:+d}, "
                      f"McNemar exact p {pvalue(mcnemar_exact(b, c))}", flush=True)
    print("\nmean points lost over seeds:")
    for (keep, name), v in summary.items():
        print(f"  keep {keep} {name:11s}: {np.mean(v):.2f} (seeds: {', '.join(f'{x:.2f}' for x in v)})")


if __name__ == "__main__":
    main()
