#!/usr/bin/env bash
# Builds, tests and benchmarks the CUDA library on the GPU machine in one go; logs go to $OUT
# (or ./gpu-check-out). Stages run in the order given (default: build test bench):
#   build      configure + build echotk and the GPU tests (sm_90, Release)
#   test       ctest -L gpu (bit-exact sweep, device API, graph replay, 10,000 calls, timeout,
#              NCCL transport, both process models)
#   sanitize   compute-sanitizer memcheck and racecheck on a reduced device-API test
#   bench      echotk bench, 64 KiB .. 1 GiB bf16, all rows, appended to docs/bench-<date>.md
#   bench-bg   the same under background peer-to-peer traffic (duty from BENCH_DUTY, default 0.5)
#   tune       a few pipeline depths at 1 GiB (echo4 rows only)
# Environment: BUILD_DIR (default build-gpu), BENCH_ARGS (extra echotk bench options).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/gpu-check-out}
build=${BUILD_DIR:-$root/build-gpu}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
stages=("$@")
(( ${#stages[@]} )) || stages=(build test bench)
date_tag=$(date -u +%Y-%m-%d)
summary=$out/summary.txt
note() { echo "$*" | tee -a "$summary"; }

stage_build() {
  local nccl_root=""
  if [[ ! -e /usr/local/cuda/include/nccl.h && ! -e /usr/include/nccl.h ]]; then
    local h
    h=$(find / -xdev -name nccl.h -path '*include*' 2>/dev/null | head -1)
    [[ -n $h ]] && nccl_root=$(dirname "$(dirname "$h")")
  fi
  note "nccl root: ${nccl_root:-system}"
  # The wheel ships libnccl.so.2 only: give the linker the plain name beside it.
  if [[ -n $nccl_root && ! -e $nccl_root/lib/libnccl.so && -e $nccl_root/lib/libnccl.so.2 ]]; then
    mkdir -p "$build/nccl-lib" && ln -sf "$nccl_root/lib/libnccl.so.2" "$build/nccl-lib/libnccl.so"
    export LIBRARY_PATH="$build/nccl-lib:${LIBRARY_PATH:-}"
  fi
  [[ -n $nccl_root ]] && export LD_LIBRARY_PATH="$nccl_root/lib:${LD_LIBRARY_PATH:-}"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DECHO_BUILD_MODEL=OFF ${nccl_root:+-DNCCL_ROOT=$nccl_root} \
        -DHDF5_INCLUDE_DIRS=/usr/include/hdf5/serial >"$out/configure.log" 2>&1 ||
    { note "configure FAILED"; tail -30 "$out/configure.log"; return 1; }
  cmake --build "$build" -j "$(nproc)" --target echotk cuda_bitexact cuda_device_api echo_cuda_multiprocess \
        >"$out/build.log" 2>&1 || { note "build FAILED"; grep -E "error" "$out/build.log" | head -40; return 1; }
  note "build ok"
}

stage_test() {
  (cd "$build" && ctest -L gpu --output-on-failure --timeout 900 -j 1 >"$out/ctest.log" 2>&1)
  local rc=$?
  note "ctest -L gpu: rc=$rc"
  grep -E "tests passed|Failed|FAILED|\*\*\*" "$out/ctest.log" | head -40 | tee -a "$summary"
}

stage_sanitize() {
  local t=$build/bin/cuda_device_api
  [[ -x $t ]] || t=$(find "$build" -name cuda_device_api -type f | head -1)
  for tool in memcheck racecheck; do
    timeout 550 compute-sanitizer --tool $tool --error-exitcode 9 "$t" \
      --run_test=in_place_out_of_place_shifted_and_rounds >"$out/sanitize-$tool.log" 2>&1
    note "compute-sanitizer $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitize-$tool.log" | tail -1)"
  done
}

run_bench() {
  local tag=$1; shift
  local md=$root/docs/bench-$date_tag.md
  [[ -e $md ]] || {
    echo "# echotk bench, $date_tag"
    echo
    echo "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sort | uniq -c)"
    echo
    echo "Produced by scripts/gpu_check.sh; columns as nccl-tests; speedup against nccl-bf16 at the same size."
  } >"$md"
  "$build/bin/echotk" bench --markdown "$md" ${BENCH_ARGS:-} "$@" 2>&1 | tee "$out/bench-$tag.log"
  cp "$md" "$out/"
}

stage_bench() { run_bench plain; }
stage_bench-bg() { run_bench bg --background-duty "${BENCH_DUTY:-0.5}" -b 1048576 -f 4; }
stage_tune() {
  for t in 4 8 16 32; do
    echo "## tiles-per-wave $t" | tee -a "$out/tune.log"
    "$build/bin/echotk" bench -b 1073741824 -e 1073741824 -n 20 --skip-verify --tiles-per-wave $t \
      --rows nccl-bf16 echo4 echo4-comp-local 2>&1 | tee -a "$out/tune.log" | grep -E "^\|"
  done
}

for s in "${stages[@]}"; do
  start=$(date +%s)
  "stage_$s" || note "stage $s failed"
  note "stage $s: $(( $(date +%s) - start )) s"
done
