"""A 2-block MLP-mixer on Fashion-MNIST rows, exported to ONNX, read and compressed by relurec.

1. Trains a residual MLP-mixer on Fashion-MNIST with each image as 28 tokens (its rows) of 28
   values (its pixels): a per-token Linear(28, D) embedding, then --blocks blocks of
       x = x + token-MLP(xᵀ)ᵀ     (Linear(28, HT), ReLU, Linear(HT, 28) across the tokens)
       x = x + channel-MLP(x)     (Linear(D, HC), ReLU, Linear(HC, D) across the channels)
   then the mean over tokens and a Linear(D, 10) classifier (ReLU only, no normalization), with
   Adam (lr 1e-3, batches of 128) for --epochs epochs on --threads CPU threads (torch, float32).
2. Exports it with torch.onnx.export (opset 13, dynamic batch, input [N, 28, 28]) to mixer.onnx:
   MatMul + Add per Linear on 3-D values, Transpose, Relu, Add (residuals), ReduceMean, Gemm.
3. Checks relurec against PyTorch: `relurec eval --model mixer.onnx --data fashion-mnist` reports
   PyTorch's float64 test accuracy, and `relurec eval --model mixer.onnx --truth truth.npz`
   (the test images X and PyTorch's float64 logits Y) matches to 1e-5.
4. With --compress 0.5[,0.25,…]: `relurec compress --model mixer.onnx --data fashion-mnist --keep F`
   (every MatMul weight factored from the activations that reach it) to small_F.onnx, then
   - onnx.checker.check_model(full_check=True) accepts small_F.onnx;
   - an independent numpy evaluator of the ONNX graph (this file, a few operators) gives the
     compressed model's logits; `relurec eval --model small_F.onnx --truth` matches them to 1e-5,
     and its accuracy is within --max-loss points of the dense model's (keep ≥ 0.5 only);
   - the compression time (relurec's "compress" timing) is reported.

Run from the repository root with Debian's python3-torch, python3-onnx and python3-numpy:

    /usr/bin/python3 bench/mixer_fashion.py --out /tmp/mixer                 # train, export, check
    /usr/bin/python3 bench/mixer_fashion.py --out /tmp/mixer --reuse --compress 0.5,0.25

Exit status 0 means every check passed.
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
sys.path.insert(0, HERE)
from compress_torch_roundtrip import DATA, idx  # noqa: E402
from cnn_fashion import accuracy, logits, relurec, train_or_load  # noqa: E402  (the same training and checks)


class Block(nn.Module):
    def __init__(self, tokens, dim, ht, hc):
        super().__init__()
        self.tok1, self.tok2 = nn.Linear(tokens, ht), nn.Linear(ht, tokens)
        self.ch1, self.ch2 = nn.Linear(dim, hc), nn.Linear(hc, dim)

    def forward(self, x):  # x: N × tokens × dim
        y = self.tok2(torch.relu(self.tok1(x.transpose(1, 2))))
        x = x + y.transpose(1, 2)
        return x + self.ch2(torch.relu(self.ch1(x)))


class Mixer(nn.Module):
    def __init__(self, blocks=2, tokens=28, pixels=28, dim=64, ht=64, hc=256, classes=10):
        super().__init__()
        self.embed = nn.Linear(pixels, dim)
        self.blocks = nn.ModuleList(Block(tokens, dim, ht, hc) for _ in range(blocks))
        self.head = nn.Linear(dim, classes)

    def forward(self, x):  # x: N × 28 × 28
        x = self.embed(x)
        for b in self.blocks:
            x = b(x)
        return self.head(x.mean(1))


def onnx_forward(path, x):
    """Evaluates an ONNX graph of the operators the mixer uses with numpy in float64 (no relurec code)."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(path)
    env = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in m.graph.initializer}
    env[m.graph.input[0].name] = x
    for n in m.graph.node:
        a = {at.name: onnx.helper.get_attribute_value(at) for at in n.attribute}
        i = [env[s] if s else None for s in n.input]
        if n.op_type == "MatMul":
            o = i[0] @ i[1]
        elif n.op_type == "Add":
            o = i[0] + i[1]
        elif n.op_type == "Relu":
            o = np.maximum(i[0], 0)
        elif n.op_type == "Transpose":
            o = np.transpose(i[0], a.get("perm"))
        elif n.op_type == "ReduceMean":
            o = i[0].mean(axis=tuple(a["axes"]), keepdims=bool(a.get("keepdims", 1)))
        elif n.op_type == "Reshape":
            o = i[0].reshape([d if d != 0 else i[0].shape[k] for k, d in enumerate(i[1].astype(np.int64))])
        elif n.op_type == "Gemm":
            A = i[0].T if a.get("transA", 0) else i[0]
            B = i[1].T if a.get("transB", 0) else i[1]
            o = a.get("alpha", 1.0) * A @ B
            if len(i) > 2 and i[2] is not None:
                o = o + a.get("beta", 1.0) * i[2]
        elif n.op_type == "Constant":
            o = numpy_helper.to_array(a["value"]).astype(np.float64)
        else:
            sys.exit(f"onnx_forward: operator {n.op_type} not handled")
        env[n.output[0]] = o
    return env[m.graph.output[0].name]


