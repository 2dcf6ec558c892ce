#!/usr/bin/env bash
# Configures and builds everything into build/ (CUDA sources too when nvcc is found).
#   ECHO_BUILD_DIR     the build folder (default build)
#   ECHO_CMAKE_ARGS    extra configure arguments (-DECHO_ENABLE_CUDA=OFF: the CPU toolkit alone)
#   ECHO_BUILD_TARGETS only these targets (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
scripts/fetch_nvml_header.sh
# nvcc lives outside the default PATH in the usual toolkit layout.
if [ -z "${CUDACXX:-}" ] && ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
jobs=$(nproc)
dir=${ECHO_BUILD_DIR:-build}
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release ${ECHO_CMAKE_ARGS:-} >"$dir.configure.log" 2>&1 ||
  { cat "$dir.configure.log"; exit 1; }
targets=()
for t in ${ECHO_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$dir" -j"$jobs" "${targets[@]}"
