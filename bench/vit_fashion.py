"""A small vision transformer (ViT) on Fashion-MNIST, exported to ONNX, read and compressed by relurec.

1. Trains a ViT on Fashion-MNIST: each 28×28 image cut into 16 patches of 7×7, a Linear(49, W)
   patch embedding, a class token and learned position embeddings, then --blocks pre-norm blocks
       x = x + proj(attention(LayerNorm(x)))      (separate Q, K, V Linear(W, W), --heads heads)
       x = x + fc2(GELU(fc1(LayerNorm(x))))       (Linear(W, 2W), exact GELU, Linear(2W, W))
   then LayerNorm and a Linear(W, 10) head on the class token, with Adam (lr 1e-3, batches of 128)
   for --epochs epochs on --threads CPU threads (torch, float32).
2. Exports it with torch.onnx.export (--opset, dynamic batch, input [N, 28, 28]) to vit.onnx: the
   attention's MatMul of two computed values, Softmax, LayerNormalization (opset 17) or its
   decomposition (ReduceMean, Sub, Pow, Sqrt, Div), Erf for GELU, and the shape arithmetic of the
   dynamic batch (Shape, Gather, Unsqueeze, Concat, Expand, Reshape, ...).
3. Checks relurec against PyTorch: `relurec eval --model vit.onnx --data fashion-mnist` reports
   PyTorch's float64 test accuracy, and `relurec eval --model vit.onnx --truth truth.npz` (the test
   images X and PyTorch's float64 logits Y) matches to 1e-5; so does the numpy evaluator below.
4. With --compress 0.5[,0.3,…]: `relurec compress --model vit.onnx --data fashion-mnist --keep F`
   (its default recipe; --compress-flags adds flags after --keep; every
   constant weight matrix — Q, K, V, out projection, MLP, embedding, head — factored from the
   activations that reach it) to small_F.onnx, then
   - onnx.checker.check_model(full_check=True) accepts small_F.onnx;
   - an independent numpy evaluator of the ONNX graph (onnx_forward, no relurec code; the installed
     onnx has no onnx.reference) gives its logits; `relurec eval --model small_F.onnx --truth`
     matches them to 1e-5;
   - its accuracy loss against the dense model and the compression time are reported, and checked
     against --max-loss (keep ≥ 0.5) and --max-loss-low (lower keeps).

--fixture DIR instead writes a tiny ViT (input 4×4, patches 2×2, width 8, 2 heads, 1 block, random
weights) as DIR/vit_tiny_opsetK.onnx for K = 13 and 17, with 5 inputs and PyTorch's float64 outputs
(vit_tiny_x.npy, vit_tiny_y.npy): the test fixtures of nn's graph evaluator.

Run from the repository root with Debian's python3-torch, python3-onnx and python3-numpy:

    /usr/bin/python3 bench/vit_fashion.py --out /tmp/vit                 # train, export, check
    /usr/bin/python3 bench/vit_fashion.py --out /tmp/vit --reuse --compress 0.5,0.3
    /usr/bin/python3 bench/vit_fashion.py --fixture nn/testdata

Exit status 0 means every check passed.
"""
import argparse
import math
import os
import sys

import numpy as np
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from cnn_fashion import relurec, train_or_load  # noqa: E402  (the same training and checks)
from mixer_fashion import check_dense, float64_truth, load_fashion, out_dir  # noqa: E402


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):  # x: N × T × W
        n, t, w = x.shape
        split = lambda y: y.reshape(n, t, self.heads, w // self.heads).transpose(1, 2)  # N × H × T × D
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        a = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(w // self.heads), dim=-1)
        return self.proj((a @ v).transpose(1, 2).reshape(n, t, w))


class Block(nn.Module):
    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.fc1, self.fc2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))


