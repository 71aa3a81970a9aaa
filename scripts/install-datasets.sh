#!/usr/bin/env bash
# Install the data sets relurec's data tests and experiments use, from Debian
# packages. Idempotent: does nothing when everything is present. Needs root
# (or sudo) on a Debian/Ubuntu machine; elsewhere it explains and exits 1.
#
#   dataset-fashion-mnist  ->  /usr/share/datasets/fashion-mnist/*-ubyte.gz
#
# Tests that need a data set skip with a message when it is absent.
set -euo pipefail

dir=/usr/share/datasets/fashion-mnist
files="train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz"

present() {
  for f in $files; do [ -s "$dir/$f" ] || return 1; done
}

if present; then
  echo "install-datasets: Fashion-MNIST already installed in $dir"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
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
# A fresh machine has no package lists; refresh them when the package is
# unknown to apt.
if ! apt-cache show dataset-fashion-mnist >/dev/null 2>&1; then
  $sudo apt-get update -qq
fi
$sudo apt-get install -y -qq --no-install-recommends dataset-fashion-mnist >/dev/null

if present; then
  echo "install-datasets: Fashion-MNIST installed in $dir"
else
  echo "install-datasets: dataset-fashion-mnist installed but $dir lacks the IDX files" >&2
  exit 1
fi
