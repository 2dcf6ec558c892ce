#!/usr/bin/env bash
# One call on the GPU machine for the shared numerics layer: builds this tree and an older one
# side by side, checks that this tree's outputs are bit-exact and that no stage became slower.
# Logs and summary.txt under $OUT (default ./numerics-gpu-check-out).
#   OUT=dir bash scripts/numerics_gpu_check.sh [stages...]     (default: build test replay sass ab)
#   build    this tree into BUILD_DIR (default build-gpu: the targets of gpu_check.sh's build, among
#            them cuda_numerics_intrinsics) and, at the same time, the older tree's stage probe into
#            OLD_BUILD_DIR (default build-gpu-old). The older tree is OLD_SRC when set, else
#            `git archive OLD_REF` of this repository (default 907dbab, the tree before the layer).
#   test     cuda_numerics_intrinsics (the kept conversion instructions against the shared rules,
#            every input), cuda_bitexact and cuda_device_api (every device result against the CPU
#            reference bit for bit)
#   replay   scripts/replay_parity.sh: `echotk replay --backend cuda` against `--backend cpu`
#   sanitize compute-sanitizer memcheck and racecheck (gpu_check.sh sanitize)
#   sass     per-kernel SASS instruction counts of both libraries (cuobjdump), the kernels that differ
#   ab       echo_cuda_stage_probe of both trees in the order old new old new on every row (bits 4
#            and 8 x compensator off, dual, dual-bf16, global, global-bf16; PROBE_ROWS overrides,
#            ';'-separated argument lists); per row and stage the best time of each tree, and FAIL
#            where this tree's is more than AB_LIMIT (default 1.02) times the older tree's. A sixth
#            argument picks the transport (plain, wide, hadamard, wide-hadamard: docs/numerics.md
#            2.4, 2.6); an older probe ignores it, so such a row times this tree's option against
#            the older tree's plain transport. PROBE_ROWS=options adds wide and hadamard rows (4 and
#            8 bits x off, dual, dual-bf16) to the default ones (a hadamard row is expected to FAIL
#            the limit: it is the rotation's cost, read from the table)
#   options-ab  this tree's stage probe alone, each row with the plain transport and with
#            overflow-groups wide (no group past the limit: what the option costs the common path)
#            in the order plain wide plain wide; per row and stage the best time of each, and FAIL
#            where wide's is more than AB_LIMIT (default 1.02) times plain's. Rows: bits 4 and 8 x
#            compensator off, dual, dual-bf16, global, global-bf16 (OPTIONS_ROWS overrides,
#            ';'-separated argument lists of five arguments, the transport added)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
source "$root/scripts/nccl_env.sh"
out=$(realpath -m "${OUT:-$root/numerics-gpu-check-out}")
build=$(realpath -m "${BUILD_DIR:-$root/build-gpu}")
old_build=$(realpath -m "${OLD_BUILD_DIR:-$root/build-gpu-old}")
old_ref=${OLD_REF:-907dbab}
mkdir -p "$out"
summary=$out/summary.txt
note() { echo "$*" | tee -a "$summary"; }
stages=("$@")
(( ${#stages[@]} )) || stages=(build test replay sass ab)
status=0

# Runs stages of scripts/gpu_check.sh on this tree's build, its summary lines added to ours. It
# always exits 0, so a failure is read from its summary: a non-zero rc, FAILED/failed, or failing
# replay configurations.
gpu_check() {
  local log=$out/gpu-check-$1
  mkdir -p "$log"
  OUT=$log BUILD_DIR=$build bash "$root/scripts/gpu_check.sh" "$@" >"$log/run.log" 2>&1
  [[ -f $log/summary.txt ]] || { note "gpu_check.sh $*: no summary (see $log/run.log)"; return 1; }
  cat "$log/summary.txt" | tee -a "$summary"
  ! grep -qE 'rc=[1-9]|FAILED|failed|; [1-9][0-9]* failing' "$log/summary.txt"
}

old_source() {
  if [[ -n ${OLD_SRC:-} ]]; then
    realpath -m "$OLD_SRC"
    return
  fi
  local dir=$out/old-src
  rm -rf "$dir" && mkdir -p "$dir"
  git -C "$root" archive "$old_ref" | tar -x -C "$dir" || return 1
  echo "$dir"
}

# The older tree's stage probe: configured as gpu_check.sh configures (its NCCL lookup too).
build_old() {
  local src
  src=$(old_source) || { echo "no older tree: set OLD_SRC, or run inside a git checkout holding $old_ref"; return 1; }
  find_nccl "$old_build"
  cmake -S "$src" -B "$old_build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DECHO_BUILD_MODEL=OFF -DECHO_BUILD_TESTS=OFF ${nccl_root:+-DNCCL_ROOT=$nccl_root} \
        -DHDF5_INCLUDE_DIRS=/usr/include/hdf5/serial &&
    cmake --build "$old_build" -j "$(nproc)" --target echo_cuda_stage_probe
}

stage_build() {
  build_old >"$out/build-old.log" 2>&1 &
  local old_pid=$!
  gpu_check build || { note "build (this tree) FAILED"; status=1; }
  if wait $old_pid; then
    note "build (older tree $old_ref): ok"
  else
    note "build (older tree $old_ref) FAILED: $(grep -E 'error|no older' "$out/build-old.log" | head -5 | tr '\n' ' ')"
    status=1
  fi
}

stage_test() { gpu_check test-numerics || status=1; }
stage_replay() { gpu_check replay || status=1; }
stage_sanitize() { gpu_check sanitize || status=1; }

# Machine code of both libraries (no GPU needed): per kernel the SASS instruction count of each
# tree, and the kernels whose counts differ (the layer was to leave the hot loops as they were).
stage_sass() {
  local side lib
  command -v cuobjdump >/dev/null || { note "sass: no cuobjdump on PATH, skipped"; return; }
  for side in old new; do
    lib=$old_build
    [[ $side == new ]] && lib=$build
    lib=$(find "$lib" -name 'libecho_cuda.*' \( -name '*.a' -o -name '*.so' \) | head -1)
    [[ -n $lib ]] || { note "sass: no libecho_cuda in the $side build"; status=1; return; }
    cuobjdump -sass "$lib" 2>/dev/null | awk '
      /Function : / { f = $3 } f != "" && /\/\*[0-9a-f]{4}\*\// { n[f]++ }
      END { for (k in n) print k, n[k] }' | sort >"$out/sass-$side.txt"
  done
  join -a1 -a2 -e0 -o 0,1.2,2.2 "$out/sass-old.txt" "$out/sass-new.txt" |
    awk '{ d = $3 - $2; t2 += $2; t3 += $3; if (d != 0) { printf "%+6d %6d -> %6d  %s\n", d, $2, $3, $1; ++c } }
         END { printf "%d kernels differ; all kernels %d -> %d instructions\n", c, t2, t3 }' |
    tee "$out/sass-diff.txt" | tail -1 | while read -r line; do note "sass: $line (sass-diff.txt)"; done
}

# Every row twice, each time side A's probe then side B's (A B A B, so drift between the passes
# shows); a side runs "EXE ROW ARGS" (ARGS may be empty). Appends "side<TAB>row<TAB>probe line" of
# the probe's stage and update timings to LOG.
#   ab_passes LOG A EXE_A ARGS_A B EXE_B ARGS_B ROW...
ab_passes() {
  local log=$1 row pass side
  local -A exe=([$2]=$3 [$5]=$6) args=([$2]=$4 [$5]=$7)
  local sides=("$2" "$5")
  shift 7
  : >"$log"
  for row in "$@"; do
    for pass in 1 2; do
      for side in "${sides[@]}"; do
        # shellcheck disable=SC2086  # a row and the side's arguments are argument lists
        "${exe[$side]}" $row ${args[$side]} 2>&1 | grep -E "^  (stage|update)" | sed "s|^|$side\t$row\t|" >>"$log"
      done
    done
  done
}

# Per row and stage of a log of "side<TAB>row<TAB>probe line" lines, the best (smallest) time of
# sides A and B over all passes and B's over A's; FAIL (and a non-zero return) where that ratio is
# above AB_LIMIT (default 1.02).
#   best_table A B log table
best_table() {
  awk -F'\t' -v a="$1" -v b="$2" -v limit="${AB_LIMIT:-1.02}" '
    { split($3, w, " "); stage = (w[1] == "stage") ? w[2] : w[1]; t = (w[1] == "stage") ? w[3] : w[2];
      key = $2 " | " stage; if (!(key in seen)) { order[++n] = key; seen[key] = 1 }
      if (!((key, $1) in best) || t + 0 < best[key, $1]) best[key, $1] = t + 0 }
    END { bad = 0
      printf "%-36s %10s %10s %7s\n", "row | stage", a " us", b " us", b "/" a
      for (i = 1; i <= n; ++i) { k = order[i]; o = best[k, a]; v = best[k, b]
        r = (o > 0) ? v / o : 0; flag = (r > limit) ? "  FAIL" : ""; if (r > limit) bad = 1
        printf "%-36s %10.1f %10.1f %7.3f%s\n", k, o, v, r, flag }
      exit bad }' "$3" | tee "$4"
  return "${PIPESTATUS[0]}"
}

# The table of an A/B stage from $out/NAME.log into $out/NAME-table.txt, and its summary line.
#   ab_report NAME A B
ab_report() {
  local table=$out/$1-table.txt rc
  best_table "$2" "$3" "$out/$1.log" "$table"
  rc=$?
  note "$1 (stage probe, $2 $3 $2 $3, limit ${AB_LIMIT:-1.02}): $([[ $rc == 0 ]] && echo ok || echo FAIL) ($(grep -c . "$table") lines in $1-table.txt)"
  (( rc == 0 )) || status=1
}

stage_ab() {
  local new=$build/bin/echo_cuda_stage_probe old=$old_build/bin/echo_cuda_stage_probe
  [[ -x $new && -x $old ]] || { note "ab: a stage probe is missing ($new, $old)"; status=1; return; }
  local rows=()
  if [[ -n ${PROBE_ROWS:-} && ${PROBE_ROWS} != options ]]; then
    IFS=';' read -ra rows <<<"$PROBE_ROWS"
  else
    for bits in 4 8; do
      for comp in off dual dual-bf16 global global-bf16; do rows+=("536870912 4 $bits $comp"); done
    done
    if [[ ${PROBE_ROWS:-} == options ]]; then
      for transport in wide hadamard; do
        for bits in 4 8; do
          for comp in off dual dual-bf16; do rows+=("536870912 4 $bits $comp 0 $transport"); done
        done
      done
    fi
  fi
  ab_passes "$out/ab.log" old "$old" "" new "$new" "" "${rows[@]}"
  ab_report ab old new
}

stage_options-ab() {
  local exe=$build/bin/echo_cuda_stage_probe
  [[ -x $exe ]] || { note "options-ab: no stage probe ($exe)"; status=1; return; }
  local rows=()
  if [[ -n ${OPTIONS_ROWS:-} ]]; then
    IFS=';' read -ra rows <<<"$OPTIONS_ROWS"
  else
    for bits in 4 8; do
      for comp in off dual dual-bf16 global global-bf16; do rows+=("536870912 4 $bits $comp 0"); done
    done
  fi
  ab_passes "$out/options-ab.log" plain "$exe" plain wide "$exe" wide "${rows[@]}"
  ab_report options-ab plain wide
}

for s in "${stages[@]}"; do
  declare -F "stage_$s" >/dev/null || { note "unknown stage $s"; status=1; continue; }
  SECONDS=0
  "stage_$s"
  note "stage $s: ${SECONDS} s"
done
note "numerics_gpu_check: $([[ $status == 0 ]] && echo PASS || echo FAIL)"
exit $status