def check_compressed(exe, out, onnx_path, keep, x64, yte, acc_dense, max_loss):
    import onnx
    p = os.path.join(out, f"small_{keep:g}.onnx")
    r = relurec(exe, "compress", "--model", onnx_path, "--data", "fashion-mnist", "--keep", f"{keep:g}", "--out", p)
    onnx.checker.check_model(onnx.load(p), full_check=True)
    y = onnx_forward(p, x64.numpy())
    acc_np = float((y.argmax(1) == yte.numpy()).mean())
    truth = os.path.join(out, f"truth_{keep:g}.npz")
    np.savez(truth, X=x64.reshape(len(x64), -1).numpy(), Y=y)
    tr = relurec(exe, "eval", "--model", p, "--truth", truth, "--data", "fashion-mnist")
    d = tr["truth_outputs"]["max_abs_error"]
    acc = tr["test"]["accuracy"]
    loss = 100 * (acc_dense - acc)
    ok = d <= 1e-5 and acc == acc_np and loss <= max_loss
    print(f"keep {keep:g}: params {r['params']}/{r['dense_params']}, accuracy relurec {acc:.4f} numpy-ONNX {acc_np:.4f} "
          f"(dense {acc_dense:.4f}, loss {loss:.2f} points), logits max |diff| {d:.2e}, onnx.checker OK, "
          f"compress {r['timings']['compress']:.1f} s (wall {r['_wall']:.1f} s)" + ("" if ok else "  MISMATCH"))
    return ok


def load_fashion():
    """Fashion-MNIST as torch tensors: training images (float32, /255) and labels, the test images as
    uint8 (numpy) and float32, and the test labels."""
    xtr = torch.from_numpy(idx(os.path.join(DATA, "train-images-idx3-ubyte.gz")).astype(np.float32) / 255)
    ytr = torch.from_numpy(idx(os.path.join(DATA, "train-labels-idx1-ubyte.gz")).astype(np.int64))
    te_u8 = idx(os.path.join(DATA, "t10k-images-idx3-ubyte.gz"))
    xte = torch.from_numpy(te_u8.astype(np.float32) / 255)
    yte = torch.from_numpy(idx(os.path.join(DATA, "t10k-labels-idx1-ubyte.gz")).astype(np.int64))
    return xtr, ytr, te_u8, xte, yte


def out_dir(out):
    """The output directory (created), and the TemporaryDirectory behind it when out is empty."""
    tmp = None
    if not out:
        tmp = tempfile.TemporaryDirectory()
        out = tmp.name
    os.makedirs(out, exist_ok=True)
    return tmp, out


def float64_truth(model, m64, te_u8, xte, yte, out):
    """relurec reads the images as x/255 in float64 and computes in float64: the test images so, the
    float32 and float64 (model's weights in m64) test accuracies, the float64 logits, and out/truth.npz
    holding the images X (flattened) and those logits Y for `relurec eval --truth`."""
    x64 = torch.from_numpy(te_u8.astype(np.float64) / 255)
    m64.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    m64.eval()
    acc32 = accuracy(model, xte, yte)
    acc64 = accuracy(m64, x64, yte)
    y64 = logits(m64, x64).numpy()
    truth = os.path.join(out, "truth.npz")
    np.savez(truth, X=x64.reshape(len(x64), -1).numpy(), Y=y64)
    return x64, acc32, acc64, y64, truth


