#!/usr/bin/env bash
# The echotk Python package on a GPU machine in one go (torch, transformers, nanobind,
# scikit-build-core and pytest installed in the current Python; no downloads): builds and installs
# echotk from source with its CUDA path (the one-GPU emulation kernel, sm_90), runs the Python
# suite with the GPU cases (python/tests/test_cuda.py: bit-exact sweep against the CPU reference,
# bad input, torch.compile and CUDA-graph replay of a TP forward), then the TP-forward speed
# script (python/benchmarks/tp_forward.py). Logs and summary.txt under $OUT (default build/out).
# Tests that need build/bin/echotk or the SmolLM2 GGUF skip when those are absent; without h5py
# only the files that do not import it run. The build includes the communicator of
# echotk.distributed (echo_cuda, linked to NCCL), whose tests (python/tests/test_distributed.py) run
# with the others, followed by python/examples/torchrun_allreduce.py under torchrun on every GPU.
#   bash scripts/python_gpu_check.sh [all|distributed]   # distributed: only the communicator's tests
#                                                        # and example (no other tests, no benchmark)
# Environment: PYTHON (default python3).
set -uo pipefail
mode=${1:-all}
[[ $mode == all || $mode == distributed ]] || { echo "usage: $0 [all|distributed]" >&2; exit 2; }
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
  { note "install FAILED, or the extension has no CUDA path or no communicator (python-install.log)"
    grep -E "error|Error" "$out/python-install.log" | head -40; exit 1; }
note "install ok in $(( $(date +%s) - start )) s; NCCL $(cd /tmp && "$python" -c "import echotk._C as c; print(c.NCCL_VERSION)" 2>&1)"
ldd "$("$python" -c "import echotk._C as c; print(c.__file__)" 2>/dev/null)" 2>&1 | grep -E "nccl|cudart" >>"$summary"

# The suite, from python/tests so that `import echotk` finds the installed package.
files=(test_cuda.py test_tensor_parallel.py test_training.py test_distributed.py)
if "$python" -c "import h5py" >/dev/null 2>&1; then files=(.); fi
[[ $mode == distributed ]] && files=(test_distributed.py)
( cd python/tests && timeout "${TEST_TIMEOUT:-360}" "$python" -m pytest -q -rs -p no:cacheprovider \
    --junitxml="$out/pytest.xml" "${files[@]}" ) >"$out/pytest.log" 2>&1
rc=$?
note "pytest ${files[*]}: rc=$rc, $(tail -1 "$out/pytest.log")"
[[ $rc == 0 ]] || grep -E "^(FAILED|ERROR)" "$out/pytest.log" | head -30 | tee -a "$summary"

# The example as torchrun starts it, on every GPU of the machine.
gpus=$("$python" -c "import torch; print(min(torch.cuda.device_count(), 8))")
( cd /tmp && timeout "${EXAMPLE_TIMEOUT:-120}" "$python" -m torch.distributed.run --standalone \
    --nproc-per-node "$gpus" "$root/python/examples/torchrun_allreduce.py" --calls 4 ) >"$out/torchrun.txt" 2>&1
example_rc=$?
note "torchrun_allreduce.py on $gpus GPU(s): rc=$example_rc"
tail -8 "$out/torchrun.txt" | tee -a "$summary"
rc=$(( rc != 0 || example_rc != 0 ))
if [[ $mode == distributed ]]; then
  note "total $(( $(date +%s) - start )) s"
  exit $rc
fi

timeout "${BENCH_TIMEOUT:-180}" "$python" python/benchmarks/tp_forward.py >"$out/tp_forward.txt" 2>&1
bench_rc=$?
note "tp_forward: rc=$bench_rc"
tee -a "$summary" <"$out/tp_forward.txt" | tail -20
note "total $(( $(date +%s) - start )) s"
exit $(( rc != 0 || bench_rc != 0 ))
