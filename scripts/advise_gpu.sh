#!/usr/bin/env bash
# `python -m echotk advise` on one GPU in one call (docs/advise.md, "On a GPU"): installs echotk
# from this checkout with its CUDA path (scripts/python_gpu_install.sh), writes a randomly
# initialized Qwen3-0.6B-shaped model folder (tools/random_model.py; no download) and advises on it
# with --device cuda, every candidate on the one-GPU emulation kernel. The advice (advice.md,
# advice.csv, advice.png, spec.json) lands in $OUT/advise-qwen3, the terminal output in
# $OUT/advise.txt, the logs beside it; $OUT/summary.txt says what ran and how long it took.
# About 3-5 minutes on one H200, the install included.
# Environment: PYTHON (python3), OUT (build/out), WINDOWS (32), LENGTH (512), BUDGET (1%),
# BITS_MAX (8.25: every candidate), RANKS (4), SHAPE (qwen3-0.6b), MODEL_DIR (build/SHAPE-random,
# reused when there); for a dry run on a CPU machine with echotk installed: SKIP_INSTALL=1
# DEVICE=cpu SHAPE=tiny WINDOWS=2 LENGTH=128.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-$root/build/out}
python=${PYTHON:-python3}
shape=${SHAPE:-qwen3-0.6b}
model=${MODEL_DIR:-$root/build/$shape-random}
mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
start=$(date +%s)
note "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | head -1); tree $(git rev-parse --short HEAD 2>/dev/null)"

if [[ ${SKIP_INSTALL:-0} != 1 ]]; then
  source "$root/scripts/python_gpu_install.sh"
  install_echotk_cuda "$python" "$out/python-install.log" ||
    { note "install FAILED, or the extension has no CUDA path (python-install.log)"
      grep -E "error|Error" "$out/python-install.log" | head -40; exit 1; }
  note "install ok in $(( $(date +%s) - start )) s"
fi

if [[ ! -f $model/config.json ]]; then
  ( cd /tmp && "$python" "$root/tools/random_model.py" --shape "$shape" --out "$model" ) >"$out/random-model.log" 2>&1 ||
    { note "tools/random_model.py FAILED (random-model.log)"; tail -20 "$out/random-model.log"; exit 1; }
fi
note "model folder $model ($(( $(date +%s) - start )) s)"

# From /tmp, so that `import echotk` finds the installed package, not the source folder.
( cd /tmp && "$python" -m echotk advise --model "$model" --text "$root/data/smollm2/moby-dick.txt.gz" \
    --device "${DEVICE:-cuda}" --ranks "${RANKS:-4}" --windows "${WINDOWS:-32}" --length "${LENGTH:-512}" \
    --budget "${BUDGET:-1%}" --bits-max "${BITS_MAX:-8.25}" --out "$out/advise-qwen3" --no-progress ) \
  >"$out/advise.txt" 2>"$out/advise.err"
rc=$?
note "python -m echotk advise: rc=$rc (0: a setting recommended; 2: 16-bit, or bad input: advise.err)"
tee -a "$summary" <"$out/advise.txt"
[[ $rc == 0 || $rc == 2 ]] || tail -30 "$out/advise.err" | tee -a "$summary"
note "total $(( $(date +%s) - start )) s"
exit $(( rc == 0 || rc == 2 ? 0 : 1 ))
