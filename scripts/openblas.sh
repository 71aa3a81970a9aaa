#!/usr/bin/env bash
# Build, test or benchmark relurec with the optional OpenBLAS backend: the
# build tag "openblas" makes internal/blasbackend route gonum's BLAS (blas64)
# and LAPACK (lapack64) to OpenBLAS and LAPACKE through cgo. The default build
# stays pure Go and needs nothing but the Go toolchain; this script is the only
# place that needs a C compiler and the Debian packages below.
#
#   scripts/openblas.sh [test]   go test -tags openblas ./...           (default)
#   scripts/openblas.sh build    go build -tags openblas -o bin/relurec-openblas ./cmd/relurec
#   scripts/openblas.sh bench    go test -bench Dgemm ./internal/blasbackend, pure Go then OpenBLAS
#
# Extra arguments after the command go to `go test` / `go build`, e.g.
#   scripts/openblas.sh test -run TestFit ./twolayer
# (package patterns given there replace ./...).
#
# Threads: OpenBLAS starts its own thread pool, sized by OPENBLAS_NUM_THREADS
# (default: one per core), independently of GOMAXPROCS. For a single-threaded
# comparison with the pure-Go build set both:
#   OPENBLAS_NUM_THREADS=1 GOMAXPROCS=1 scripts/openblas.sh bench
#
# Installs libopenblas-dev, liblapacke-dev, gcc and pkg-config with apt-get
# when they are missing (as root, or through sudo).
set -euo pipefail
cd "$(dirname "$0")/.."

cmd=${1:-test}
[ $# -gt 0 ] && shift

case "$cmd" in
  test|build|bench) ;;
  -h|--help|help)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0 ;;
  *)
    echo "openblas.sh: unknown command '$cmd' (want test, build or bench)" >&2
    exit 2 ;;
esac

. scripts/apt.sh

# The Debian packages the cgo build needs, installed when absent.
missing=$(apt_missing libopenblas-dev liblapacke-dev gcc pkg-config)
if [ -n "$missing" ]; then
  # shellcheck disable=SC2086 # one word per package
  apt_install openblas.sh $missing
fi

export CGO_ENABLED=1
# internal/blasbackend/openblas.go links -lopenblas -llapacke itself; the
# variable is kept so that a different OpenBLAS build can be put first.
export CGO_LDFLAGS="${CGO_LDFLAGS:--lopenblas}"

case "$cmd" in
  test)
    if [ $# -eq 0 ]; then set -- ./...; fi
    go test -tags openblas "$@"
    ;;
  build)
    mkdir -p bin
    go build -tags openblas -o bin/relurec-openblas "$@" ./cmd/relurec
    echo "openblas.sh: built bin/relurec-openblas ($(bin/relurec-openblas --version 2>/dev/null || true))" >&2
    ;;
  bench)
    echo "== pure Go (gonum), GOMAXPROCS=${GOMAXPROCS:-all cores}" >&2
    go test -run '^$' -bench Dgemm "$@" ./internal/blasbackend
    echo "== OpenBLAS, OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-all cores}" >&2
    go test -tags openblas -run '^$' -bench Dgemm "$@" ./internal/blasbackend
    ;;
esac
