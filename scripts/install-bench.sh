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

scripts/install-datasets.sh

pkgs="python3-numpy python3-torch python3-sklearn python3-matplotlib python3-onnx"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
missing="${missing# }"
if [ -z "$missing" ]; then
  echo "install-bench: $pkgs installed"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-bench: apt-get not found; install $missing (Debian names) for /usr/bin/python3" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "install-bench: need root to run apt-get" >&2; exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
for p in $missing; do
  if ! apt-cache show "$p" >/dev/null 2>&1; then
    $sudo apt-get update -qq
    break
  fi
done
# shellcheck disable=SC2086 # one word per package
$sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
echo "install-bench: installed $missing"
