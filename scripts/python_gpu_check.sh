#!/usr/bin/env bash
# The echotk Python package on a GPU machine in one go (torch, transformers, nanobind,
# scikit-build-core and pytest installed in the current Python; no downloads): builds and installs
# echotk from source with its CUDA path (the one-GPU emulation kernel, sm_90), runs the Python
# suite with the GPU cases (python/tests/test_cuda.py: bit-exact sweep against the CPU reference,
# bad input, torch.compile and CUDA-graph replay of a TP forward), then the TP-forward speed
# script (python/benchmarks/tp_forward.py). Logs and summary.txt under $OUT (default build/out).
# Tests that need build/bin/echotk or the SmolLM2 GGUF skip when those are absent; without h5py
# only the files that do not import it run. Environment: PYTHON (default python3).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-$root/build/out}
mkdir -p "$out"
python=${PYTHON:-python3}
summary=$out/summary.txt
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
start=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$out/gpu.txt" 2>&1
note "gpu: $(head -1 "$out/gpu.txt"); $("$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1)"

source "$root/scripts/python_gpu_install.sh"
install_echotk_cuda "$python" "$out/python-install.log" ||
  { note "install FAILED or the extension has no CUDA path (python-install.log)"
    grep -E "error|Error" "$out/python-install.log" | head -40; exit 1; }
note "install ok in $(( $(date +%s) - start )) s"

# The suite, from python/tests so that `import echotk` finds the installed package.
files=(test_cuda.py test_tensor_parallel.py test_training.py)
if "$python" -c "import h5py" >/dev/null 2>&1; then files=(.); fi
( cd python/tests && timeout "${TEST_TIMEOUT:-360}" "$python" -m pytest -q -rs -p no:cacheprovider \
    --junitxml="$out/pytest.xml" "${files[@]}" ) >"$out/pytest.log" 2>&1
rc=$?
note "pytest ${files[*]}: rc=$rc, $(tail -1 "$out/pytest.log")"
[[ $rc == 0 ]] || grep -E "^(FAILED|ERROR)" "$out/pytest.log" | head -30 | tee -a "$summary"

timeout "${BENCH_TIMEOUT:-180}" "$python" python/benchmarks/tp_forward.py >"$out/tp_forward.txt" 2>&1
bench_rc=$?
note "tp_forward: rc=$bench_rc"
tee -a "$summary" <"$out/tp_forward.txt" | tail -20
note "total $(( $(date +%s) - start )) s"
exit $(( rc != 0 || bench_rc != 0 ))
