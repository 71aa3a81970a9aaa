#!/usr/bin/env bash
# Install the data sets and test tools relurec's data tests and experiments
# use, from Debian packages. Idempotent: does nothing when everything is
# present. Needs root (or sudo) on a Debian/Ubuntu machine; elsewhere it
# explains and exits 1 (0 when only the optional tools are missing).
#
#   dataset-fashion-mnist  ->  /usr/share/datasets/fashion-mnist/*-ubyte.gz
#   python3-onnx           ->  the onnx module for /usr/bin/python3, used by
#                              modelfile's TestONNXPythonCheck (optional)
#
# Tests that need a data set or tool skip with a message when it is absent.
set -euo pipefail
. "$(dirname "$0")/apt.sh"

dir=/usr/share/datasets/fashion-mnist
files="train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz"

present() {
  for f in $files; do [ -s "$dir/$f" ] || return 1; done
}

if present && apt_installed python3-onnx; then
  echo "install-datasets: Fashion-MNIST already installed in $dir; python3-onnx installed"
  exit 0
fi

if ! present; then
  apt_install install-datasets dataset-fashion-mnist || {
    echo "install-datasets: or put Fashion-MNIST's four IDX files into $dir," \
         "or point RELUREC_FASHION_MNIST at a directory holding them" >&2
    exit 1
  }
fi
# The optional tool must not fail the data set (older releases lack it).
if ! apt_installed python3-onnx; then
  apt_install install-datasets python3-onnx ||
    echo "install-datasets: could not install python3-onnx (optional: pip install onnx; the ONNX check test will skip)" >&2
fi

if present; then
  echo "install-datasets: Fashion-MNIST in $dir; python3-onnx $(apt_installed python3-onnx && echo installed || echo missing)"
else
  echo "install-datasets: dataset-fashion-mnist installed but $dir lacks the IDX files" >&2
  exit 1
fi
