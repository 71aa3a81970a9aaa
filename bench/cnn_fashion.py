"""A small PyTorch CNN on Fashion-MNIST, exported to ONNX and safetensors, read by relurec.

1. Trains nn.Sequential(Conv2d(1,16,3,padding=1), ReLU, MaxPool2d(2), Conv2d(16,32,3,padding=1),
   ReLU, MaxPool2d(2), Flatten, Linear(1568,128), ReLU, Linear(128,10)) with Adam (lr 1e-3,
   batches of 128) for --epochs epochs on --threads CPU threads (torch, float32).
2. Exports it with torch.onnx.export (opset 13, dynamic batch) to cnn.onnx and its state dict to
   cnn.safetensors (float32, nn.Sequential keys, the architecture in the "relurec.cnn" metadata so
   relurec knows the input size, strides, paddings and pooling, which a state dict does not hold).
3. Checks relurec against PyTorch:
   - `relurec eval --model cnn.onnx --data fashion-mnist` (and the same with cnn.safetensors)
     reports the accuracy PyTorch measures on the test set (the model in float64, as relurec
     computes; inputs x/255 in float64, as relurec reads them);
   - `relurec eval --model cnn.onnx --truth truth.npz`, where truth.npz holds the test images X
     and PyTorch's float64 logits Y: relurec's outputs match to 1e-5 (max absolute difference).
     The float32 PyTorch logits are compared too, for scale.

Run from the repository root with Debian's python3-torch, python3-onnx and python3-numpy:

    /usr/bin/python3 bench/cnn_fashion.py                  # train 3 epochs, 2 threads, check
    /usr/bin/python3 bench/cnn_fashion.py --out /tmp/cnn   # keep cnn.onnx, cnn.safetensors, truth.npz
    /usr/bin/python3 bench/cnn_fashion.py --out /tmp/cnn --reuse   # no training: recheck cnn.pt
    /usr/bin/python3 bench/cnn_fashion.py --out /tmp/cnn --reuse --epochs 1   # one more epoch

4. With --compress 0.25[,0.1,…]: for each fraction, `relurec compress --model cnn.onnx --data
   fashion-mnist --keep F` (data-driven low rank, 4096 calibration images; --sequential with
   --compress-sequential) to small_F.safetensors and small_F.onnx, then
   - PyTorch builds the nn.Sequential the "relurec.cnn" metadata describes (each factored conv a
     KH×KW Conv2d to r channels then a 1×1 Conv2d, each factored Linear two Linear modules) and
     load_state_dict(strict=True) reads the safetensors weights; its test accuracy is compared with
     relurec's and with the dense model's (loss ≤ --max-loss points);
   - onnx.checker.check_model accepts small_F.onnx, and its initializers equal the safetensors
     tensors;
   - `relurec eval --model small_F.onnx --truth` on PyTorch's float64 logits of the compressed
     model: relurec's outputs match to 1e-5 (max absolute difference).

    /usr/bin/python3 bench/cnn_fashion.py --out /tmp/cnn --reuse --compress 0.25,0.1,0.5

Exit status 0 means the accuracy is at least --min-accuracy and relurec agrees with PyTorch (and,
with --compress, every compressed model passes its checks).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "examples"))
from torch_roundtrip import read_safetensors, write_safetensors  # noqa: E402
from compress_torch_roundtrip import DATA, idx  # noqa: E402  (bench/ is on sys.path)


def build():
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def architecture(model, input_shape):
    """relurec's "relurec.cnn" metadata: the input shape and one entry per module."""
    layers = []
    for m in model:
        if isinstance(m, nn.Conv2d):
            assert m.groups == 1 and m.dilation == (1, 1) and m.padding_mode == "zeros"
            layers.append({"type": "conv2d", "in": m.in_channels, "out": m.out_channels,
                           "kernel": list(m.kernel_size), "stride": list(m.stride),
                           "padding": list(m.padding), "bias": m.bias is not None})
        elif isinstance(m, nn.ReLU):
            layers.append({"type": "relu"})
        elif isinstance(m, nn.MaxPool2d):
            pair = lambda v: list(v) if isinstance(v, (tuple, list)) else [v, v]  # noqa: E731
            layers.append({"type": "maxpool2d", "kernel": pair(m.kernel_size),
                           "stride": pair(m.stride), "padding": pair(m.padding)})
        elif isinstance(m, nn.Flatten):
            layers.append({"type": "flatten"})
        elif isinstance(m, nn.Linear):
            layers.append({"type": "linear", "in": m.in_features, "out": m.out_features,
                           "bias": m.bias is not None})
        else:
            raise SystemExit(f"module {m} has no relurec counterpart")
    return json.dumps({"input": list(input_shape), "layers": layers})


