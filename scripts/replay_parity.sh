#!/usr/bin/env bash
# `echotk replay --backend cuda` against `--backend cpu` on the same traces: every configuration's
# /outputs (every rank's result of every site and pass) must be bitwise the same.
#   scripts/replay_parity.sh [BUILD_DIR] [OUT_DIR]
# Traces: the bundled synthetic one (P = 4, n = 1600), the recorded SmolLM2 one (P = 4, n = 9216,
# 60 sites) and three written here with data/examples/write_example_trace.py (P = 2, n = 1313;
# P = 3, n = 8973; P = 8, n = 1015: sizes that are no multiple of the group; ranks share the GPUs
# when there are fewer). Configurations cover every quantizer,
# bit width, compensator mode, residual mode, dtype and state dtype, and the exact small-message
# path, and the Hadamard rotation (--rotation hadamard, docs/numerics.md 2.6). The wide configurations (--overflow-groups wide, docs/numerics.md 2.4) run on a trace
# whose sites reach 1e35 (write_example_trace.py --magnitudes: groups far past the fp16 scale
# limit, P = 4, n = 1515) and on the bundled one. Compensator units 'stream' (docs/numerics.md 6.1)
# run on the recorded Gemma 3 trace (its sites carry their post-norm's weights) when neither backend
# is `cuda`, whose peer-to-peer kernels refuse those units. Needs Python with h5py and numpy (trace
# writing and the comparison).
#   ECHO_PARITY_BACKENDS  the two backends compared (default "cpu cuda"; "cpu emulate" the one-GPU
#                         emulation, stream units included; "cpu cpu" checks the script and the
#                         reference's run-to-run determinism without a GPU)
#   ECHO_PARITY_SETS      which sets of configurations run (default "base wide stream": the
#                         configurations on the five traces, the wide ones, the stream units ones)
#   PYTHON                interpreter with h5py and numpy (default python3)
# Exit status: 0 when every configuration matches, 1 otherwise, 77 without h5py/numpy.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
out=${2:-$build/replay-parity}
echotk=$build/bin/echotk
read -r backend_a backend_b <<<"${ECHO_PARITY_BACKENDS:-cpu cuda}"
[[ -x $echotk ]] || { echo "replay_parity: $echotk not found (build first)" >&2; exit 1; }
python=${PYTHON:-python3}
"$python" -c "import h5py, numpy" 2>/dev/null || { echo "replay_parity: $python lacks h5py/numpy" >&2; exit 77; }
mkdir -p "$out"

"$python" "$root/data/examples/write_example_trace.py" "$out/synthetic_p2.h5" --ranks 2 --tokens 13 --hidden 101 \
  --seed 7 >/dev/null || exit 1
"$python" "$root/data/examples/write_example_trace.py" "$out/synthetic_p3.h5" --ranks 3 --tokens 9 --hidden 997 \
  --dtype float16 --seed 8 >/dev/null || exit 1
"$python" "$root/data/examples/write_example_trace.py" "$out/synthetic_p8.h5" --ranks 8 --tokens 5 --hidden 203 \
  --seed 9 >/dev/null || exit 1
"$python" "$root/data/examples/write_example_trace.py" "$out/synthetic_wide_p4.h5" --ranks 4 --tokens 15 \
  --hidden 101 --sites 40 --magnitudes --seed 10 >/dev/null || exit 1
traces=("$out/synthetic_p2.h5" "$out/synthetic_p3.h5" "$root/data/examples/synthetic_p4.h5"
        "$root/data/smollm2/trace-p4-moby-2x16.h5" "$out/synthetic_p8.h5")

# One line per configuration: echotk replay options.
configs=(
  "--quantizer zero-aware --bits 4 --compensator dual --dtype bf16"
  "--quantizer zero-aware --bits 4 --compensator dual --residual local --dtype bf16"
  "--quantizer zero-aware --bits 8 --compensator single --dtype fp16"
  "--quantizer zero-aware --bits 4 --compensator off --dtype fp32"
  "--quantizer naive --bits 4 --compensator dual --residual local --dtype fp16"
  "--quantizer naive --bits 8 --compensator off --dtype bf16"
  "--quantizer symmetric --bits 4 --compensator single --residual local --dtype fp32"
  "--quantizer symmetric --bits 8 --compensator dual --dtype bf16"
  "--quantizer zero-aware --bits 4 --compensator dual --state-dtype bf16 --dtype bf16"
  "--quantizer zero-aware --bits 4 --compensator dual --residual local --state-dtype bf16 --dtype fp16"
  "--quantizer zero-aware --bits 4 --compensator dual --exact-max-count 4096 --dtype bf16"
  "--quantizer zero-aware --bits 8 --compensator dual --residual local --exact-max-count 100000 --dtype fp32"
  "--rotation hadamard --quantizer zero-aware --bits 4 --compensator dual --residual local --dtype bf16"
  "--rotation hadamard --quantizer symmetric --bits 8 --compensator single --dtype fp32"
  "--rotation hadamard --quantizer naive --bits 4 --compensator off --dtype fp16"
)

