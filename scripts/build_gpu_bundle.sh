#!/usr/bin/env bash
# Builds the CUDA binaries that scripts/gpu_check.sh runs (echotk, the GPU tests, the stage probe)
# on a machine without a GPU, in a form that runs on the GPU machine as it is: sm_90, shared
# libraries under <dir>/lib found through $ORIGIN, Boost.Test header-only, CUDA runtime shared.
#   scripts/build_gpu_bundle.sh [dir] [cmake options...]   (default build-gpu; e.g.
#   -DECHO_CUDA_JOB_TRACE=ON for the kernels that echo_cuda_job_trace reads)
# Then, on the GPU machine: BUILD_DIR=<dir> bash scripts/gpu_check.sh test bench ...
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(realpath -m "${1:-$root/build-gpu}")
shift || true
mkdir -p "$dir"
"$root/scripts/fetch_nvml_header.sh"
cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DECHO_BUILD_MODEL=OFF \
      -DBUILD_SHARED_LIBS=ON -DCMAKE_CUDA_RUNTIME_LIBRARY=Shared -DCMAKE_LIBRARY_OUTPUT_DIRECTORY="$dir/lib" \
      -DCMAKE_BUILD_RPATH_USE_ORIGIN=ON -DECHO_HEADER_ONLY_BOOST_TEST=ON "$@" >"$dir/configure.log" 2>&1 ||
  { tail -30 "$dir/configure.log"; exit 1; }
cmake --build "$dir" -j "$(nproc)" --target echotk cuda_bitexact cuda_device_api cuda_numerics_intrinsics bench_power_monitor \
      echo_cuda_multiprocess echo_cuda_stage_probe echo_cuda_job_trace
du -sh "$dir/bin" "$dir/lib"