def build_from_arch(arch):
    """The nn.Sequential that relurec's "relurec.cnn" metadata describes (float64)."""
    mods = []
    for l in json.loads(arch)["layers"]:
        t = l["type"]
        if t == "conv2d":
            mods.append(nn.Conv2d(l["in"], l["out"], tuple(l["kernel"]), stride=tuple(l["stride"]),
                                  padding=tuple(l["padding"]), bias=l["bias"]))
        elif t == "relu":
            mods.append(nn.ReLU())
        elif t == "maxpool2d":
            mods.append(nn.MaxPool2d(tuple(l["kernel"]), stride=tuple(l["stride"]), padding=tuple(l["padding"])))
        elif t == "flatten":
            mods.append(nn.Flatten())
        elif t == "linear":
            mods.append(nn.Linear(l["in"], l["out"], bias=l["bias"]))
        else:
            raise SystemExit(f"unknown module type {t!r} in relurec.cnn")
    return nn.Sequential(*mods).double().eval()


def check_compressed(exe, out, onnx_path, selection, sequential, xte, x64, yte, acc_dense, max_loss):
    """Compress with relurec (selection: ["--keep", "0.25"] or ["--ranks", "4,16,26,0"]), read the result
    back in PyTorch and ONNX, compare; return ok."""
    import onnx
    from onnx import numpy_helper
    tag = selection[1].replace(",", "-") + ("_seq" if sequential else "")
    st = os.path.join(out, f"small_{tag}.safetensors")
    ox = os.path.join(out, f"small_{tag}.onnx")
    flags = selection + (["--sequential"] if sequential else [])
    runs = [relurec(exe, "compress", "--model", onnx_path, "--data", "fashion-mnist", *flags, "--out", p) for p in (st, ox)]
    r = runs[0]
    tensors, meta = read_safetensors(st)
    model = build_from_arch(meta["relurec.cnn"])
    model.load_state_dict({k: v.double() for k, v in tensors.items()}, strict=True)
    acc_torch = accuracy(model, x64, yte)
    m = onnx.load(ox)
    onnx.checker.check_model(m, full_check=True)
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    same_weights = set(inits) == set(tensors) and all(np.array_equal(inits[k], tensors[k].numpy()) for k in tensors)
    y = logits(model, xte.double()).numpy()
    truth = os.path.join(out, f"truth_small_{tag}.npz")
    np.savez(truth, X=xte.double().reshape(len(xte), -1).numpy(), Y=y)
    ev = relurec(exe, "eval", "--model", ox, "--truth", truth)
    ev_st = relurec(exe, "eval", "--model", st, "--truth", truth)
    err = max(ev["truth_outputs"]["max_abs_error"], ev_st["truth_outputs"]["max_abs_error"])
    ranks = [f"{l['rank'] if not l['dense'] else 'dense'}" for l in r["layers"]]
    acc_rr = r["compressed"]["accuracy"]
    loss_pts = 100 * (acc_dense - acc_torch)
    print(f"{' '.join(flags)}: {r['params']} of {r['dense_params']} parameters "
          f"(kept {r['kept']:.4f}), ranks {','.join(ranks)} (modules {[l['layer'] for l in r['layers']]}); "
          f"test accuracy relurec {acc_rr:.4f}, PyTorch from safetensors {acc_torch:.4f} "
          f"(dense {acc_dense:.4f}, {loss_pts:+.2f} points lost); compression {r['timings']['compress']:.1f} s "
          f"(.onnx run {runs[1]['timings']['compress']:.1f} s); onnx.checker OK, ONNX initializers "
          f"{'equal' if same_weights else 'DIFFER from'} the safetensors tensors; relurec vs PyTorch logits "
          f"max |diff| {err:.2e}", flush=True)
    return same_weights and err <= 1e-5 and acc_rr == acc_torch and loss_pts <= max_loss and runs[1]["params"] == r["params"]


