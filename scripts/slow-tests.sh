#!/usr/bin/env bash
# Runs the whole test suite with the `slow` build tag: besides the default
# tests, the statistical checks the docs cite that take too long for every
# `go test ./...` (many seeds, large n, whole experiment tables, the
# acceptance instances). Files holding them start with `//go:build slow`.
#
#   scripts/slow-tests.sh                 # every package
#   scripts/slow-tests.sh ./depth2 -v     # one package, arguments go to go test
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then
  set -- ./...
fi
exec go test -tags slow -timeout 120m "$@"
