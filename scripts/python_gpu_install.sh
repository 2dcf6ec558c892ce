# Sourced by the GPU scripts (which set `root`): install_echotk_cuda PYTHON LOG builds and installs
# the echotk package from this checkout with its CUDA path (the one-GPU emulation kernel and the
# communicator of echotk.distributed, sm_90), NCCL found by scripts/nccl_env.sh (the toolkit's, the
# system's or the nvidia-nccl wheel's). Returns non-zero when the install fails or the extension
# lacks its CUDA path or its communicator.
install_echotk_cuda() {
  local python=$1 log=$2
  source "$root/scripts/nccl_env.sh"
  mkdir -p "$root/build"
  find_nccl "$root/build"
  CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) "$python" -m pip install --no-deps --no-build-isolation -v . \
      -C cmake.define.ECHO_PYTHON_CUDA=ON -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90 \
      ${nccl_root:+-C cmake.define.NCCL_ROOT=$nccl_root} >"$log" 2>&1 || return 1
  [[ $(cd /tmp && "$python" -c "import echotk._C as c; print(c.HAS_CUDA, c.HAS_COMMUNICATOR)" 2>&1) == "True True" ]]
}
