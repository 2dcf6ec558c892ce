#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds everything, fetches the SmolLM2 model into
# its cache, prepares the notebooks' Python environment, and runs every CTest test (the notebooks
# are executed by one of them). GPU tests (label gpu) run only where a GPU is visible.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
scripts/setup_model.sh >/dev/null

# Notebooks run in their own virtual environment (packages from PyPI).
venv=build/notebook-venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  nbconvert nbclient ipykernel matplotlib h5py numpy
export ECHO_NOTEBOOK_PYTHON="$PWD/$venv/bin/python"

ctest_args=(--test-dir build --output-on-failure -j"$(nproc)")
if ! (command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1); then
  echo "test: no GPU visible, skipping tests labelled gpu" >&2
  ctest_args+=(-LE gpu)
fi
ctest "${ctest_args[@]}"
