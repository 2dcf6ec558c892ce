#!/usr/bin/env bash
# Builds, tests and benchmarks the CUDA library on the GPU machine in one go; logs go to $OUT
# (or ./gpu-check-out). Stages run in the order given (default: build test replay conformance bench):
#   build      configure + build echotk and the GPU tests (sm_90, Release)
#   build-emulate  configure BUILD_DIR with ECHO_CUDA_PEER_TO_PEER=OFF and build echotk alone: the
#              one-GPU emulation without the peer-to-peer kernels (a few minutes), for the stages
#              replay-emulate and conformance-emulate
#   test-numerics  cuda_numerics_intrinsics, cuda_bitexact, cuda_device_api only
#   test       ctest -L gpu (the device's conversion instructions against the shared numerics, bit-exact sweep, device API, graph replay, 10,000 calls, timeout, the bench's power monitor,
#              NCCL transport, both process models); on several GPUs the bit-exact sweep once
#              more with every rank on GPU 0
#   replay     scripts/replay_parity.sh: `echotk replay --backend cuda` against `--backend cpu` on
#              five traces (P = 2, 3, 4, 8, the recorded SmolLM2 one) in 15 configurations, the
#              wide-group ones on a trace of huge values and the bundled one, /outputs bit for bit
#   replay-emulate  the same with `--backend emulate` against `--backend cpu`, and compensator units
#              'stream' on the recorded Gemma 3 trace
#   conformance  scripts/conformance_check.sh: `echotk replay --backend cuda --save-outputs` on every
#              case of data/conformance/ and `echotk verify` of each (unsupported cases skipped
#              with the reason), logs in $OUT/conformance
#   conformance-emulate  the same with `--backend emulate` (the one-GPU emulation of the ranks,
#              which runs compensator units 'stream' too), logs in $OUT/conformance-emulate
#   sanitize   compute-sanitizer memcheck and racecheck on a reduced device-API test
#   bench      echotk bench, 64 KiB .. 1 GiB bf16, all rows, appended to $OUT/bench-<date>.md and
#              $OUT/bench-<date>.csv (a full run, bench bench-graph bench-bg, replaces
#              data/bench/bench.csv; its notes go to data/bench/ through
#              scripts/bench_markdown_to_csv.py --notes, then tools/results.py writes docs/bench.md)
#   bench-bg   the same under background peer-to-peer traffic (duty from BENCH_DUTY, default 0.5)
#   bench-graph  64 KiB .. 16 MiB with every call replayed from CUDA graphs of 20 calls (no host
#              launch cost, as serving engines run their decode steps; the matmul rows left out)
#   probe      one-GPU stage timings of the owner kernel (and ncu sections on it unless PROBE_NCU=0)
#   tune       a few pipeline depths at 1 GiB (echo4 rows only)
#   tune-mid   pipeline depths 2 .. 32 at 4-64 MiB (TUNE_ROWS, default nccl-bf16 echo4 echo8)
#   tune-lag   reduce and tail lags (LAG_COMBOS, LAG_ROWS) at 16 MiB .. 1 GiB, two passes
#   tune-tiles the square-root tiling's factor (TILE_FACTORS, TUNE_ROWS) at 16 MiB .. 1 GiB, two passes
#   profile    ncu stall reasons and per-instruction samples of the probe's push and reduce
#   jobtrace   echo_cuda_job_trace: every job of one 1 GiB call per rank (stage, start, end, flag
#              wait), 4-bit uncompensated and compensated (JOBTRACE_ARGS: ';'-separated argument
#              lists), CSVs and summaries in $OUT; needs a BUILD_DIR built with
#              `scripts/build_gpu_bundle.sh DIR -DECHO_CUDA_JOB_TRACE=ON`
#   ab         A against B in one call: the probe runs and an echotk bench of BUILD_DIR (A) and of
#              AB_DIR (B: another build, e.g. a branch's scripts/build_gpu_bundle.sh output; default
#              BUILD_DIR), B with the environment AB_ENV (e.g. "CUDA_DEVICE_MAX_CONNECTIONS=32"),
#              in the order A B A B, so drift between the passes shows
# Environment: BUILD_DIR (default build-gpu), BENCH_ARGS (extra echotk bench options), PROBE_ARGS
# (';'-separated argument lists of echo_cuda_stage_probe), AB_DIR, AB_ENV, AB_BENCH_ARGS (the ab
# stage's echotk bench options; default the 4- and 8-bit rows from 16 MiB to 1 GiB).
# Without the build stage the stages run what BUILD_DIR/bin already holds (for instance binaries
# built elsewhere with scripts/build_gpu_bundle.sh).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/nccl_env.sh"
out=${OUT:-$root/gpu-check-out}
build=${BUILD_DIR:-$root/build-gpu}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# The GPU suites fail rather than skip when CUDA has no usable device here (tests/cuda/device_group.h).
export ECHO_REQUIRE_GPU=1
stages=("$@")
(( ${#stages[@]} )) || stages=(build test replay conformance bench)
date_tag=$(date -u +%Y-%m-%d)
summary=$out/summary.txt
note() { echo "$*" | tee -a "$summary"; }

# configure_and_build TARGETS [CMAKE_ARGS...]: BUILD_DIR configured for sm_90, Release, no model (NCCL
# found by scripts/nccl_env.sh), then TARGETS (space-separated) built; FAILED notes and the first
# errors in the summary.
configure_and_build() {
  local targets=$1
  shift
  find_nccl "$build"
  note "nccl root: ${nccl_root:-system}"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DECHO_BUILD_MODEL=OFF ${nccl_root:+-DNCCL_ROOT=$nccl_root} \
        -DHDF5_INCLUDE_DIRS=/usr/include/hdf5/serial "$@" >"$out/configure.log" 2>&1 ||
    { note "configure FAILED"; tail -30 "$out/configure.log"; return 1; }
  # shellcheck disable=SC2086  # the targets are words
  cmake --build "$build" -j "$(nproc)" --target $targets >"$out/build.log" 2>&1 ||
    { note "build FAILED"; grep -E "error" "$out/build.log" | head -40; return 1; }
}

stage_build() {
  configure_and_build "echotk cuda_bitexact cuda_device_api cuda_numerics_intrinsics bench_power_monitor echo_cuda_multiprocess echo_cuda_stage_probe echo_cuda_job_trace" ||
    return 1
  note "build ok; $(grep -o "echo_cuda_multiprocess: .*" "$out/configure.log")"
}

stage_build-emulate() {
  configure_and_build echotk -DECHO_BUILD_TESTS=OFF -DECHO_CUDA_PEER_TO_PEER=OFF || return 1
  note "build-emulate ok (echotk with the emulation alone)"
}

# The GPU test executables run directly (ctest -L gpu does the same where every test target of
# the project is built; here only the CUDA ones are, to save build time).
# run_suite LABEL LOG EXE [VAR=VALUE...]: one Boost.Test executable, its verdict in the summary.
run_suite() {
  local label=$1 log=$2 exe=$3 rc
  shift 3
  env "$@" timeout ${TEST_TIMEOUT:-400} "$build/bin/$exe" --log_level=test_suite --report_level=short >"$log" 2>&1
  rc=$?
  note "$label: rc=$rc $(grep -E 'Test module|failure|error' "$log" | grep -v 'no errors' | head -8 | tr '\n' ' ')"
}

# The bit-exact suites alone (scripts/numerics_gpu_check.sh): no multi-process run.
stage_test-numerics() {
  local t
  for t in cuda_numerics_intrinsics cuda_bitexact cuda_device_api; do
    run_suite "$t" "$out/test-$t.log" "$t"
  done
}

stage_test() {
  local t
  for t in cuda_numerics_intrinsics cuda_bitexact cuda_device_api bench_power_monitor; do
    run_suite "$t" "$out/test-$t.log" "$t"
  done
  # Every rank on one GPU is the stress case for kernels that must fit beside spinning peers
  # (launch.h, kAuxBlocksPerSm): run the bit-exact suite that way too where there are several.
  if (( $(nvidia-smi -L 2>/dev/null | wc -l) > 1 )); then
    run_suite "cuda_bitexact, every rank on GPU 0" "$out/test-cuda_bitexact-one-gpu.log" cuda_bitexact \
      CUDA_VISIBLE_DEVICES=0
  fi
  timeout 300 "$root/tests/cuda/run_multiprocess.sh" "$build/bin/echo_cuda_multiprocess" >"$out/test-multiprocess.log" 2>&1
  note "multiprocess: rc=$? $(grep -E 'launcher|differ|rank' "$out/test-multiprocess.log" | tr '\n' ' ' | cut -c1-1000)"
}

# replay_parity NAME BACKENDS: scripts/replay_parity.sh with ECHO_PARITY_BACKENDS=BACKENDS, its log
# $out/NAME.log and its verdict in the summary.
replay_parity() {
  local name=$1 work
  work=$(mktemp -d)
  ECHO_PARITY_BACKENDS=$2 "$root/scripts/replay_parity.sh" "$build" "$work" >"$out/$name.log" 2>&1
  note "$name: rc=$? $(tail -1 "$out/$name.log"); $(grep -c '^FAIL' "$out/$name.log") failing"
  rm -rf "$work"
}
stage_replay() { replay_parity replay-parity "cpu cuda"; }
stage_replay-emulate() { replay_parity replay-parity-emulate "cpu emulate"; }

# conformance NAME BACKEND: scripts/conformance_check.sh with BACKEND, its outputs under $out/NAME,
# its log $out/NAME.log, its verdict and failures or skips in the summary.
conformance() {
  local name=$1
  OUT="$out/$name" BACKEND=$2 "$root/scripts/conformance_check.sh" "$build" >"$out/$name.log" 2>&1
  note "$name: rc=$? $(tail -1 "$out/$name.log")"
  grep -E '^(FAIL|SKIP)' "$out/$name.log" | head -20 | tee -a "$summary"
}
stage_conformance() { conformance conformance cuda; }
stage_conformance-emulate() { conformance conformance-emulate emulate; }

stage_probe() {
  local p=$build/bin/echo_cuda_stage_probe
  local runs
  IFS=';' read -ra runs <<<"${PROBE_ARGS:-536870912 4 4 off;536870912 4 4 dual;536870912 4 8 off}"
  for args in "${runs[@]}"; do
    $p $args 2>&1 | tee -a "$out/probe.log"
  done
  [[ ${PROBE_NCU:-1} == 1 ]] || return 0
  timeout 240 ncu --clock-control none -k regex:owner_allreduce --launch-skip 3 --launch-count 3 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section MemoryWorkloadAnalysis $p 134217728 4 4 off >"$out/ncu.log" 2>&1
  note "ncu: rc=$?"
  grep -E "Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Stall|Warp Cycles Per Issued|Block Limit" "$out/ncu.log" | head -60
}

# ncu on the probe's push (launch 4) and reduce (launch 5) kernels: stall reasons and the
# source lines that collect them (the library is built with -lineinfo).
stage_profile() {
  local p=$build/bin/echo_cuda_stage_probe
  timeout 300 ncu --clock-control none -k regex:owner_allreduce --launch-skip 4 --launch-count 2 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section SourceCounters --section InstructionStats -o "$out/profile" -f \
    $p ${PROFILE_ARGS:-134217728 4 4 off} >"$out/profile-run.log" 2>&1
  note "ncu profile: rc=$?"
  ncu -i "$out/profile.ncu-rep" --page details >"$out/profile-details.txt" 2>&1
  ncu -i "$out/profile.ncu-rep" --page source --csv --print-source sass >"$out/profile-sass.csv" 2>&1 ||
    note "ncu source page: rc=$?"
  grep -E "Duration|Compute \(SM\) Throughput|DRAM Throughput|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Executed Ipc|Stall" "$out/profile-details.txt" | head -40
}

stage_sanitize() {
  # One GPU, no peer waits: every stage kernel at an awkward size under memcheck and racecheck, in
  # the variants that stage their loads through shared memory (uncompensated 4-bit; fp32 and bf16
  # state on 8-element lanes, bf16 state on 16).
  local p=$build/bin/echo_cuda_stage_probe comp
  for comp in off dual dual-bf16 global-bf16; do
    for tool in memcheck racecheck; do
      timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 "$p" 1000003 4 4 $comp >"$out/sanitize-$tool-$comp.log" 2>&1
      note "compute-sanitizer $tool (stage probe, $comp): rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitize-$tool-$comp.log" | tail -1)"
    done
  done
  # Peer-to-peer calls across the GPUs (in place, shifted, several rounds) under memcheck.
  timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 "$build/bin/cuda_device_api" \
    --run_test=in_place_out_of_place_shifted_and_rounds >"$out/sanitize-memcheck-p2p.log" 2>&1
  note "compute-sanitizer memcheck (P2P device API): rc=$? $(grep -E 'ERROR SUMMARY|timed out|passed|failed' "$out/sanitize-memcheck-p2p.log" | tail -2 | tr '\n' ' ')"
  # The exact path's low-latency lines across the GPUs, several rounds per call, under memcheck.
  timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 "$build/bin/cuda_bitexact" \
    --run_test=exact_path_in_several_rounds >"$out/sanitize-memcheck-exact.log" 2>&1
  note "compute-sanitizer memcheck (exact path): rc=$? $(grep -E 'ERROR SUMMARY|timed out|passed|failed' "$out/sanitize-memcheck-exact.log" | tail -2 | tr '\n' ' ')"
}

run_bench() {
  local tag=$1; shift
  local md=$out/bench-$date_tag.md csv=$out/bench-$date_tag.csv
  [[ -e $md ]] || {
    echo "# echotk bench, $date_tag"
    echo
    echo "$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sort | uniq -c)"
    echo
    echo "Produced by scripts/gpu_check.sh; columns as nccl-tests; speedup against nccl-bf16 at the same size."
  } >"$md"
  "$build/bin/echotk" bench --markdown "$md" --csv "$csv" ${BENCH_ARGS:-} "$@" 2>&1 | tee "$out/bench-$tag.log"
  local rc=${PIPESTATUS[0]}
  note "bench $tag: rc=$rc"
  return "$rc"
}

stage_bench() { run_bench plain; }
stage_bench-bg() { run_bench bg --background-duty "${BENCH_DUTY:-0.5}" -b 1048576; }
stage_bench-graph() { run_bench graph --graph 20 -e 16777216; }
# sweep NAME PASSES SETTINGS BENCH_ARGS...: `echotk bench --skip-verify BENCH_ARGS` once per pass and
# ';'-separated entry of SETTINGS (that entry's echotk bench options), each table headed
# "## pass P: OPTIONS" in $out/NAME.log; two passes show drift between the settings.
sweep() {
  local name=$1 passes=$2 settings=$3 pass setting
  shift 3
  local -a list opts
  IFS=';' read -ra list <<<"$settings"
  for ((pass = 1; pass <= passes; pass++)); do
    for setting in "${list[@]}"; do
      read -ra opts <<<"$setting"
      echo "## pass $pass: $setting" | tee -a "$out/$name.log"
      "$build/bin/echotk" bench --skip-verify "${opts[@]}" "$@" 2>&1 | tee -a "$out/$name.log" | grep -E "^\||rror"
    done
  done
}
# ';'-separated echotk options, one entry per word of $1, each "$2 WORD".
settings_of() {
  local w out=""
  for w in $1; do out+="${out:+;}$2 $w"; done
  echo "$out"
}

# Pipeline depth at the mid sizes (4-64 MiB), where the quantized path's margin over NCCL is thinnest.
stage_tune-mid() {
  # shellcheck disable=SC2086  # TUNE_ROWS is a word list
  sweep tune-mid 1 "$(settings_of "2 4 8 16 32" --tiles-per-wave)" -b 4194304 -e 67108864 -n 50 \
    --rows ${TUNE_ROWS:-nccl-bf16 echo4 echo8}
}
# How far reduce trails push and tail trails reduce (in waves of resident jobs), at 16 MiB - 1 GiB;
# LAG_COMBOS: ';'-separated "reduce tail" pairs.
stage_tune-lag() {
  local combos combo rl tl settings=""
  IFS=';' read -ra combos <<<"${LAG_COMBOS:-1 1;2 2;3 3;4 4;8 8}"
  for combo in "${combos[@]}"; do
    read -r rl tl <<<"$combo"
    settings+="${settings:+;}--reduce-lag-waves $rl --tail-lag-waves $tl"
  done
  # shellcheck disable=SC2086  # LAG_ROWS is a word list
  sweep tune-lag 2 "$settings" -b 16777216 -e 1073741824 -f 4 \
    --rows ${LAG_ROWS:-nccl-bf16 echo4 echo8 echo4-comp-local echo4-comp-local-bf16}
}
# The square-root tiling's factor (TILE_FACTORS) at 16 MiB .. 1 GiB.
stage_tune-tiles() {
  # shellcheck disable=SC2086  # TUNE_ROWS is a word list
  sweep tune-tiles 2 "$(settings_of "${TILE_FACTORS:-8 16 24 32 48}" --tiles-per-sqrt-iteration)" \
    -b 16777216 -e 1073741824 -f 4 --rows ${TUNE_ROWS:-nccl-bf16 echo4 echo8 echo4-comp-local-alone echo4-comp-local-bf16}
}
stage_tune() {
  sweep tune 1 "$(settings_of "4 8 16 32" --tiles-per-wave)" -b 1073741824 -e 1073741824 -n 20 \
    --rows nccl-bf16 echo4 echo4-comp-local
}

stage_jobtrace() {
  local runs args k=0 words
  IFS=';' read -ra runs <<<"${JOBTRACE_ARGS:-536870912 4 off;536870912 4 dual-bf16;536870912 4 dual;536870912 8 off}"
  # Each list: elements bits compensator [reduce_lag_waves tail_lag_waves]; the CSV goes to $OUT.
  for args in "${runs[@]}"; do
    k=$((k + 1))
    echo "== echo_cuda_job_trace $args"
    read -ra words <<<"$args"
    "$build/bin/echo_cuda_job_trace" "${words[@]:0:3}" "$out/jobtrace-$k.csv" "${words[@]:3}" 2>&1
  done | tee "$out/jobtrace.log"
}

stage_ab() {
  local other=${AB_DIR:-$build}
  [[ -x $other/bin/echotk && -x $other/bin/echo_cuda_stage_probe ]] ||
    { note "ab: $other/bin lacks echotk or echo_cuda_stage_probe"; return 1; }
  local runs bench_args
  IFS=';' read -ra runs <<<"${PROBE_ARGS:-536870912 2 4 off;536870912 2 4 dual}"
  read -ra bench_args <<<"${AB_BENCH_ARGS:---rows nccl-bf16 echo4 echo8 -b 16777216 -f 4}"
  local pass side dir args
  local -a env_b
  read -ra env_b <<<"${AB_ENV:-}"
  for pass in 1 2; do
    for side in A B; do
      dir=$build
      local -a pre=(env)
      if [[ $side == B ]]; then
        dir=$other
        pre=(env "${env_b[@]}")
      fi
      for args in "${runs[@]}"; do
        echo "== pass $pass $side ($dir) probe $args"
        # shellcheck disable=SC2086  # args are the probe's word list
        "${pre[@]}" "$dir/bin/echo_cuda_stage_probe" $args 2>&1 | grep -E "stage|update|rror"
      done
      echo "== pass $pass $side ($dir) echotk bench --skip-verify ${bench_args[*]}"
      "${pre[@]}" "$dir/bin/echotk" bench --skip-verify "${bench_args[@]}" 2>&1 | grep -E "^\||rror"
    done
  done | tee "$out/ab.log"
}

for s in "${stages[@]}"; do
  start=$(date +%s)
  "stage_$s" || note "stage $s failed"
  note "stage $s: $(( $(date +%s) - start )) s"
done
