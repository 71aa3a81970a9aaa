#!/usr/bin/python3
"""Extract a trained PyTorch MLP from queries alone with `relurec extract`.

For each seed this script
  1. trains nn.Sequential(nn.Linear(784, H), nn.ReLU(), nn.Linear(H, 10)) with
     biases on Fashion-MNIST (Adam, lr 1e-3, batches of 128, --epochs) and
     reports its test accuracy; --hidden 64,32 trains Linear(784, 64), ReLU,
     Linear(64, 32), ReLU, Linear(32, 10) (any number of hidden layers);
  2. exports it as ONNX (torch.onnx.export, float32 weights) and as
     safetensors (float32, keys 0.weight, 0.bias, 2.weight, 2.bias, ...);
  3. runs `relurec extract --teacher model.onnx` and `--teacher
     model.safetensors` (relurec runs the file in-process as the only access
     to it) and `--query-cmd` against this script's own --serve mode, a
     separate Python process answering .npy queries with PyTorch in float64;
  4. reports the query count, the time, relurec's exit status and peak
     memory, the largest parameter error (relurec's comparison, and for
     --query-cmd this script's own, up to permutation and positive scaling),
     and, scored here on the 10 000 test images, the argmax agreement and
     the largest relative logit error ‖f̂(x) − f(x)‖/‖f(x)‖ against the
     served model.

With --serve-dtype float32 the server computes in float32 (PyTorch's
default dtype) and only --query-cmd runs; a run passes with argmax
agreement 1 and logits within 1e-4 relative. How PyTorch's float32 Linear
rounds depends on the BLAS kernel: OpenBLAS's AVX2 sgemm rounds a batch's
rows by their position, its AVX-512 one does not; the script prints which
it sees. OPENBLAS_CORETYPE=Haswell picks the AVX2 kernel on an AVX-512
machine (training the teachers with it too); env -u OPENBLAS_CORETYPE lets
OpenBLAS pick for the CPU when the environment names a kernel. --keep DIR
keeps each run's files, its checkpoint among them: the same command rerun
replays the model's answers (relurec's own work is most of a run's time).

    /usr/bin/python3 bench/extract_fashion.py                   # H = 64, 1 seed
    /usr/bin/python3 bench/extract_fashion.py --hidden 128 --seeds 3
    env -u OPENBLAS_CORETYPE /usr/bin/python3 bench/extract_fashion.py --hidden 32 --serve-dtype float32
    OPENBLAS_CORETYPE=Haswell /usr/bin/python3 bench/extract_fashion.py --hidden 32 --serve-dtype float32
    /usr/bin/python3 bench/extract_fashion.py --hidden 64,32 --seeds 3

Needs python3-torch, python3-onnx optional (torch.onnx.export works without
it), python3-numpy, the Fashion-MNIST files (scripts/install-datasets.sh, or a
directory holding them named by RELUREC_FASHION_MNIST) and
the Go toolchain (builds ./relurec when missing).
"""

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compress_torch_roundtrip import DATA, idx, train_mlp  # noqa: E402


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        b = t.detach().cpu().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def serve(path, dtype):
    """--serve: answer .npy queries on stdin with the model's outputs, computed in dtype (float64 or float32)."""
    from numpy.lib import format as npformat
    torch.set_num_threads(1)
    state = torch.load(path)
    mods = []
    for k in range(0, 2 * len(state) // 2, 2):
        if "%d.weight" % k not in state:
            break
        if mods:
            mods.append(nn.ReLU())
        w = state["%d.weight" % k]
        mods.append(nn.Linear(w.shape[1], w.shape[0]))
    model = nn.Sequential(*mods)
    model.load_state_dict(state)
    tdtype = {"float64": torch.float64, "float32": torch.float32}[dtype]
    model = model.to(tdtype)
    class Pipe:  # numpy reads a real file object with fromfile, which cannot seek on a pipe
        def __init__(self, f):
            self.read = f.read

    inp, out = Pipe(sys.stdin.buffer), sys.stdout.buffer
    with torch.no_grad():
        while True:
            try:
                x = npformat.read_array(inp)
            except ValueError:
                return
            y = model(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float64)).to(tdtype))
            npformat.write_array(out, y.double().numpy())
            out.flush()


def relurec(exe, *args):
    """Runs relurec with --json; exit 0 (certified) and 3 (not certified, the report still printed) are results."""
    t = time.perf_counter()
    p = subprocess.run([exe, *args, "--json"], capture_output=True, text=True)
    if p.returncode not in (0, 3):
        raise SystemExit("relurec %s failed (exit %d): %s" % (" ".join(args), p.returncode, p.stderr))
    return json.loads(p.stdout), time.perf_counter() - t, p.returncode