def train_or_load(model, pt, reuse, epochs, xtr, ytr, xte, yte):
    """Load the state dict saved at pt (reuse), then train `epochs` epochs of Adam (lr 1e-3,
    batches of 128, cross-entropy) printing the test accuracy per epoch, and save it to pt.
    Returns the seconds spent; the model is left in eval mode."""
    t0 = time.time()
    if reuse:
        model.load_state_dict(torch.load(pt))
    if epochs > 0:
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for ep in range(epochs):
            model.train()
            perm = torch.randperm(len(xtr))
            for k in range(0, len(xtr), 128):
                b = perm[k:k + 128]
                opt.zero_grad()
                nn.functional.cross_entropy(model(xtr[b]), ytr[b]).backward()
                opt.step()
            model.eval()
            print(f"epoch {ep + 1}: test accuracy {accuracy(model, xte, yte):.4f} ({time.time() - t0:.0f} s)", flush=True)
        torch.save(model.state_dict(), pt)
    model.eval()
    return time.time() - t0


def accuracy(model, x, y):
    with torch.no_grad():
        correct = sum(int((model(x[k:k + 1000]).argmax(1) == y[k:k + 1000]).sum()) for k in range(0, len(x), 1000))
    return correct / len(x)


def logits(model, x):
    with torch.no_grad():
        return torch.cat([model(x[k:k + 1000]) for k in range(0, len(x), 1000)])


