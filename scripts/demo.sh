#!/usr/bin/env bash
# The main job on bundled data: builds echotk, replays a recorded trace through the Echo
# all-reduce with and without compensation, runs the theorem checks, and says where the plots are.
set -euo pipefail
cd "$(dirname "$0")/.."
ECHO_BUILD_TARGETS="echotk" scripts/build.sh >/dev/null
echotk=build/bin/echotk
out=build/demo
mkdir -p "$out"

trace=data/examples/synthetic_p4.h5
for candidate in data/smollm2/*trace*.h5; do
  if [ -f "$candidate" ]; then trace=$candidate; break; fi
done

echo "== Echo 4-bit all-reduce on $trace =="
echo
echo "-- with the dual compensator (the paper's defaults) --"
"$echotk" replay "$trace" --out "$out/replay_dual.h5" --quiet
echo
echo "-- without compensation --"
"$echotk" replay "$trace" --out "$out/replay_off.h5" --compensator off --quiet
echo
if "$echotk" prove --help >/dev/null 2>&1 && ! "$echotk" prove --help 2>&1 | grep -q unavailable; then
  echo "== Theorem checks (echotk prove) =="
  "$echotk" prove --json "$out/prove.json"
  echo
fi
echo "Result files: $out/replay_dual.h5, $out/replay_off.h5"
if [ -x scripts/render_notebooks.sh ]; then
  echo "Plots: run scripts/render_notebooks.sh (renders notebooks/ to build/notebooks/)"
fi
