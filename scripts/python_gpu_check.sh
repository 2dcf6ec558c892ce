#!/usr/bin/env bash
# On a GPU machine with torch, transformers, nanobind, scikit-build-core and pytest installed:
# builds and installs echotk from source into the current Python (no downloads), then runs the
# Python suite; the GPU cases (python/tests/test_cuda.py) run there. Needs build/bin/echotk for the
# replay comparisons (scripts/gpu_check.sh build makes it). Logs under $OUT (default build/out).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-build/out}
mkdir -p "$out"
python=${PYTHON:-python3}
"$python" -m pip install --no-deps --no-build-isolation . >"$out/python-install.log" 2>&1 ||
  { tail -40 "$out/python-install.log"; exit 1; }
ECHO_PYTHON="$python" scripts/python_tests.sh -rs 2>&1 | tee "$out/python-tests.log"
