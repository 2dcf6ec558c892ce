#!/usr/bin/env bash
# The one-GPU emulation (cuda/include/echo/cuda/emulate.h) on the GPU machine in one go, logs and a
# summary under $OUT (or ./emulate-gpu-check-out):
#   build     configure (sm_90, Release, no model) and build only the emulation's objects, its
#             tests and its benchmark (not the peer-to-peer kernels)
#   test      cuda_emulate_args, then cuda_emulate with ECHO_REQUIRE_GPU=1 (bit-exact sweep
#             against the CPU reference: outputs, x', states, reports; wide groups and the
#             rotation in wide_groups_and_rotation and wide_groups_keep_finite_inputs_finite)
#   bench     echo_cuda_emulate_bench: the speed goal's configuration (P = 4, 16 Mi bf16 elements
#             per rank, dual compensator, fp32 state), a few others, and the same with wide groups,
#             the Hadamard rotation and both (docs/numerics.md 2.4, 2.6), each beside a
#             device-to-device copy of the same traffic
#   sanitize  compute-sanitizer memcheck and racecheck on the test's small sweep
#   profile   ncu on one quantized-kernel launch of the speed goal's configuration (PROFILE_ARGS
#             overrides the bench's arguments): throughput, occupancy, warp stall reasons,
#             instruction mix, and per-SASS-line samples (profile-sass.csv; the library is built
#             with -lineinfo)
#   batch-ab  the speed goal's bench row against builds of the emulation with other compile-time
#             choices: ALT_FLAGS, ';'-separated CUDA flag sets (default
#             -DECHO_EMULATE_LOAD_BATCH=$ALT_LOAD_BATCH, ALT_LOAD_BATCH default 3; also
#             -DECHO_EMULATE_MIN_BLOCKS=N, the blocks per multiprocessor the default quantized
#             kernel's registers must allow; both override every dtype's choice), each built in
#             BUILD_DIR-altI with cuda_emulate run on it, then the row of the default build and of
#             every alternative in turn, twice
#             (A B.. A B..), so drift between the passes shows. When ALT_FLAGS is set, the build
#             stage builds the alternatives beside the default build. AB_ARGS: the bench's
#             arguments instead of the speed goal's row (e.g. "16777216 4 4 dual bf16 50 wide").
# Stages run in the order given (default: build test bench sanitize). Environment: BUILD_DIR
# (default build-emulate), DEADLINE_S (default 450): the sanitizer runs shrink or are skipped so
# that the whole script ends within that many seconds of its start.
set -uo pipefail
script_start=$(date +%s)
deadline=${DEADLINE_S:-450}
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/nccl_env.sh"
out=${OUT:-$root/emulate-gpu-check-out}
build=${BUILD_DIR:-$root/build-emulate}
mkdir -p "$out"
export ECHO_REQUIRE_GPU=1  # the GPU suites fail rather than skip without a usable device
stages=("$@")
(( ${#stages[@]} )) || stages=(build test bench sanitize)
summary=$out/summary.txt
note() { echo "$*" | tee -a "$summary"; }

stage_build() {
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$out/gpu.txt" 2>&1
  configure "$build" >"$out/configure.log" 2>&1
  local rc=$?
  note "gpu: $(head -1 "$out/gpu.txt"); nccl root: ${nccl_root:-system}"
  (( rc == 0 )) || { note "configure FAILED"; tail -30 "$out/configure.log"; return 1; }
  local alt_pids=() i=0 flags jobs
  jobs=$(nproc)
  if [[ -n ${ALT_FLAGS:-} ]]; then
    # The cores shared between the builds (each nvcc of an emulation unit takes gigabytes).
    jobs=$(( $(nproc) / (${#alt_flags[@]} + 1) ))
    (( jobs >= 2 )) || jobs=2
    for flags in "${alt_flags[@]}"; do
      i=$((i + 1))  # here, not in the background command's arguments (they expand in its subshell)
      build_alt "$i" "$flags" "$jobs" &
      alt_pids+=($!)
    done
  fi
  cmake --build "$build" -j "$jobs" --target cuda_emulate cuda_emulate_args echo_cuda_emulate_bench \
        >"$out/build.log" 2>&1 || { note "build FAILED"; grep -E "error" "$out/build.log" | head -40; return 1; }
  note "build ok"
  local pid
  for pid in "${alt_pids[@]}"; do wait "$pid" || note "an alternative build FAILED (alt*-build.log)"; done
}

# The compile-time alternatives of batch-ab, one flag set each.
alt_flags=()
IFS=';' read -r -a alt_flags <<<"${ALT_FLAGS:--DECHO_EMULATE_LOAD_BATCH=${ALT_LOAD_BATCH:-3}}"

# configure DIR [CMAKE_ARGS...]: the emulation's build configuration (sm_90, Release, no model) in
# DIR, with NCCL's header (the library's internal headers include it) found by scripts/nccl_env.sh.
configure() {
  local dir=$1
  shift
  find_nccl "$dir"
  cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DECHO_BUILD_MODEL=OFF \
        ${nccl_root:+-DNCCL_ROOT=$nccl_root} -DHDF5_INCLUDE_DIRS=/usr/include/hdf5/serial "$@"
}

# build_alt I FLAGS [JOBS]: the emulation's test and bench built in BUILD_DIR-altI with FLAGS (logs appended:
# a failure of the build stage stays readable after batch-ab builds again).
build_alt() {
  local dir=$build-alt$1
  configure "$dir" "-DCMAKE_CUDA_FLAGS=$2" >>"$out/alt$1-configure.log" 2>&1 &&
    cmake --build "$dir" -j "${3:-$(nproc)}" --target cuda_emulate echo_cuda_emulate_bench >>"$out/alt$1-build.log" 2>&1
}

# run_suite LABEL LOG EXE [ARGS...]: one Boost.Test executable, its verdict in the summary.
run_suite() {
  local label=$1 log=$2 exe=$3 rc
  shift 3
  timeout "${TEST_TIMEOUT:-300}" "$build/bin/$exe" --log_level=test_suite --report_level=short "$@" >"$log" 2>&1
  rc=$?
  note "$label: rc=$rc $(grep -E 'Test module|failure|error' "$log" | grep -v 'no errors' | head -8 | tr '\n' ' ')"
}

stage_test() {
  run_suite cuda_emulate_args "$out/test-emulate-args.log" cuda_emulate_args
  run_suite cuda_emulate "$out/test-emulate.log" cuda_emulate
}

stage_bench() {
  local b=$build/bin/echo_cuda_emulate_bench args
  # elements ranks bits compensator dtype iterations [options]; the first line is the speed goal's,
  # then the transport options beside it (docs/numerics.md 2.4, 2.6), and the local residual in
  # compensator units 'stream' without and with profile and clip (6.1).
  local runs=("16777216 4 4 dual bf16 50" "16777216 4 4 dual-local-bf16 bf16 50" "16777216 4 4 off bf16 50"
              "16777216 8 4 dual bf16 30" "16777216 4 8 dual fp16 30" "16777216 2 4 single fp32 30"
              "16777216 4 4 dual bf16 50 wide" "16777216 4 4 dual bf16 50 rotation"
              "16777216 4 4 dual-local bf16 50 rotation" "16777216 4 4 dual bf16 50 wide-rotation"
              "16777216 4 4 dual-local bf16 50" "16777216 4 4 dual-local bf16 50 stream"
              "16777216 4 4 dual-local bf16 50 stream-sqrt-clip")
  for args in "${runs[@]}"; do
    echo "== echo_cuda_emulate_bench $args"
    # shellcheck disable=SC2086  # args are the tool's word list
    timeout 120 "$b" $args 2>&1
    echo "rc=$?"
  done | tee "$out/bench.log"
  note "bench: $(grep -E '^ratio' "$out/bench.log" | head -1) (P = 4, 16 Mi bf16, dual, fp32 state); all ratios: $(grep -E '^ratio' "$out/bench.log" | awk '{print $2}' | tr '\n' ' ')"
  # The options beside plain 4-bit (P = 4, 16 Mi bf16, 4-bit, dual): median ms of each row.
  note "options, median ms: $(awk '/^== / {label = $0; sub(/^== echo_cuda_emulate_bench 16777216 /, "", label)} /^emulation median/ {print label ": " $3}' "$out/bench.log" | grep -E '^4 4 dual' | tr '\n' ';')"
}

stage_sanitize() {
  local tool left
  for tool in memcheck racecheck; do
    left=$(( deadline - ($(date +%s) - script_start) ))
    if (( left < 40 )); then
      note "compute-sanitizer $tool: skipped ($left s left of the ${deadline} s budget)"
      continue
    fi
    (( left > 150 )) && left=150
    timeout "$left" compute-sanitizer --tool $tool --error-exitcode 9 "$build/bin/cuda_emulate" \
      --run_test=small_sweep_for_sanitizers >"$out/sanitize-$tool.log" 2>&1
    note "compute-sanitizer $tool (small sweep): rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|failure' "$out/sanitize-$tool.log" | tail -2 | tr '\n' ' ')"
  done
}

stage_profile() {
  local b=$build/bin/echo_cuda_emulate_bench
  # shellcheck disable=SC2086  # the bench's word list
  timeout 300 ncu --clock-control none -k regex:emulate_quantized_kernel --launch-skip 5 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section SourceCounters \
    --section InstructionStats -o "$out/profile" -f $b ${PROFILE_ARGS:-16777216 4 4 dual bf16 8} \
    >"$out/profile-run.log" 2>&1
  note "ncu profile: rc=$?"
  ncu -i "$out/profile.ncu-rep" --page details >"$out/profile-details.txt" 2>&1
  ncu -i "$out/profile.ncu-rep" --page source --csv --print-source sass >"$out/profile-sass.csv" 2>&1 ||
    note "ncu source page: rc=$?"
  grep -E "Duration|Compute \(SM\) Throughput|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Executed Ipc|Issue Slots Busy|Stall|Block Limit" \
    "$out/profile-details.txt" | head -40 | tee -a "$summary"
}

stage_batch-ab() {
  local args=${AB_ARGS:-16777216 4 4 dual bf16 50} i pass dir label
  for i in "${!alt_flags[@]}"; do
    build_alt $((i + 1)) "${alt_flags[i]}" || { note "batch-ab: build of ${alt_flags[i]} FAILED"; return 1; }
    timeout "${TEST_TIMEOUT:-300}" "$build-alt$((i + 1))/bin/cuda_emulate" --report_level=short \
      >"$out/alt$((i + 1))-test.log" 2>&1
    note "batch-ab: cuda_emulate (${alt_flags[i]}): rc=$?"
  done
  for pass in 1 2; do
    for i in default "${!alt_flags[@]}"; do
      if [[ $i == default ]]; then
        dir=$build label=default
      else
        dir=$build-alt$((i + 1)) label=${alt_flags[i]}
      fi
      echo "== pass $pass, $label ($dir): echo_cuda_emulate_bench $args"
      # shellcheck disable=SC2086  # args are the tool's word list
      timeout 120 "$dir/bin/echo_cuda_emulate_bench" $args 2>&1
    done
  done | tee "$out/batch-ab.log"
  note "batch-ab (default, then ${ALT_FLAGS:-${alt_flags[0]}}; two passes): $(grep -E '^ratio' "$out/batch-ab.log" | awk '{print $2}' | tr '\n' ' ')"
}

for s in "${stages[@]}"; do
  start=$(date +%s)
  "stage_$s" || note "stage $s failed"
  note "stage $s: $(( $(date +%s) - start )) s"
done