class ViT(nn.Module):
    def __init__(self, side=28, patch=7, dim=64, heads=4, blocks=2, classes=10):
        super().__init__()
        self.side, self.patch = side, patch
        self.tokens = (side // patch) ** 2
        self.embed = nn.Linear(patch * patch, dim)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(0.02 * torch.randn(1, self.tokens + 1, dim))
        self.blocks = nn.ModuleList(Block(dim, heads, 2 * dim) for _ in range(blocks))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):  # x: N × side × side
        n, g, p = x.shape[0], self.side // self.patch, self.patch
        x = x.reshape(n, g, p, g, p).transpose(2, 3).reshape(n, g * g, p * p)
        x = torch.cat([self.cls.expand(n, -1, -1), self.embed(x)], dim=1) + self.pos
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x[:, 0]))


def export(model, x, path, opset):
    torch.onnx.export(model, x, path, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": {0: "N"}, "output": {0: "N"}}, opset_version=opset)
    import onnx
    m = onnx.load(path)
    onnx.checker.check_model(m, full_check=True)
    return sorted({n.op_type for n in m.graph.node})


try:
    from scipy.special import erf  # Debian's python3-scipy; math.erf elementwise otherwise
except ImportError:
    erf = np.vectorize(math.erf)


def onnx_forward(path, x):
    """Evaluates an ONNX graph of the operators the ViT's export uses with numpy in float64 (no relurec
    code): floating-point tensors as float64, integer ones as int64."""
    import onnx
    from onnx import numpy_helper
    m = onnx.load(path)

    def arr(t):
        a = numpy_helper.to_array(t)
        return a.astype(np.float64) if a.dtype.kind == "f" else a.astype(np.int64)

    env = {t.name: arr(t) for t in m.graph.initializer}
    env[m.graph.input[0].name] = x
    for n in m.graph.node:
        a = {at.name: onnx.helper.get_attribute_value(at) for at in n.attribute}
        i = [env[s] if s else None for s in n.input]
        op = n.op_type
        if op == "Constant":
            o = arr(a["value"])
        elif op in ("MatMul", "Add", "Sub", "Mul", "Div", "Pow", "Equal"):
            f = {"MatMul": np.matmul, "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Pow": np.power,
                 "Equal": np.equal, "Div": lambda u, v: u // v if u.dtype.kind == "i" else u / v}[op]
            o = f(i[0], i[1])
        elif op == "Gemm":
            A = i[0].T if a.get("transA", 0) else i[0]
            B = i[1].T if a.get("transB", 0) else i[1]
            o = a.get("alpha", 1.0) * A @ B
            if len(i) > 2 and i[2] is not None:
                o = o + a.get("beta", 1.0) * i[2]
        elif op == "Relu":
            o = np.maximum(i[0], 0)
        elif op in ("Sqrt", "Erf"):
            o = np.sqrt(i[0]) if op == "Sqrt" else erf(i[0])
        elif op == "Softmax":
            e = np.exp(i[0] - i[0].max(axis=a.get("axis", -1), keepdims=True))
            o = e / e.sum(axis=a.get("axis", -1), keepdims=True)
        elif op == "Transpose":
            o = np.transpose(i[0], a.get("perm"))
        elif op == "ReduceMean":
            axes = a.get("axes", i[1] if len(i) > 1 else None)
            o = i[0].mean(axis=tuple(int(v) for v in axes), keepdims=bool(a.get("keepdims", 1)))
        elif op == "LayerNormalization":
            ax = a.get("axis", -1)
            axes = tuple(range(ax % i[0].ndim, i[0].ndim))
            mu = i[0].mean(axis=axes, keepdims=True)
            var = ((i[0] - mu) ** 2).mean(axis=axes, keepdims=True)
            o = (i[0] - mu) / np.sqrt(var + a.get("epsilon", 1e-5)) * i[1]
            if len(i) > 2 and i[2] is not None:
                o = o + i[2]
        elif op == "Reshape":
            o = i[0].reshape([d if d != 0 else i[0].shape[k] for k, d in enumerate(i[1])])
        elif op == "Flatten":
            o = i[0].reshape(int(np.prod(i[0].shape[:a.get("axis", 1)])), -1)
        elif op == "Shape":
            o = np.array(i[0].shape, dtype=np.int64)
        elif op == "Gather":
            o = np.take(i[0], i[1], axis=a.get("axis", 0))
        elif op == "Unsqueeze":
            o = i[0]
            for ax in sorted(int(v) for v in (a["axes"] if "axes" in a else i[1])):
                o = np.expand_dims(o, ax)
        elif op == "Squeeze":
            o = np.squeeze(i[0], axis=tuple(int(v) for v in (a["axes"] if "axes" in a else i[1])))
        elif op == "Concat":
            o = np.concatenate(i, axis=a["axis"])
        elif op == "Cast":
            o = i[0].astype(np.int64 if a["to"] in (6, 7) else np.float64)
        elif op == "ConstantOfShape":
            o = np.full(tuple(i[0]), arr(a["value"]).reshape(-1)[0] if "value" in a else 0.0)
        elif op == "Expand":
            o = i[0] * np.ones(tuple(i[1]), dtype=i[0].dtype)
        elif op == "Where":
            o = np.where(i[0], i[1], i[2])
        elif op == "Slice":
            o = i[0]
            steps = i[4] if len(i) > 4 and i[4] is not None else [1] * len(i[1])
            axes = i[3] if len(i) > 3 and i[3] is not None else range(len(i[1]))
            idx = [slice(None)] * o.ndim
            for s, e, ax, st in zip(i[1], i[2], axes, steps):
                idx[int(ax)] = slice(int(s), int(e), int(st))
            o = o[tuple(idx)]
        else:
            sys.exit(f"onnx_forward: operator {op} not handled")
        env[n.output[0]] = o
    return env[m.graph.output[0].name]


def write_fixture(out):
    """The tiny ViT of the evaluator's tests (random weights, seed 0), in opsets 13 and 17."""
    torch.manual_seed(0)
    model = ViT(side=4, patch=2, dim=8, heads=2, blocks=1, classes=3)
    with torch.no_grad():  # visible LayerNorm affine parameters and class token
        for mod in model.modules():
            if isinstance(mod, nn.LayerNorm):
                mod.weight.add_(0.3 * torch.randn_like(mod.weight))
                mod.bias.add_(0.1 * torch.randn_like(mod.bias))
        model.cls.add_(torch.randn_like(model.cls))
    model.eval()
    x = torch.rand(5, 4, 4)
    np.save(os.path.join(out, "vit_tiny_x.npy"), x.double().reshape(5, -1).numpy())
    m64 = ViT(side=4, patch=2, dim=8, heads=2, blocks=1, classes=3).double()
    m64.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    m64.eval()
    with torch.no_grad():
        y = m64(x.double()).numpy()
    np.save(os.path.join(out, "vit_tiny_y.npy"), y)
    for opset in (13, 17):
        p = os.path.join(out, f"vit_tiny_opset{opset}.onnx")
        ops = export(model, x[:1], p, opset)
        d = float(np.abs(onnx_forward(p, x.double().numpy()) - y).max())
        print(f"{p}: {os.path.getsize(p)} bytes, operators {ops}; numpy evaluator vs PyTorch float64 max |diff| {d:.1e}")


def check_compressed(exe, out, onnx_path, keep, flags, x64, yte, acc_dense, max_loss):
    import onnx
    p = os.path.join(out, f"small_{keep:g}.onnx")
    r = relurec(exe, "compress", "--model", onnx_path, "--data", "fashion-mnist", "--keep", f"{keep:g}", *flags, "--out", p)
    onnx.checker.check_model(onnx.load(p), full_check=True)
    y = np.concatenate([onnx_forward(p, x64[k:k + 2000].numpy()) for k in range(0, len(x64), 2000)])
    acc_np = float((y.argmax(1) == yte.numpy()).mean())
    truth = os.path.join(out, f"truth_{keep:g}.npz")
    np.savez(truth, X=x64.reshape(len(x64), -1).numpy(), Y=y)
    tr = relurec(exe, "eval", "--model", p, "--truth", truth, "--data", "fashion-mnist")
    d = tr["truth_outputs"]["max_abs_error"]
    acc = tr["test"]["accuracy"]
    loss = 100 * (acc_dense - acc)
    ok = d <= 1e-5 and acc == acc_np and loss <= max_loss
    print(f"keep {keep:g} {' '.join(flags)}: params {r['params']}/{r['dense_params']}, accuracy relurec {acc:.4f} numpy-ONNX {acc_np:.4f} "
          f"(dense {acc_dense:.4f}, loss {loss:.2f} points, bound {max_loss:g}), logits max |diff| {d:.2e}, "
          f"onnx.checker OK, compress {r['timings']['compress']:.1f} s (wall {r['_wall']:.1f} s)"
          + ("" if ok else "  MISMATCH"), flush=True)
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epochs", type=int, default=None, help="epochs to train (default 4; 0 with --reuse)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--opset", type=int, default=17, help="ONNX opset of the export (13: LayerNorm decomposed)")
    ap.add_argument("--out", default="", help="directory for vit.pt, vit.onnx, truth.npz (default: temporary)")
    ap.add_argument("--reuse", action="store_true", help="start from vit.pt in --out")
    ap.add_argument("--relurec", default="", help="relurec binary (default: go build ./cmd/relurec)")
    ap.add_argument("--min-accuracy", type=float, default=0.84)
    ap.add_argument("--compress", default="", help="comma-separated --keep fractions to compress with relurec and check")
    ap.add_argument("--compress-flags", default="",
                    help="further flags of relurec compress (default: none, its default recipe)")
    ap.add_argument("--max-loss", type=float, default=1.0, help="accuracy points keep ≥ 0.5 may lose")
    ap.add_argument("--max-loss-low", type=float, default=2.5, help="accuracy points keeps below 0.5 may lose")
    ap.add_argument("--train-only", action="store_true", help="train and export, no relurec checks")
    ap.add_argument("--fixture", default="", help="write the tiny test fixtures to this directory and exit")
    args = ap.parse_args()
    if args.fixture:
        write_fixture(args.fixture)
        return
    if args.epochs is None:
        args.epochs = 0 if args.reuse else 4
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)

    xtr, ytr, te_u8, xte, yte = load_fashion()
    tmp, out = out_dir(args.out)
    model = ViT()
    train_s = train_or_load(model, os.path.join(out, "vit.pt"), args.reuse, args.epochs, xtr, ytr, xte, yte)

    onnx_path = os.path.join(out, "vit.onnx")
    ops = export(model, xte[:1], onnx_path, args.opset)
    print(f"exported {onnx_path} (opset {args.opset}): operators {ops}")

    x64, acc32, acc64, y64, truth = float64_truth(model, ViT().double(), te_u8, xte, yte, out)
    np_err = float(np.abs(onnx_forward(onnx_path, x64[:2000].numpy()) - y64[:2000]).max())
    print(f"PyTorch {torch.__version__}, {args.threads} threads; training {args.epochs} epochs in {train_s:.0f} s; "
          f"parameters {sum(p.numel() for p in model.parameters())}")
    print(f"test accuracy: PyTorch float32 {acc32:.4f}, float64 {acc64:.4f}; numpy ONNX evaluator vs PyTorch "
          f"max |diff| {np_err:.2e} (2000 images)", flush=True)
    if args.train_only:
        sys.exit(0 if acc64 >= args.min_accuracy else 1)

    exe, ok = check_dense(args.relurec, out, onnx_path, truth, acc64, args.min_accuracy)
    for k in filter(None, args.compress.split(",")):
        bound = args.max_loss if float(k) >= 0.5 else args.max_loss_low
        ok = check_compressed(exe, out, onnx_path, float(k), args.compress_flags.split(), x64, yte, acc64, bound) and ok
    print("OK" if ok else "MISMATCH (or accuracy below --min-accuracy / lost beyond --max-loss)")
    if tmp is not None:
        tmp.cleanup()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
