#!/usr/bin/env bash
# The measurements of docs/outliers.md: SmolLM2 perplexity rows (per-window CSVs) for the transport
# options on Moby-Dick and on the State of the Union, with per-site precision calibrated on the
# other text. Usage: scripts/outliers_study.sh OUT_DIR [calibrate|moby|sotu|replay|groups]...
# (default: calibrate moby sotu). ECHOTK names the binary (default build/bin/echotk). Each row: about 20 s on one idle core. Needs build/bin/echotk,
# the model (scripts/setup_model.sh) and a Python with h5py and numpy in $PYTHON for the
# calibration (tools/rank_sites.py).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/outliers_study.sh OUT_DIR [calibrate|moby|sotu|replay|groups]...}
shift
parts=("$@")
[ ${#parts[@]} -gt 0 ] || parts=(calibrate moby sotu)
mkdir -p "$out"
echotk=${ECHOTK:-build/bin/echotk}
python=${PYTHON:-python3}
moby=data/smollm2/moby-dick.txt.gz
sotu=data/smollm2/state-of-the-union-2009-2021.txt.gz
top=${ECHO_EIGHT_BIT_SITES:-4}

row() {  # row TEXT NAME OPTIONS...
  local text=$1 name=$2
  shift 2
  [ -s "$out/$name.csv" ] && return 0
  "$echotk" ppl --text "$text" --windows 16 --length 512 --threads 1 --ranks 4 --csv "$out/$name.csv" "$@" \
    >"$out/$name.log" 2>/dev/null
}

sites_of() { tail -1 "$out/sites-$1.txt"; }

calibrate() {
  # Moby rows use sites ranked on the State of the Union, and the other way round.
  "$echotk" capture --text "$sotu" --passes 2 --length 64 --no-hidden-states --out "$out/calib-sotu.h5" \
    >"$out/calib-sotu.log" 2>&1
  "$python" tools/rank_sites.py "$out/calib-sotu.h5" --top "$top" >"$out/sites-for-moby.txt"
  "$python" tools/rank_sites.py data/smollm2/trace-p4-moby-2x16.h5 --top "$top" >"$out/sites-for-sotu.txt"
  rm -f "$out/calib-sotu.h5"
}

rows() {  # rows TEXT PREFIX SITES: most informative first
  local t=$1 p=$2 s=$3
  row "$t" "$p-16bit" --allreduce exact
  row "$t" "$p-echo4" --allreduce echo
  row "$t" "$p-out1" --allreduce echo --outliers 1
  row "$t" "$p-rot" --allreduce echo --rotation hadamard
  row "$t" "$p-sites8" --allreduce echo --eight-bit-sites "$s"
  row "$t" "$p-nocomp4" --allreduce echo --compensator off
  row "$t" "$p-rot-sites8" --allreduce echo --rotation hadamard --eight-bit-sites "$s"
  row "$t" "$p-rot-local1" --allreduce echo --rotation hadamard --residual local --eta 1
  row "$t" "$p-out2" --allreduce echo --outliers 2
  row "$t" "$p-out1-local1" --allreduce echo --outliers 1 --residual local --eta 1
  row "$t" "$p-rot-out1" --allreduce echo --rotation hadamard --outliers 1
  row "$t" "$p-rot-sites8-local1" --allreduce echo --rotation hadamard --eight-bit-sites "$s" --residual local --eta 1
  row "$t" "$p-echo8" --allreduce echo --bits 8
}

groups() {  # the rotation with the local residual at other group sizes
  row "$moby" moby-rot256-local1 --allreduce echo --rotation hadamard --residual local --eta 1 --group 256
  row "$moby" moby-rot64-local1 --allreduce echo --rotation hadamard --residual local --eta 1 --group 64
  row "$sotu" sotu-rot64-local1 --allreduce echo --rotation hadamard --residual local --eta 1 --group 64
}

replay_row() {  # replay_row NAME OPTIONS...: the recorded trace's error process under one variant
  local name=$1
  shift
  local trace=data/smollm2/trace-p4-moby-2x16.h5
  "$echotk" replay "$trace" --out "$out/replay-$name.h5" --quiet "$@" >"$out/replay-$name.txt" 2>&1
  "$python" tools/site_relative_error.py "$trace" "$out/replay-$name.h5" >>"$out/replay-$name.txt"
  rm -f "$out/replay-$name.h5"
}

replays() {
  replay_row echo4
  replay_row nocomp4 --compensator off
  replay_row out1 --outliers 1
  replay_row out2 --outliers 2
  replay_row rot --rotation hadamard
  replay_row rot-out1 --rotation hadamard --outliers 1
  replay_row rot-local1 --rotation hadamard --residual local --eta 1
  replay_row rot-nocomp4 --rotation hadamard --compensator off
  replay_row out1-nocomp4 --outliers 1 --compensator off
  replay_row out2-nocomp4 --outliers 2 --compensator off
  replay_row out1-local1 --outliers 1 --residual local --eta 1
  replay_row wide --overflow-groups wide
  replay_row echo8 --bits 8
}

for part in "${parts[@]}"; do
  case $part in
    calibrate) calibrate ;;
    moby) rows "$moby" moby "$(sites_of for-moby)" ;;
    sotu) rows "$sotu" sotu "$(sites_of for-sotu)" ;;
    replay) replays ;;
    groups) groups ;;
    *) echo "unknown part $part" >&2; exit 2 ;;
  esac
done
