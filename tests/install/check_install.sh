#!/usr/bin/env bash
# Installs the build tree into a scratch prefix and builds and runs a consumer project against it.
# Usage: check_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
source=$2
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
test -x "$scratch/prefix/bin/echotk"
test -f "$scratch/prefix/include/echo/allreduce.h"
cmake -S "$source/tests/install/consumer" -B "$scratch/consumer" -DCMAKE_PREFIX_PATH="$scratch/prefix" >/dev/null
cmake --build "$scratch/consumer" >/dev/null
"$scratch/consumer/consumer"
# Built where the package has the CUDA library, against its headers without NCCL's.
if [[ -x "$scratch/consumer/cuda_consumer" ]]; then
  "$scratch/consumer/cuda_consumer"
fi
