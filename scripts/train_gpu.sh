#!/usr/bin/env bash
# Tensor-parallel training runs of docs/results-training.md on one GPU, in one call that ends
# within BUDGET seconds: installs echotk from source with its CUDA path, runs the training tests
# (python/tests/test_training.py, GPU cases included), then each RUN in turn under --max-seconds,
# resuming it from its state when an earlier call stopped it. Run folders live in RUN_DIR (under
# build/, which stays on a warm machine between calls); their CSVs, configs and logs (not the
# states: 12 bytes per parameter) come back as $OUT/training-runs.tgz, with $OUT/summary.txt.
# After each run the summary gives its validation loss: the lowest and its step, the last, and
# whether it is flat within 1% (max / min) over the last fifth of the run (echotk.train.summary).
#
#   bash scripts/train_gpu.sh --timing [KIND...]   # ~1 min after the install: tokens/s and the
#                                                  # all-reduce share of each kind, 30 steps each
#   bash scripts/train_gpu.sh --select [MODEL...]  # model selection: a 16-bit run (seed 0) of each
#                                                  # MODEL (default: SELECT below), no tests
#   bash scripts/train_gpu.sh RUN...               # e.g. exact-s0 echo4-s0 echo4local-s0
#
# RUN = KIND[-lrLR][-sSEED] (seed 0 and the kind's learning rate when left out), KIND one of
#   exact       16-bit: the exact all-reduce                       (lr LR16)
#   echo4       Echo 4-bit, dual compensator, global residual     (lr LR4)
#   echo4local  Echo 4-bit, local residual, eta 1                 (lr LR4)
#   q4off       4-bit without compensation                        (lr LR4)
#   echo8       Echo 8-bit                                         (lr LR4)
# MODEL = mDIMxLAYERS[-pDROPOUT][-wdDECAY]: width DIM, LAYERS layers, 8 heads, SwiGLU width 8 DIM / 3
#   rounded up to a multiple of 64 (m384x6 is the default model, 29.5 M parameters), dropout
#   (default 0) and weight decay (default 0.1); e.g. m256x4-p0.2 (15.8 M parameters).
# Environment: MODEL (the model of every RUN; default: the train defaults), TOKENS (50000000),
# BATCH (32), LR16 (1e-3), LR4 (1e-3), EXTRA (more train flags for every run, last, so they win
# over MODEL's), BUDGET (540 s for the whole call), RUN_DIR (build/training-runs, with -MODEL
# appended when MODEL is set; build/training-select for --select), SELECT (--select's default
# models), SKIP_TESTS=1 (the default of --select), PYTHON (python3), OUT (build/out); for a dry run
# of the script on a CPU machine with echotk installed: SKIP_INSTALL=1 DEVICE=cpu
# EXTRA="--dim 32 --layers 2 --heads 4 --ffn 48" TOKENS=2048.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
start=$(date +%s)
out=${OUT:-$root/build/out}
python=${PYTHON:-python3}
budget=${BUDGET:-540}
tokens=${TOKENS:-50000000}
batch=${BATCH:-32}
# Candidates of --select, smallest first (estimated from the 29.5 M model's 121 s per 50 M tokens,
# in proportion to the parameters: ~65, ~65, ~85, ~130 s).
default_select="m256x4-p0.1 m256x4-p0.2 m320x4-p0.2 m384x6-p0.2"

mode=runs
case ${1:-} in
  --timing) mode=timing; shift; (( $# > 0 )) || set -- exact echo4 echo8 ;;
  --select) mode=select; shift; (( $# > 0 )) || set -- ${SELECT:-$default_select} ;;
esac
(( $# > 0 )) || { echo "usage: bash scripts/train_gpu.sh [--timing KIND... | --select MODEL... | RUN...]" >&2; exit 2; }
if [[ $mode == select ]]; then
  run_dir=${RUN_DIR:-$root/build/training-select}
  skip_tests=${SKIP_TESTS:-1}
else
  run_dir=${RUN_DIR:-$root/build/training-runs${MODEL:+-$MODEL}}
  skip_tests=${SKIP_TESTS:-0}
fi
mkdir -p "$out" "$run_dir/logs"
summary=$out/summary.txt
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
elapsed() { echo $(( $(date +%s) - start )); }

# MODEL name -> model flags (one line), or an error.
model_flags() {
  local name=$1 dim layers dropout=0 decay=0.1
  [[ $name =~ ^m([0-9]+)x([0-9]+)(-p(0?\.[0-9]+|0))?(-wd([0-9.]+))?$ ]] || return 1
  dim=${BASH_REMATCH[1]} layers=${BASH_REMATCH[2]}
  [[ -n ${BASH_REMATCH[4]} ]] && dropout=${BASH_REMATCH[4]}
  [[ -n ${BASH_REMATCH[6]} ]] && decay=${BASH_REMATCH[6]}
  echo "--dim $dim --layers $layers --heads 8 --ffn $(( (8 * dim / 3 + 63) / 64 * 64 )) --dropout $dropout --weight-decay $decay"
}

# RUN name -> train flags (one line), or an error.
run_flags() {
  local name=$1 kind seed=0 lr=""
  kind=${name%%-*}
  [[ $name =~ -s([0-9]+)(-|$) ]] && seed=${BASH_REMATCH[1]}
  [[ $name =~ -lr([0-9.e+-]+[0-9])(-s|$) ]] && lr=${BASH_REMATCH[1]}
  case $kind in
    exact) echo "--allreduce exact --lr ${lr:-${LR16:-1e-3}} --seed $seed" ;;
    echo4) echo "--allreduce echo --bits 4 --lr ${lr:-${LR4:-1e-3}} --seed $seed" ;;
    echo4local) echo "--allreduce echo --bits 4 --residual local --eta 1 --lr ${lr:-${LR4:-1e-3}} --seed $seed" ;;
    q4off) echo "--allreduce echo --bits 4 --compensator off --lr ${lr:-${LR4:-1e-3}} --seed $seed" ;;
    echo8) echo "--allreduce echo --bits 8 --lr ${lr:-${LR4:-1e-3}} --seed $seed" ;;
    *) return 1 ;;
  esac
}
if [[ -n ${MODEL:-} ]]; then
  model_flags "$MODEL" >/dev/null || { echo "train_gpu: bad MODEL $MODEL (mDIMxLAYERS[-pDROPOUT][-wdDECAY])" >&2; exit 2; }