def check_dense(exe, out, onnx_path, truth, acc64, min_accuracy):
    """Builds relurec unless exe is given, then checks that `relurec eval` of the dense ONNX model gives
    PyTorch's float64 test accuracy and logits (truth) to 1e-5. Returns the binary and whether it held."""
    if not exe:
        exe = os.path.join(out, "relurec")
        subprocess.run(["go", "build", "-o", exe, "./cmd/relurec"], cwd=REPO, check=True)
    ev = relurec(exe, "eval", "--model", onnx_path, "--data", "fashion-mnist")
    tr = relurec(exe, "eval", "--model", onnx_path, "--truth", truth)
    to = tr["truth_outputs"]
    print(f"relurec eval: accuracy {ev['test']['accuracy']:.4f} ({ev['_wall']:.1f} s); logits vs PyTorch float64 "
          f"max |diff| {to['max_abs_error']:.2e}, relative {to['rel_error']:.2e}", flush=True)
    return exe, acc64 >= min_accuracy and ev["test"]["accuracy"] == acc64 and to["max_abs_error"] <= 1e-5


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=None, help="epochs to train (default 6; 0 with --reuse)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="", help="directory for mixer.pt, mixer.onnx, truth.npz (default: temporary)")
    ap.add_argument("--reuse", action="store_true", help="start from mixer.pt in --out")
    ap.add_argument("--relurec", default="", help="relurec binary (default: go build ./cmd/relurec)")
    ap.add_argument("--min-accuracy", type=float, default=0.85)
    ap.add_argument("--compress", default="", help="comma-separated --keep fractions to compress with relurec and check")
    ap.add_argument("--max-loss", type=float, default=1.0, help="accuracy points keep ≥ 0.5 may lose (others: reported)")
    ap.add_argument("--train-only", action="store_true", help="train and export, no relurec checks")
    args = ap.parse_args()
    if args.epochs is None:
        args.epochs = 0 if args.reuse else 6
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)

    xtr, ytr, te_u8, xte, yte = load_fashion()
    tmp, out = out_dir(args.out)
    model = Mixer()
    train_s = train_or_load(model, os.path.join(out, "mixer.pt"), args.reuse, args.epochs, xtr, ytr, xte, yte)

    onnx_path = os.path.join(out, "mixer.onnx")
    torch.onnx.export(model, xte[:1], onnx_path, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "N"}, "output": {0: "N"}}, opset_version=13)
    import onnx
    onnx.checker.check_model(onnx.load(onnx_path), full_check=True)
    ops = sorted({n.op_type for n in onnx.load(onnx_path).graph.node})
    print(f"exported {onnx_path}: operators {ops}")

    x64, acc32, acc64, y64, truth = float64_truth(model, Mixer().double(), te_u8, xte, yte, out)
    np_err = float(np.abs(onnx_forward(onnx_path, x64.numpy()) - y64).max())
    print(f"PyTorch {torch.__version__}, {args.threads} threads; training {args.epochs} epochs in {train_s:.0f} s; "
          f"parameters {sum(p.numel() for p in model.parameters())}")
    print(f"test accuracy: PyTorch float32 {acc32:.4f}, float64 {acc64:.4f}; numpy ONNX evaluator vs PyTorch max |diff| {np_err:.2e}")
    if args.train_only:
        sys.exit(0 if acc64 >= args.min_accuracy else 1)

    exe, ok = check_dense(args.relurec, out, onnx_path, truth, acc64, args.min_accuracy)
    for k in filter(None, args.compress.split(",")):
        bound = args.max_loss if float(k) >= 0.5 else float("inf")
        ok = check_compressed(exe, out, onnx_path, float(k), x64, yte, acc64, bound) and ok
    print("OK" if ok else "MISMATCH (or accuracy below --min-accuracy / lost beyond --max-loss)")
    if tmp is not None:
        tmp.cleanup()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
