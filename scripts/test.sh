#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds everything, fetches the SmolLM2 model into
# its cache, prepares the notebooks' Python environment, installs the echotk Python package into
# build/py-venv, and runs every CTest test (the notebooks
# are executed by one of them). GPU tests (label gpu) run only where a GPU is visible.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
scripts/setup_model.sh >/dev/null

# Notebooks and tools/results.py (the docs' tables and figures from data/, CTest tools/results_*)
# run in their own virtual environment (packages from PyPI).
venv=build/notebook-venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  nbconvert nbclient ipykernel matplotlib h5py numpy scipy pytest
export ECHO_NOTEBOOK_PYTHON="$PWD/$venv/bin/python"

# The Python package (pip install ., docs/python.md) and its tests' packages (torch, transformers,
# gguf, ...) in their own virtual environment; reruns reuse it and the extension's build folder.
pyvenv=build/py-venv
if [ ! -x "$pyvenv/bin/python" ]; then
  python3 -m venv "$pyvenv"
fi
"$pyvenv/bin/python" -m pip install --quiet --disable-pip-version-check scikit-build-core nanobind
"$pyvenv/bin/python" -m pip install --quiet --disable-pip-version-check --no-build-isolation ".[test]"
export ECHO_PYTHON="$PWD/$pyvenv/bin/python"

ctest_args=(--test-dir build --output-on-failure -j"$(nproc)")
if ! (command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1); then
  echo "test: no GPU visible, skipping tests labelled gpu" >&2
  ctest_args+=(-LE gpu)
fi
ctest "${ctest_args[@]}"