def read_safetensors(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        h = json.loads(f.read(n))
        blob = f.read()
    got = {}
    for k, v in h.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        got[k] = np.frombuffer(blob[a:b], dtype={"F64": "<f8", "F32": "<f4"}[v["dtype"]]).reshape(v["shape"]).astype(np.float64)
    return got


def logits_score(model, path, xte, dtype):
    """Argmax agreement and the largest relative logit error, over the test images, of the extracted model (float64) vs model served in dtype."""
    got = read_safetensors(path)
    f = xte.double().numpy()
    for k in range(0, 2 * len(got), 2):
        if "%d.weight" % k not in got:
            break
        if k > 0:
            f = np.maximum(f, 0)
        f = f @ got["%d.weight" % k].T + got["%d.bias" % k]
    with torch.no_grad():
        tdtype = {"float64": torch.float64, "float32": torch.float32}[dtype]
        y = model.to(tdtype)(xte.to(tdtype)).double().numpy()
        model.float()
    agree = float((f.argmax(1) == y.argmax(1)).mean())
    rel = float((np.linalg.norm(f - y, axis=1) / np.linalg.norm(y, axis=1)).max())
    return agree, rel


def param_error(model, path, relative=False):
    """Largest error of the extracted parameters vs model's, up to permutation and positive scaling of each
    hidden layer's units (each unit's weight row scaled to unit norm, the scale moved into the next layer):
    absolute, or with relative=True divided by the largest entry of each of the truth's tensors."""
    got = read_safetensors(path)
    want = {k: v.detach().double().numpy() for k, v in model.state_dict().items()}
    n = len(want) // 2
    keys = ["%d" % (2 * i) for i in range(n)]
    if any(got.get(k + ".weight", np.zeros(0)).shape != want[k + ".weight"].shape for k in keys):
        return float("inf")
    worst = 0.0
    perm = None
    for i, k in enumerate(keys):
        tw, tb = want[k + ".weight"].copy(), want[k + ".bias"].copy()
        gw, gb = got[k + ".weight"].copy(), got[k + ".bias"].copy()
        if perm is not None:
            gw = gw[:, perm]
        if i < n - 1:
            rt, rg = np.linalg.norm(tw, axis=1), np.linalg.norm(gw, axis=1)
            tw, tb, gw, gb = tw / rt[:, None], tb / rt, gw / rg[:, None], gb / rg
            want[keys[i + 1] + ".weight"] = want[keys[i + 1] + ".weight"] * rt[None, :]
            got[keys[i + 1] + ".weight"] = got[keys[i + 1] + ".weight"] * rg[None, :]
            perm = np.argmax(tw @ gw.T, axis=1)
            gw, gb = gw[perm], gb[perm]
        for t, g in ((tw, gw), (tb, gb)):
            e = np.abs(t - g).max()
            worst = max(worst, e / np.abs(t).max() if relative else e)
    return float(worst)


def batch_answers(width, rows):
    """How many different answers a float32 Linear(784, width) gives to copies of one input in one batch:
    1 unless the BLAS kernel rounds a row by its position (OpenBLAS's AVX2 sgemm does, its AVX-512 one does
    not; bench/torch_batch_rounding.py)."""
    torch.manual_seed(0)
    lin = nn.Linear(784, width)
    with torch.no_grad():
        y = lin(torch.randn(1, 784).repeat(rows, 1)).numpy()
    return len({r.tobytes() for r in y})


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", default="64", help="hidden widths, e.g. 64 or 64,32")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--first-seed", type=int, default=0, help="the first seed (--seeds counts from it)")
    ap.add_argument("--relurec", default="./relurec")
    ap.add_argument("--serve-dtype", choices=["float64", "float32"], default="float64",
                    help="float32: only --query-cmd, the server computing in float32 (PyTorch's default dtype); "
                         "scored by argmax agreement and logits on the 10 000 test images")
    ap.add_argument("--max-lines", type=int, default=0, help="relurec extract --max-lines (0: its default)")
    ap.add_argument("--widths-known", action="store_true", help="give --query-cmd runs the hidden widths (--hidden 32,16) instead of searching them")
    ap.add_argument("--keep", help="a directory to keep each run's relurec report (JSON), teacher, extracted network and "
                    "checkpoint in: the same command rerun replays the model's answers from the checkpoints")
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        return serve(args.serve, args.serve_dtype)
    if not os.path.exists(args.relurec):
        subprocess.run(["go", "build", "-o", args.relurec, "./cmd/relurec"], check=True)
    exe = os.path.abspath(args.relurec)
    widths = [int(w) for w in args.hidden.split(",")]
    torch.set_num_threads(1)
    xtr = torch.from_numpy(idx(os.path.join(DATA, "train-images-idx3-ubyte.gz")).reshape(-1, 784).astype(np.float32) / 255)
    ytr = torch.from_numpy(idx(os.path.join(DATA, "train-labels-idx1-ubyte.gz")).astype(np.int64))
    xte = torch.from_numpy(idx(os.path.join(DATA, "t10k-images-idx3-ubyte.gz")).reshape(-1, 784).astype(np.float32) / 255)
    yte = torch.from_numpy(idx(os.path.join(DATA, "t10k-labels-idx1-ubyte.gz")).astype(np.int64))
    ok = True
    if args.serve_dtype == "float32":
        print("# float32 server: %d different answers among 786 copies of one input in one batch (OPENBLAS_CORETYPE=%s)"
              % (batch_answers(widths[0], 786), os.environ.get("OPENBLAS_CORETYPE", "unset")))
    print("%4s %8s %13s %9s %9s %9s %10s %8s %10s %6s %8s" % ("seed", "test acc", "access", "queries", "units", "time_s", "param_err", "argmax", "logit_rel", "exit", "peak_MiB"))
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        torch.manual_seed(seed)
        model = train_mlp([784, *widths, 10], args.epochs, xtr, ytr)
        with torch.no_grad():
            acc = (model(xte).argmax(1) == yte).float().mean().item()
        with tempfile.TemporaryDirectory() as tmp:
            onnx_path = os.path.join(tmp, "mlp.onnx")
            st_path = os.path.join(tmp, "mlp.safetensors")
            pt_path = os.path.join(tmp, "mlp.pt")
            stem = None
            if args.keep:
                # The served model's file and each run's checkpoint in the kept directory: the same
                # command rerun replays the oracle's answers from the checkpoint (relurec extract --help).
                os.makedirs(args.keep, exist_ok=True)
                stem = os.path.join(os.path.abspath(args.keep), "%s-s%d" % ("-".join(map(str, widths)), seed))
                pt_path = stem + "-teacher.pt"
            torch.onnx.export(model, xte[:1], onnx_path, input_names=["x"], output_names=["logits"], dynamic_axes={"x": {0: "n"}})
            write_safetensors(st_path, model.state_dict())
            torch.save(model.state_dict(), pt_path)
            serve_cmd = "%s %s --serve-dtype %s --serve %s" % (sys.executable, os.path.abspath(__file__), args.serve_dtype, pt_path)
            hidden = args.hidden if args.widths_known else ",".join("0" for _ in widths)
            runs = [("query-cmd", ["--query-cmd", serve_cmd, "--d", "784"] + (["--hidden", hidden] if len(widths) > 1 or args.widths_known else []))]
            if args.serve_dtype == "float64":
                runs = [("onnx", ["--teacher", onnx_path]), ("safetensors", ["--teacher", st_path])] + runs
            for name, flags in runs:
                out = os.path.join(tmp, "x-%s.safetensors" % name)
                keep = ["--checkpoint", "%s-%s.ckpt" % (stem, name)] if stem else []
                res, wall, code = relurec(exe, "extract", *flags, "--seed", str(seed), "--max-lines", str(args.max_lines), "--approximate", "--out", out, *keep)
                if stem:
                    with open("%s-%s.json" % (stem, name), "w") as f:
                        json.dump(res, f, indent=1)
                    shutil.copyfile(st_path, stem + "-teacher.safetensors")
                    if os.path.exists(out):
                        shutil.copyfile(out, "%s-%s-extracted.safetensors" % (stem, name))
                if not os.path.exists(out):
                    ok = False
                    print("%4d %8.4f %13s %9d %9d %9.2f %10s %8s %10s %6d %8.0f  <-- nothing extracted" % (seed, acc, name, res["queries"], res["units"], wall, "-", "-", "-", code, res["peak_memory_bytes"] / 2**20))
                    continue
                if len(widths) > 1:
                    # Deeper networks: the largest error relative to each tensor's largest entry.
                    err = res["layer_weights"]["max_rel"] if "layer_weights" in res else param_error(model, out, relative=True)
                else:
                    err = res["weights"]["max_err"] if "weights" in res else param_error(model, out)
                agree, rel = logits_score(model, out, xte, args.serve_dtype)
                if args.serve_dtype == "float64":
                    good = code == 0 and err <= 1e-8 and res["units"] == sum(widths)
                    why = "not within 1e-8"
                else:
                    good = code == 0 and agree == 1.0 and rel <= 1e-4
                    why = "argmax or logits off"
                ok = ok and good
                print("%4d %8.4f %13s %9d %9d %9.2f %10.1e %8.4f %10.1e %6d %8.0f%s" % (seed, acc, name, res["queries"], res["units"], wall, err, agree, rel, code, res["peak_memory_bytes"] / 2**20, "" if good else "  <-- " + why))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
