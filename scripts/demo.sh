#!/usr/bin/env bash
# The main job on bundled data: builds echotk, replays a real SmolLM2 trace through the Echo 4-bit
# all-reduce with and without compensation, compares the compensator settings side by side, runs
# the theorem checks, and says where the plots are. It builds what it runs: with a visible GPU the
# whole echotk into build/; without one the CPU toolkit alone into build-cpu/ (no CUDA kernel is
# compiled, even where nvcc is installed: a few minutes on 2 cores instead of about 40).
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  dir=build
  cmake_args=${ECHO_CMAKE_ARGS:-}
else
  echo "demo: no GPU visible, building the CPU toolkit alone into build-cpu/" >&2
  dir=build-cpu
  cmake_args="-DECHO_ENABLE_CUDA=OFF -DECHO_BUILD_TESTS=OFF ${ECHO_CMAKE_ARGS:-}"
fi
ECHO_BUILD_DIR=$dir ECHO_CMAKE_ARGS=$cmake_args ECHO_BUILD_TARGETS="echotk" scripts/build.sh >/dev/null
echotk=$dir/bin/echotk
out=$dir/demo
mkdir -p "$out"

trace=data/smollm2/trace-p4-moby-2x16.h5
[ -f "$trace" ] || trace=data/examples/synthetic_p4.h5

echo "== Echo 4-bit all-reduce on $trace =="
echo
echo "-- dual compensator (the paper's defaults) --"
"$echotk" replay "$trace" --out "$out/replay_dual.h5" --quiet
echo
echo "-- no compensation --"
"$echotk" replay "$trace" --out "$out/replay_off.h5" --compensator off --quiet
echo
echo "== Compensator settings side by side (zero-aware 4-bit) =="
"$echotk" compare "$trace" --quantizers zero-aware --gains 0.75,1
echo
echo "== Theorem checks (echotk prove) =="
"$echotk" prove --source-dir . --json "$out/prove.json"
echo
echo "Result files: $out/replay_dual.h5, $out/replay_off.h5, $out/prove.json"
echo "Plots: scripts/render_notebooks.sh renders notebooks/ to build/notebooks/ (scripts/test.sh does it too)"