fi
for name in "$@"; do
  if [[ $mode == select ]]; then
    model_flags "$name" >/dev/null || { echo "train_gpu: bad model $name (mDIMxLAYERS[-pDROPOUT][-wdDECAY])" >&2; exit 2; }
  else
    run_flags "$name" >/dev/null || { echo "train_gpu: unknown run $name (KIND[-lrLR][-sSEED], see the header)" >&2; exit 2; }
  fi
done
# The train flags of argument NAME: its kind's (a RUN), or a 16-bit seed-0 run of a MODEL (--select).
flags_of() {
  if [[ $mode == select ]]; then echo "$(run_flags exact) $(model_flags "$1")"
  else echo "$(run_flags "$1") ${MODEL:+$(model_flags "$MODEL")}"; fi
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$out/gpu.txt" 2>&1
note "gpu: $(head -1 "$out/gpu.txt"); $("$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1)"
source "$root/scripts/python_gpu_install.sh"
[[ ${SKIP_INSTALL:-0} == 1 ]] || install_echotk_cuda "$python" "$run_dir/logs/python-install.log" ||
  { note "install FAILED or no CUDA path (logs/python-install.log)"
    grep -E "error|Error" "$run_dir/logs/python-install.log" | head -40 | tee -a "$summary"; exit 1; }
note "install ok at $(elapsed) s"

if [[ $skip_tests != 1 ]]; then
  ( cd python/tests && timeout 240 "$python" -m pytest -q -rs -p no:cacheprovider test_training.py ) \
      >"$run_dir/logs/pytest-training.log" 2>&1
  rc=$?
  note "pytest test_training.py: rc=$rc, $(tail -1 "$run_dir/logs/pytest-training.log") (at $(elapsed) s)"
  [[ $rc == 0 ]] || grep -E "^(FAILED|ERROR)" "$run_dir/logs/pytest-training.log" | head -20 | tee -a "$summary"
fi

pack() {
  tar czf "$out/training-runs.tgz.part" -C "$run_dir" --exclude state.pt --exclude '*.tmp' . &&
    mv "$out/training-runs.tgz.part" "$out/training-runs.tgz"
}
trap pack EXIT

if [[ $mode == timing ]]; then
  for name in "$@"; do
    dir=$(mktemp -d)
    # shellcheck disable=SC2046
    "$python" -m echotk train --out "$dir/run" --device "${DEVICE:-cuda}" --tokens "$tokens" --batch "$batch" \
        --stop-after 30 --eval-every 0 --site-every 0 --no-progress $(flags_of "$name") ${EXTRA:-} \
        >"$run_dir/logs/timing-$name.log" 2>&1
    line=$(grep "median step" "$run_dir/logs/timing-$name.log")
    steps=$(sed -nE 's/.*parameters, ([0-9]+) steps of.*/\1/p' "$run_dir/logs/timing-$name.log")
    ms=$(sed -E 's/.*median step ([0-9.]+) ms.*/\1/' <<<"$line")
    note "timing $name: ${line#train: } -> $steps steps ~ $(awk -v s="$steps" -v m="$ms" 'BEGIN{printf "%.0f", s*m/1000}') s of steps (without evaluation)"
    rm -rf "$dir"
  done
  note "total $(elapsed) s"
  exit 0
fi

for name in "$@"; do
  left=$(( budget - $(elapsed) - 20 ))  # 20 s for packing and the call's end
  if (( left < 45 )); then
    note "$name: not started, $left s left"
    continue
  fi
  # shellcheck disable=SC2046
  "$python" -m echotk train --out "$run_dir/$name" --resume --device "${DEVICE:-cuda}" --tokens "$tokens" --batch "$batch" \
      --max-seconds "$left" $(flags_of "$name") ${EXTRA:-} >>"$run_dir/logs/$name.log" 2>&1
  rc=$?
  status=$(grep -E "^train: .* (complete|stopped)" "$run_dir/logs/$name.log" | tail -1)
  speed=$(grep "median step" "$run_dir/logs/$name.log" | tail -1)
  params=$(grep -oE "^train: [0-9.]+ M parameters" "$run_dir/logs/$name.log" | tail -1)
  note "$name: rc=$rc ${params#train: }; ${status#train: } | ${speed#train: } (at $(elapsed) s)"
  [[ -f $run_dir/$name/train.csv ]] &&
    note "  $("$python" -m echotk.train.summary "$run_dir/$name" 2>&1)"
done
if [[ $mode == select ]]; then
  note "selection (16-bit, seed 0, $tokens tokens; flat: max / min of the validation loss over the last fifth within 1%):"
  for name in "$@"; do
    [[ -f $run_dir/$name/train.csv ]] && note "  $("$python" -m echotk.train.summary "$run_dir/$name" 2>&1) [$(model_flags "$name")]"
  done
fi
note "total $(elapsed) s"
