#!/usr/bin/python3
"""Load any model file relurec writes into PyTorch in one line.

    import sys; sys.path.insert(0, "examples")        # in relurec's checkout, or copy both files
    from load_compressed import load_relurec
    model = load_relurec("small.safetensors")         # an nn.Sequential, in eval mode

Works for what `relurec compress`, `learn` and `train` write as .safetensors: an MLP (its layers
under the file's "relurec.architecture" metadata; a compressed layer is two Linear modules, the
first without bias and without an activation after it) and a CNN (Conv2d, ReLU, MaxPool2d, Flatten,
Linear under "relurec.cnn"). The state dict is loaded with load_state_dict(strict=True), in the
file's precision (float64 unless written with --dtype f32). Needs Debian's python3-torch and
python3-numpy only: the safetensors package is used when installed, not required.

From the command line, prints the module and, given inputs X.npy, writes its outputs:

    /usr/bin/python3 examples/load_compressed.py small.safetensors [X.npy OUT.npy]
"""
import json
import os
import sys

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_roundtrip import activation, build_sequential, read_safetensors, write_safetensors  # noqa: E402,F401


def cnn_modules(arch):
    """The nn.Sequential modules of a "relurec.cnn" architecture."""
    mods = []
    for m in arch["layers"]:
        t = m["type"]
        if t == "conv2d":
            mods.append(nn.Conv2d(m["in"], m["out"], tuple(m["kernel"]), tuple(m["stride"]), tuple(m["padding"]),
                                  bias=m.get("bias", True)))
        elif t == "linear":
            mods.append(nn.Linear(m["in"], m["out"], bias=m.get("bias", True)))
        elif t == "maxpool2d":
            mods.append(nn.MaxPool2d(tuple(m["kernel"]), tuple(m["stride"]), tuple(m["padding"])))
        elif t == "flatten":
            mods.append(nn.Flatten())
        else:
            act = activation(t)
            mods.append(act if act is not None else nn.Identity())
    return mods


class Unflatten(nn.Module):
    """Rows of C·H·W values to N×C×H×W images, as relurec feeds a CNN."""

    def __init__(self, shape):
        super().__init__()
        self.shape = tuple(shape)

    def forward(self, x):
        return x.reshape(x.shape[0], *self.shape) if x.dim() == 2 else x


def load_relurec(path):
    """The nn.Sequential stored in a relurec .safetensors file, weights loaded, in eval mode.

    A CNN takes flat rows (as relurec's --calib files hold them) or N×C×H×W images."""
    tensors, meta = read_safetensors(path)
    if "relurec.cnn" in meta:
        arch = json.loads(meta["relurec.cnn"])
        model = nn.Sequential(*cnn_modules(arch))
        if any(t.dtype == torch.float64 for t in tensors.values()):
            model = model.double()
        model.load_state_dict(tensors, strict=True)
        if len(arch["input"]) == 3:
            model = nn.Sequential(Unflatten(arch["input"]), model)  # "1.weight" is then "1.0.weight"
        return model.eval()
    return build_sequential(tensors, meta)  # an MLP: "relurec.architecture", or a plain state dict


def main(argv):
    if len(argv) not in (1, 3):
        sys.exit(__doc__)
    model = load_relurec(argv[0])
    print(model)
    if len(argv) == 3:
        x = torch.from_numpy(np.load(argv[1])).to(next(model.parameters()).dtype)
        with torch.no_grad():
            np.save(argv[2], model(x).double().numpy())


if __name__ == "__main__":
    main(sys.argv[1:])
