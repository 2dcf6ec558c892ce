#!/usr/bin/env bash
# Executes the notebooks under notebooks/ and renders them to HTML, with their figures as PNG.
# Inputs come from this build's echotk: `prove --json`, `replay` of the bundled trace (per
# quantizer, and without compensation) and, when the subcommand exists, `compare --json`; the
# bench notebook reads data/bench/bench.csv (the current full run of `echotk bench`), the training
# notebook the runs under data/training.
# Works offline once the Python packages are installed:
#   python3 -m pip install nbconvert nbclient ipykernel matplotlib h5py numpy
#
#   ECHO_BUILD_DIR   build folder holding bin/echotk (default: build)
#   ECHO_NOTEBOOK_OUT output folder (default: $ECHO_BUILD_DIR/notebooks); data/ inside it
#   PYTHON           interpreter (default python3)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${ECHO_BUILD_DIR:-$root/build}"
out="${ECHO_NOTEBOOK_OUT:-$build/notebooks}"
python="${PYTHON:-python3}"
echotk="$build/bin/echotk"
trace="$root/data/examples/synthetic_p4.h5"

if ! "$python" -c "import nbconvert, nbclient, ipykernel, matplotlib, h5py, numpy" 2>/dev/null; then
  echo "render_notebooks: $python lacks the notebook packages:" \
       "$python -m pip install nbconvert nbclient ipykernel matplotlib h5py numpy" >&2
  exit 77  # CTest reads this as 'skipped'
fi
if [[ ! -x "$echotk" ]]; then
  echo "render_notebooks: error: $echotk not found (build first, or set ECHO_BUILD_DIR)" >&2
  exit 1
fi
mkdir -p "$out/data"
out="$(cd "$out" && pwd)"

echo "render_notebooks: echotk prove" >&2
"$echotk" prove --source-dir "$root" --json "$out/data/prove.json" > "$out/data/prove.txt"
for quantizer in zero-aware naive symmetric; do
  "$echotk" replay "$trace" --quiet --quantizer "$quantizer" --out "$out/data/replay-$quantizer.h5" > /dev/null
done
"$echotk" replay "$trace" --quiet --compensator off --out "$out/data/replay-off.h5" > /dev/null
# compare is optional: the notebooks say which input is missing.
if "$echotk" --help | grep -qE "^ +compare( |$)"; then
  "$echotk" compare "$trace" --json "$out/data/compare-trace.json" > "$out/data/compare-trace.txt"
  "$echotk" compare --synthetic --depth 112 --passes 8 --quantizers zero-aware \
    --json "$out/data/compare-synthetic.json" > "$out/data/compare-synthetic.txt"
fi

export ECHO_NOTEBOOK_DATA="$out/data" ECHO_NOTEBOOK_FIGURES="$out" ECHO_BENCH_CSV="$root/data/bench/bench.csv"
# training.ipynb: data/training/runs (GPU runs) when present, else the short CPU runs of data/training/cpu-demo.
export ECHO_TRAINING_DATA="$root/data/training"
export MPLBACKEND=Agg
for notebook in "$root"/notebooks/*.ipynb; do
  echo "render_notebooks: $(basename "$notebook")" >&2
  "$python" -m nbconvert --to html --execute --ExecutePreprocessor.timeout=300 \
    --output-dir "$out" "$notebook" > /dev/null
done
echo "render_notebooks: HTML and PNG in $out" >&2
ls "$out"/*.html "$out"/*.png
