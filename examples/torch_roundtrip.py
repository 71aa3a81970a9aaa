#!/usr/bin/python3
"""Move networks between relurec and PyTorch through safetensors files.

Needs PyTorch and numpy (Debian: `apt-get install python3-torch`, then use
/usr/bin/python3). Uses safetensors.torch when importable and otherwise a
small reader/writer of the format below, so the `safetensors` package is
optional. Run from anywhere:

  # relurec -> PyTorch: load a model relurec saved into nn.Sequential with
  # load_state_dict(strict=True) and compare its outputs on X with Y.
  /usr/bin/python3 examples/torch_roundtrip.py check model.safetensors X.npy Y.npy

  # PyTorch -> relurec: save a random nn.Sequential's state_dict as
  # OUT_DIR/torch_model.safetensors with inputs torch_X.npy and outputs
  # torch_Y.npy, for relurec to load and evaluate.
  /usr/bin/python3 examples/torch_roundtrip.py export OUT_DIR

  # Both directions end to end (from the repository root; runs the Go half,
  # `go test ./modelfile -run TestTorchInterop`, in a temporary directory).
  /usr/bin/python3 examples/torch_roundtrip.py selftest

The architecture comes from relurec's "relurec.architecture" metadata when
present; otherwise it is inferred from the nn.Sequential indices as relurec
does (Linear modules two apart have a ReLU between them, one apart nothing).
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
from torch import nn

try:
    from safetensors.torch import load_file as _st_load, save_file as _st_save
except ImportError:  # the format is simple enough to read and write here
    _st_load = _st_save = None

_NP = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "U8": "u1"}


def read_safetensors(path):
    """Return ({name: tensor}, metadata) of a safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {}) or {}
    if _st_load is not None:  # prefer the reference reader when installed
        return _st_load(path), meta
    buf = data[8 + n:]
    tensors = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        if info["dtype"] == "BF16":
            raw = np.frombuffer(buf[b:e], dtype="<u2").astype(np.uint32) << 16
            arr = raw.view(np.float32)
        else:
            arr = np.frombuffer(buf[b:e], dtype=_NP[info["dtype"]])
        tensors[name] = torch.from_numpy(arr.reshape(info["shape"]).copy())
    return tensors, meta


def write_safetensors(path, tensors, metadata):
    """Write {name: tensor} like safetensors.torch.save_file."""
    if _st_save is not None:
        _st_save(tensors, path, metadata=metadata)
        return
    names = sorted(tensors)
    header, chunks, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name in names:
        a = tensors[name].detach().cpu().contiguous().numpy()
        dtype = {np.dtype("float64"): "F64", np.dtype("float32"): "F32"}[a.dtype]
        raw = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        chunks.append(raw)
        off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(chunks))


class RectPow(nn.Module):
    """max(x, 0)^c, relurec's "relupow<c>" activation."""

    def __init__(self, c):
        super().__init__()
        self.c = c

    def forward(self, x):
        return torch.relu(x) ** self.c


class RectExp(nn.Module):
    """exp(max(x, 0)) - 1, relurec's "reluexp" activation."""

    def forward(self, x):
        return torch.expm1(torch.relu(x))


def activation(name):
    """The module of a relurec activation name ("relu", "relupow2", "reluexp"), None for "identity"."""
    if name == "identity":
        return None
    if name == "relu":
        return nn.ReLU()
    if name == "reluexp":
        return RectExp()
    if name.startswith("relupow"):
        return RectPow(float(name[len("relupow"):]))
    raise ValueError(f"unknown relurec activation {name!r}")


def build_sequential(tensors, meta):
    """The nn.Sequential whose state_dict has exactly these keys."""
    modules = []
    if "relurec.architecture" in meta:
        for layer in json.loads(meta["relurec.architecture"]):
            modules.append(nn.Linear(layer["in"], layer["out"], bias=layer["bias"]))
            act = activation(layer["act"])
            if act is not None:
                modules.append(act)
    else:
        idx = sorted({int(k.split(".")[0]) for k in tensors})
        for i, k in enumerate(idx):
            out_f, in_f = tensors[f"{k}.weight"].shape
            modules.append(nn.Linear(in_f, out_f, bias=f"{k}.bias" in tensors))
            if i + 1 < len(idx) and idx[i + 1] - k == 2:
                modules.append(nn.ReLU())
    model = nn.Sequential(*modules)
    if any(t.dtype == torch.float64 for t in tensors.values()):
        model = model.double()
    model.load_state_dict(tensors, strict=True)
    return model.eval()


def check(model_path, x_path, y_path):
    tensors, meta = read_safetensors(model_path)
    model = build_sequential(tensors, meta)
    X, Y = np.load(x_path), np.load(y_path)
    dtype = next(model.parameters()).dtype
    with torch.no_grad():
        out = model(torch.from_numpy(X).to(dtype)).double().numpy()
    dev = np.abs(out - Y).max() / np.abs(Y).max()
    print(f"{os.path.basename(model_path)}: {model}".replace("\n", " "))
    print(f"  dtype {dtype}, X {X.shape} -> Y {Y.shape}: max relative deviation from Y = {dev:.3g}")
    return dev


def export(out_dir, seed=0):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(6, 10), nn.ReLU(), nn.Linear(10, 4, bias=False),
                          nn.Linear(4, 7), nn.ReLU(), nn.Linear(7, 3)).eval()
    X = torch.randn(300, 6)
    with torch.no_grad():
        Y = model(X)
    write_safetensors(os.path.join(out_dir, "torch_model.safetensors"), model.state_dict(), {"format": "pt"})
    np.save(os.path.join(out_dir, "torch_X.npy"), X.numpy())
    np.save(os.path.join(out_dir, "torch_Y.npy"), Y.numpy())
    print(f"wrote torch_model.safetensors ({model})".replace("\n", " "))


def selftest():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as d:
        export(d)
        env = dict(os.environ, RELUREC_INTEROP_DIR=d)
        r = subprocess.run(["go", "test", "./modelfile", "-run", "^TestTorchInterop$", "-count=1", "-v"],
                           cwd=repo, env=env, capture_output=True, text=True)
        print(r.stdout.strip())
        if r.returncode != 0:
            print(r.stderr)
            sys.exit("go test failed: relurec could not reproduce the PyTorch model")
        ok = check(os.path.join(d, "relurec_model.safetensors"), os.path.join(d, "relurec_X.npy"),
                   os.path.join(d, "relurec_Y.npy")) < 1e-12
        ok &= check(os.path.join(d, "relurec_model_f32.safetensors"), os.path.join(d, "relurec_X.npy"),
                    os.path.join(d, "relurec_Y.npy")) < 1e-5
    print("torch", torch.__version__, "safetensors package" if _st_load else "built-in safetensors reader",
          "- all agree" if ok else "- MISMATCH")
    sys.exit(0 if ok else 1)


def main(argv):
    if len(argv) == 4 and argv[0] == "check":
        sys.exit(0 if check(*argv[1:]) < 1e-5 else 1)
    if len(argv) == 2 and argv[0] == "export":
        export(argv[1])
        return
    if argv == ["selftest"]:
        selftest()
        return
    sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