# Wide groups: on the trace with huge values (every configuration would poison groups there
# without it) and on an ordinary one, where they change nothing.
wide_traces=("$out/synthetic_wide_p4.h5" "$root/data/examples/synthetic_p4.h5")
wide_configs=(
  "--overflow-groups wide --quantizer zero-aware --bits 4 --compensator dual --residual local --dtype bf16"
  "--overflow-groups wide --quantizer symmetric --bits 4 --compensator dual --dtype fp32"
  "--overflow-groups wide --quantizer naive --bits 8 --compensator off --dtype bf16"
  "--overflow-groups wide --quantizer zero-aware --bits 4 --compensator single --residual local --state-dtype bf16 --dtype fp32"
)
# Wide groups with the rotation, on the bundled trace only (a rotation's butterflies overflow near
# FLT_MAX / g, which the huge trace reaches).
wide_rotation_config="--overflow-groups wide --rotation hadamard --quantizer zero-aware --bits 4 --compensator dual --residual local --dtype bf16"
# Compensator units 'stream': the recorded Gemma 3 trace (P = 4, post-norm sites of 640 elements).
stream_trace=$root/data/gemma3/trace-gemma3-p4-moby-2x16.h5
stream_configs=(
  "--compensator-units stream --residual local --quantizer zero-aware --bits 4 --compensator dual --dtype bf16"
  "--compensator-units stream --residual local --compensator-profile sqrt --compensator-clip 1 --bits 4 --compensator dual --dtype bf16"
  "--compensator-units stream --compensator-profile sqrt --compensator-clip 0.5 --bits 8 --compensator single --dtype fp32"
  "--compensator-units stream --residual local --rotation hadamard --group 64 --compensator-profile sqrt --compensator-clip 2 --state-dtype bf16 --dtype bf16"
  "--compensator-units stream --compensator-gains sum --residual local --compensator-profile sqrt --compensator-clip 1 --bits 4 --compensator dual --dtype bf16"
  "--compensator-units stream --compensator-gains sum --rotation hadamard --group 64 --bits 8 --compensator single --state-dtype bf16 --dtype fp32"
)

compare() {  # compare FILE_A FILE_B: prints "same" or where the first bits differ
  "$python" - "$1" "$2" <<'PY'
import sys
import h5py
import numpy as np
with h5py.File(sys.argv[1], "r") as fa, h5py.File(sys.argv[2], "r") as fb:
    a = fa["/outputs"][...].view(np.uint32)
    b = fb["/outputs"][...].view(np.uint32)
if a.shape != b.shape:
    print(f"shapes differ: {a.shape} vs {b.shape}")
    sys.exit(1)
diff = np.argwhere(a != b)
if len(diff) == 0:
    print(f"same ({a.size} outputs)")
    sys.exit(0)
p, s, r, e = diff[0]
print(f"{len(diff)} of {a.size} outputs differ; first at pass {p} site {s} rank {r} element {e}: "
      f"{a[p, s, r, e]:#010x} vs {b[p, s, r, e]:#010x}")
sys.exit(1)
PY
}

failed=0
total=0
# run_config TRACE TAG CONFIG: both backends on one trace and configuration, compared.
run_config() {
  local trace=$1 tag=$2 cfg=$3 name run be f verdict res=()
  name=$(basename "$trace" .h5)
  total=$((total + 1))
  for run in a b; do
    [[ $run == a ]] && be=$backend_a || be=$backend_b
    f="$out/$name-$tag-$run-$be.h5"
    # shellcheck disable=SC2086
    if ! "$echotk" replay "$trace" --backend "$be" --save-outputs --quiet $cfg --out "$f" >"$f.log" 2>&1; then
      echo "FAIL $name [$cfg] $be: $(tail -1 "$f.log")"
      failed=$((failed + 1))
      return
    fi
    res+=("$f")
  done
  if verdict=$(compare "${res[0]}" "${res[1]}"); then
    echo "ok   $name [$cfg]: $verdict"
  else
    echo "FAIL $name [$cfg]: $verdict"
    failed=$((failed + 1))
  fi
  rm -f "${res[@]}"
}
sets=" ${ECHO_PARITY_SETS:-base wide stream} "
if [[ $sets == *" base "* ]]; then
  for trace in "${traces[@]}"; do
    for i in "${!configs[@]}"; do run_config "$trace" "$i" "${configs[$i]}"; done
  done
fi
if [[ $sets == *" wide "* ]]; then
  for trace in "${wide_traces[@]}"; do
    for i in "${!wide_configs[@]}"; do run_config "$trace" "wide$i" "${wide_configs[$i]}"; done
  done
  run_config "$root/data/examples/synthetic_p4.h5" wide-rotation "$wide_rotation_config"
fi
if [[ $sets == *" stream "* ]]; then
  if [[ $backend_a != cuda && $backend_b != cuda ]]; then
    for i in "${!stream_configs[@]}"; do run_config "$stream_trace" "stream$i" "${stream_configs[$i]}"; done
  else
    echo "skip compensator units 'stream' (${#stream_configs[@]} configurations): the cuda backend refuses them"
  fi
fi
echo "replay parity ($backend_a vs $backend_b): $((total - failed)) of $total configurations bitwise the same"
(( failed == 0 ))
