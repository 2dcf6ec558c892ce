#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds everything, runs every CTest test.
# GPU tests (label gpu) run only where a GPU is visible.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ctest_args=(--test-dir build --output-on-failure -j"$(nproc)")
if ! (command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1); then
  echo "test: no GPU visible, skipping tests labelled gpu" >&2
  ctest_args+=(-LE gpu)
fi
ctest "${ctest_args[@]}"
