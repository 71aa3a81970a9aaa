#!/usr/bin/env bash
# Install what the peer comparisons in bench/ need, from Debian packages:
# the Fashion-MNIST data set (through scripts/install-datasets.sh) and, for
# /usr/bin/python3,
#
#   python3-numpy       every script
#   python3-torch       the PyTorch comparisons (twolayer_vs_pytorch.py,
#                       twolayer_grid.py, torch_front_door.py,
#                       extract_fashion.py, cnn_fashion.py, ...)
#   python3-sklearn     huber_vs_sklearn.py
#   python3-matplotlib  the plots of twolayer_grid.py
#   python3-onnx        ONNX checks
#
# Idempotent: does nothing when everything is present. Needs root (or sudo)
# and apt-get. `go test ./...` needs none of this; tests that use a Python
# package skip with a message when it is absent.
#
#   scripts/install-bench.sh
#   /usr/bin/python3 bench/torch_front_door.py --threads 1
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/apt.sh

scripts/install-datasets.sh

pkgs="python3-numpy python3-torch python3-sklearn python3-matplotlib python3-onnx"
missing=$(apt_missing $pkgs)
if [ -z "$missing" ]; then
  echo "install-bench: $pkgs installed"
  exit 0
fi
# shellcheck disable=SC2086 # one word per package
apt_install install-bench $missing
echo "install-bench: installed $missing"
