#!/usr/bin/env bash
# Install the data sets and test tools relurec's data tests and experiments
# use, from Debian packages. Idempotent: does nothing when everything is
# present. Needs root (or sudo) on a Debian/Ubuntu machine; elsewhere it
# explains and exits 1 (0 when only the optional tools are missing).
#
#   dataset-fashion-mnist  ->  /usr/share/datasets/fashion-mnist/*-ubyte.gz
#   python3-onnx           ->  the onnx module for /usr/bin/python3, used by
#                              nn's TestONNXPythonCheck (optional)
#
# Tests that need a data set or tool skip with a message when it is absent.
set -euo pipefail

dir=/usr/share/datasets/fashion-mnist
files="train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz"

present() {
  for f in $files; do [ -s "$dir/$f" ] || return 1; done
}

# installed PKG: whether dpkg knows PKG as installed.
installed() {
  command -v dpkg-query >/dev/null 2>&1 &&
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

missing=""
present || missing="dataset-fashion-mnist"
installed python3-onnx || missing="$missing python3-onnx"
missing="${missing# }"

if [ -z "$missing" ]; then
  echo "install-datasets: Fashion-MNIST already installed in $dir; python3-onnx installed"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  if present; then
    echo "install-datasets: Fashion-MNIST already installed in $dir;" \
         "apt-get not found, so python3-onnx (optional: pip install onnx) was not installed"
    exit 0
  fi
  echo "install-datasets: apt-get not found; install Fashion-MNIST's four IDX files into $dir" \
       "or point RELUREC_FASHION_MNIST at a directory holding them" >&2
  exit 1
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "install-datasets: need root to run apt-get" >&2; exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
# A fresh machine has no package lists; refresh them when a package is
# unknown to apt.
for p in $missing; do
  if ! apt-cache show "$p" >/dev/null 2>&1; then
    $sudo apt-get update -qq
    break
  fi
done
if ! present; then
  $sudo apt-get install -y -qq --no-install-recommends dataset-fashion-mnist >/dev/null
fi
# The optional tool must not fail the data set (older releases lack it).
if ! installed python3-onnx; then
  $sudo apt-get install -y -qq --no-install-recommends python3-onnx >/dev/null ||
    echo "install-datasets: could not install python3-onnx (optional; the ONNX check test will skip)" >&2
fi

if present; then
  echo "install-datasets: Fashion-MNIST in $dir; python3-onnx $(installed python3-onnx && echo installed || echo missing)"
else
  echo "install-datasets: dataset-fashion-mnist installed but $dir lacks the IDX files" >&2
  exit 1
fi
