#!/usr/bin/env bash
# Runs an echotk backend over the conformance pack (docs/conformance.md) and checks every case with
# `echotk verify`:
#   scripts/conformance_check.sh [BUILD_DIR] [PACK_DIR]     (defaults: build-gpu or build, data/conformance)
# For every case of the manifest: the pack's own outputs must pass verify (the reference agrees
# with the pack), then `echotk replay CASE --backend $BACKEND --save-outputs` runs the case and
# verify checks its /outputs. Cases the backend refuses as unsupported (the CUDA path does 4 and 8
# bits and the owner algorithm; the emulation the owner algorithm without outliers sent exactly)
# are listed as skipped with the reason echotk gives.
#   BACKEND  cuda (default), emulate (the one-GPU emulation) or cpu
#   OUT      logs and replay results (default ./conformance-out); summary in $OUT/summary.txt
# Exit status: 0 when nothing failed, 1 otherwise.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
backend=${BACKEND:-cuda}
build=${1:-}
if [[ -z $build ]]; then
  if [[ $backend != cpu && -x $root/build-gpu/bin/echotk ]]; then build=$root/build-gpu; else build=$root/build; fi
fi
pack=${2:-$root/data/conformance}
out=${OUT:-$PWD/conformance-out}
echotk=$build/bin/echotk
[[ -x $echotk ]] || { echo "conformance_check: $echotk not found (build first)" >&2; exit 1; }
mkdir -p "$out/cases"
summary=$out/summary.txt
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }

list=$out/cases.tsv
if ! cmake -DPACK="$pack" -DMODE=check -DLIST="$list" -P "$root/scripts/conformance_manifest.cmake" \
     >"$out/manifest-check.log" 2>&1; then
  note "FAIL manifest: $(grep -v '^--' "$out/manifest-check.log" | head -5 | tr '\n' ' ')"
  exit 1
fi

passed=0 failed=0 skipped=0 total=0
while IFS=$'\t' read -r name trace outputs flags; do
  total=$((total + 1))
  log=$out/cases/$name.log
  # shellcheck disable=SC2086  # flags are separate words
  if ! "$echotk" verify "$pack/$trace" "$pack/$outputs" $flags >"$log" 2>&1; then
    note "FAIL $name: the pack's outputs do not verify ($(grep -m1 -E 'result|error' "$log"))"
    failed=$((failed + 1))
    continue
  fi
  result=$out/cases/$name.result.h5
  # shellcheck disable=SC2086
  "$echotk" replay "$pack/$trace" --out "$result" --backend "$backend" --save-outputs --allow-nonfinite --quiet \
    $flags >>"$log" 2>&1
  rc=$?
  # can_implement's refusal (echo/cuda/can_implement.h): "--backend cuda: the CUDA path implements ..."
  if (( rc == 2 )) && grep -q -- "--backend $backend: .* implements" "$log"; then
    note "SKIP $name: $(grep -m1 -o -- "--backend $backend: .* implements.*" "$log")"
    skipped=$((skipped + 1))
    continue
  fi
  if (( rc != 0 )); then
    note "FAIL $name: replay --backend $backend exit $rc ($(grep -m1 error "$log"))"
    failed=$((failed + 1))
    continue
  fi
  # shellcheck disable=SC2086
  if "$echotk" verify "$pack/$trace" "$result" $flags >>"$log" 2>&1; then
    echo "PASS $name" >>"$summary"
    passed=$((passed + 1))
  else
    note "FAIL $name: $(grep -m1 'result' "$log" | sed 's/^result *//'); $(grep -A1 -m1 '^diagnosis' "$log" | tail -1 | sed 's/^ *//')"
    failed=$((failed + 1))
  fi
  rm -f "$result"
done <"$list"
note "conformance ($backend): $passed passed, $failed failed, $skipped skipped of $total cases (logs in $out/cases)"
(( failed == 0 ))