def relurec(exe, *args):
    t = time.time()
    r = subprocess.run([exe, *args, "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"relurec {' '.join(args)} failed ({r.returncode}): {r.stderr}")
    out = json.loads(r.stdout)
    out["_wall"] = time.time() - t
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=None, help="epochs to train (default 3; 0 with --reuse)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="", help="directory for cnn.onnx, cnn.safetensors, truth.npz (default: temporary)")
    ap.add_argument("--reuse", action="store_true", help="start from cnn.pt in --out (then train --epochs more)")
    ap.add_argument("--relurec", default="", help="relurec binary (default: go build ./cmd/relurec)")
    ap.add_argument("--min-accuracy", type=float, default=0.88)
    ap.add_argument("--compress", default="", help="comma-separated --keep fractions to compress with relurec and check")
    ap.add_argument("--compress-ranks", default="", help="also compress with these fixed ranks (one per Conv2d/Linear, "
                    "0 = dense), e.g. 4,16,26,0 to factor the convolutions too")
    ap.add_argument("--compress-sequential", action="store_true", help="compress with --sequential (Alg 3)")
    ap.add_argument("--max-loss", type=float, default=1.0,
                    help="accuracy points a model compressed with --keep ≥ 0.25 may lose (others: reported only)")
    ap.add_argument("--skip-eval", action="store_true", help="with --compress: skip step 3's checks of the dense model")
    args = ap.parse_args()
    if args.epochs is None:
        args.epochs = 0 if args.reuse else 3
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)

    xtr = torch.from_numpy(idx(os.path.join(DATA, "train-images-idx3-ubyte.gz")).astype(np.float32) / 255).unsqueeze(1)
    ytr = torch.from_numpy(idx(os.path.join(DATA, "train-labels-idx1-ubyte.gz")).astype(np.int64))
    te_u8 = idx(os.path.join(DATA, "t10k-images-idx3-ubyte.gz"))
    xte = torch.from_numpy(te_u8.astype(np.float32) / 255).unsqueeze(1)
    yte = torch.from_numpy(idx(os.path.join(DATA, "t10k-labels-idx1-ubyte.gz")).astype(np.int64))

    tmp = None
    out = args.out
    if not out:
        tmp = tempfile.TemporaryDirectory()
        out = tmp.name
    os.makedirs(out, exist_ok=True)
    model = build()
    train_s = train_or_load(model, os.path.join(out, "cnn.pt"), args.reuse, args.epochs, xtr, ytr, xte, yte)

    onnx_path = os.path.join(out, "cnn.onnx")
    torch.onnx.export(model, xte[:1], onnx_path, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "N"}, "output": {0: "N"}}, opset_version=13)
    st_path = os.path.join(out, "cnn.safetensors")
    write_safetensors(st_path, {k: v.detach() for k, v in model.state_dict().items()},
                      {"format": "pt", "relurec.cnn": architecture(model, (1, 28, 28))})

    # relurec reads the images as x/255 in float64 and computes in float64.
    x64 = torch.from_numpy(te_u8.astype(np.float64) / 255).unsqueeze(1)
    m64 = build().double()
    m64.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    m64.eval()
    acc32 = accuracy(model, xte, yte)
    acc64 = accuracy(m64, x64, yte)
    # Truth for the output comparison: the float32 images (as float64) and the float64 logits.
    xt = xte.double()
    y64 = logits(m64, xt).numpy()
    y32 = logits(model, xte).double().numpy()
    truth = os.path.join(out, "truth.npz")
    np.savez(truth, X=xt.reshape(len(xt), -1).numpy(), Y=y64)
    truth32 = os.path.join(out, "truth32.npz")
    np.savez(truth32, X=xt.reshape(len(xt), -1).numpy(), Y=y32)

    exe = args.relurec
    if not exe:
        exe = os.path.join(out, "relurec")
        subprocess.run(["go", "build", "-o", exe, "./cmd/relurec"], cwd=REPO, check=True)
    cok = True
    if args.compress:
        for k in args.compress.split(","):
            # The accuracy bound (--max-loss) holds for keep ≥ 0.25; smaller budgets are reported only.
            bound = args.max_loss if float(k) >= 0.25 else float("inf")
            cok = check_compressed(exe, out, onnx_path, ["--keep", f"{float(k):g}"], args.compress_sequential,
                                   xte, x64, yte, acc64, bound) and cok
    if args.compress_ranks:
        # Fixed ranks show the conv path; their accuracy is reported, not bounded.
        cok = check_compressed(exe, out, onnx_path, ["--ranks", args.compress_ranks], args.compress_sequential,
                               xte, x64, yte, acc64, float("inf")) and cok
    if args.compress or args.compress_ranks:
        if args.skip_eval:
            print("OK" if cok else "MISMATCH (or accuracy lost beyond --max-loss)")
            if tmp is not None:
                tmp.cleanup()
            sys.exit(0 if cok else 1)
    ev_onnx = relurec(exe, "eval", "--model", onnx_path, "--data", "fashion-mnist")
    ev_st = relurec(exe, "eval", "--model", st_path, "--data", "fashion-mnist")
    tr = relurec(exe, "eval", "--model", onnx_path, "--truth", truth)
    tr32 = relurec(exe, "eval", "--model", onnx_path, "--truth", truth32)

    print(f"PyTorch {torch.__version__}, {args.threads} threads: {model}".replace("\n", " "))
    print(f"training: {args.epochs} epochs in {train_s:.0f} s" + (f", starting from {pt}" if args.reuse else ""))
    print(f"test accuracy: PyTorch float32 {acc32:.4f}, float64 {acc64:.4f}; "
          f"relurec eval ONNX {ev_onnx['test']['accuracy']:.4f} ({ev_onnx['_wall']:.1f} s, "
          f"forward of 10 000 images {ev_onnx['batch_seconds']:.2f} s), "
          f"safetensors {ev_st['test']['accuracy']:.4f}")
    print(f"parameters {ev_onnx['parameters']}, multiply-adds per image {ev_onnx['multiply_adds']}")
    to, to32 = tr["truth_outputs"], tr32["truth_outputs"]
    print(f"logits, relurec vs PyTorch float64: max |diff| {to['max_abs_error']:.2e}, relative {to['rel_error']:.2e}; "
          f"vs PyTorch float32: max |diff| {to32['max_abs_error']:.2e}, relative {to32['rel_error']:.2e}")
    ok = acc64 >= args.min_accuracy and cok
    ok = ok and ev_onnx["test"]["accuracy"] == acc64 and ev_st["test"]["accuracy"] == acc64
    ok = ok and to["max_abs_error"] <= 1e-5
    print("OK" if ok else "MISMATCH (or accuracy below --min-accuracy)")
    if tmp is not None:
        tmp.cleanup()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
