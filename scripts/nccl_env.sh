# Sourced by the GPU scripts: find_nccl BUILD_DIR sets nccl_root to NCCL's prefix when nccl.h is
# not in the toolkit or the system (the nvidia-nccl wheel's, say; empty otherwise) and exports the
# paths the build and the tests need. The wheel ships libnccl.so.2 only: the linker gets the plain
# name through a link in BUILD_DIR/nccl-lib.
find_nccl() {
  local build_dir=$1 h
  nccl_root=""
  if [[ ! -e /usr/local/cuda/include/nccl.h && ! -e /usr/include/nccl.h ]]; then
    h=$(find / -xdev -name nccl.h -path '*include*' 2>/dev/null | head -1)
    [[ -n $h ]] && nccl_root=$(dirname "$(dirname "$h")")
  fi
  if [[ -n $nccl_root && ! -e $nccl_root/lib/libnccl.so && -e $nccl_root/lib/libnccl.so.2 ]]; then
    mkdir -p "$build_dir/nccl-lib" && ln -sf "$nccl_root/lib/libnccl.so.2" "$build_dir/nccl-lib/libnccl.so"
    export LIBRARY_PATH="$build_dir/nccl-lib:${LIBRARY_PATH:-}"
  fi
  if [[ -n $nccl_root ]]; then export LD_LIBRARY_PATH="$nccl_root/lib:${LD_LIBRARY_PATH:-}"; fi
}
