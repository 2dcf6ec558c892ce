#!/usr/bin/env bash
# Starts one process per GPU (up to 8, the most ranks the library takes) of the multi-process test: through mpirun when the binary
# was built with MPI, else as a torchrun-style launcher would (RANK / WORLD_SIZE), sharing the
# NCCL id through a file. Skips (exit 0) with fewer than two GPUs.
set -euo pipefail
bin=$1
gpus=$(nvidia-smi -L 2>/dev/null | wc -l || echo 0)
(( gpus >= 2 )) || { echo "skipped (needs two GPUs)"; exit 0; }
n=$(( gpus < 8 ? gpus : 8 ))
if ldd "$bin" | grep -q libmpi; then
  echo "launcher: mpirun, $n processes (NCCL id through MPI_Bcast)"
  exec mpirun --allow-run-as-root --oversubscribe -np "$n" -x NCCL_NVLS_ENABLE=0 "$bin"
fi
echo "launcher: $n processes with RANK / WORLD_SIZE (NCCL id through a file; built without MPI)"
idfile=$(mktemp -u /tmp/echo-nccl-id.XXXXXX)
pids=()
for ((r = 0; r < n; ++r)); do
  RANK=$r WORLD_SIZE=$n NCCL_NVLS_ENABLE=0 "$bin" "$idfile" & pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
rm -f "$idfile"
exit $status
