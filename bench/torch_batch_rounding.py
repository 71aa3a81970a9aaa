"""How PyTorch's float32 Linear rounds a row by its position in the batch.

One random input is copied into every row of a batch and run through a
784-32-16-10 MLP at PyTorch's initialisation (seed 0, one thread). For each
batch size the script prints how many different answers the copies get,
and for the first 24 rows which answer each row got (0 = row 0's). The
extraction's Jacobians are one batch each, so rows answering differently
put a common offset into a fixed set of their columns (docs/extract.md,
"Two hidden layers behind a float32 oracle"):

    OPENBLAS_CORETYPE=Haswell /usr/bin/python3 bench/torch_batch_rounding.py
    OPENBLAS_CORETYPE=SkylakeX /usr/bin/python3 bench/torch_batch_rounding.py

The rounding is the BLAS kernel's: Debian's PyTorch multiplies through
OpenBLAS, whose AVX2 sgemm (Haswell, Zen) answers rows 0-5 and 6-11 of
every twelve differently, while its AVX-512 one (SkylakeX) answers every
copy alike. OpenBLAS picks the kernel for the CPU unless OPENBLAS_CORETYPE
names one.
"""
import os

import numpy as np
import torch
import torch.nn as nn


def main():
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 10))
    x = torch.from_numpy(np.random.default_rng(1).standard_normal((1, 784))).float()
    print("OPENBLAS_CORETYPE=%s" % os.environ.get("OPENBLAS_CORETYPE", "unset (OpenBLAS picks the kernel for this CPU)"))
    print("%6s %9s  %s" % ("rows", "answers", "answer of rows 0-23"))
    with torch.no_grad():
        for n in (64, 786, 1572, 15720):
            y = model(x.repeat(n, 1)).numpy()
            ids, kinds = {}, []
            for row in y:
                kinds.append(ids.setdefault(row.tobytes(), len(ids)))
            print("%6d %9d  %s" % (n, len(ids), " ".join(str(k) for k in kinds[:24])))


if __name__ == "__main__":
    main()
