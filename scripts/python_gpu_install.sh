# Sourced by the GPU scripts: install_echotk_cuda PYTHON LOG builds and installs the echotk
# package from this checkout with its CUDA path (the one-GPU emulation kernel, sm_90), finding
# NCCL's header (shared internal headers of cuda/ include it; no NCCL library is linked) in the
# toolkit, the system or the nvidia-nccl wheel. Reruns reuse build/python-* and rebuild only what
# changed. Returns non-zero when the install fails or the extension has no CUDA path.
install_echotk_cuda() {
  local python=$1 log=$2 nccl_root="" h
  if [[ ! -e /usr/local/cuda/include/nccl.h && ! -e /usr/include/nccl.h ]]; then
    h=$(find / -xdev -name nccl.h -path '*nccl/include*' 2>/dev/null | head -1)
    [[ -n $h ]] && nccl_root=$(dirname "$(dirname "$h")")
  fi
  CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "$python" -m pip install --no-deps --no-build-isolation -v . \
      -C cmake.define.ECHO_PYTHON_CUDA=ON -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 \
      ${nccl_root:+-C cmake.define.NCCL_ROOT=$nccl_root} >"$log" 2>&1 || return 1
  [[ $(cd /tmp && "$python" -c "import echotk._C as c; print(c.HAS_CUDA)" 2>&1) == True ]]
}
