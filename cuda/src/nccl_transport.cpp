// The NCCL transport of the owner all-reduce (the "two-collective" baseline of the paper's
// Table 2, and the path for ranks without NVLink between them). The same kernels run one stage
// per launch on local buffers:
//   push launch    quantize every segment j != rank into the local send slot of owner j
//   all-to-all     grouped ncclSend / ncclRecv of the slots into the owners' receive slots
//   reduce launch  dequantize + fp32 sum + requantize into the own gather slot, own output
//   ncclAllGather  of the gather slots (in place)
//   tail launch    dequantize the peers' segments
// Quantization and summation are the code of the peer-to-peer path, so both are bit-identical.
#include <algorithm>
#include <string>

#include "check.h"
#include "communicator_impl.h"
#include "launch.h"

namespace echo::cuda {

namespace {
std::size_t align_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }
}  // namespace

Status nccl_allreduce(Communicator* comm, const CallArgs& base, const Schedule& sched,
                      cudaStream_t stream) {
  if (comm->nccl == nullptr) {
    return Status(StatusCode::kUnsupported,
                  "the NCCL transport needs an NCCL communicator (create_from_nccl, or create_group "
                  "with one GPU per rank)");
  }
  CallArgs a = base;
  a.nccl = true;
  const std::size_t gb = static_cast<std::size_t>(a.group) * a.bits / 8;
  const std::size_t pb = a.kind == QuantizerKind::kSymmetric ? 2 : 4;
  // Compact slots: a round's codes then its parameters, contiguous per rank for ncclAllGather.
  a.codes_bytes = align_up(sched.round_groups * gb, 256);
  const std::size_t wire = align_up(a.codes_bytes + sched.round_groups * pb, 256);
  a.layout.slot_bytes = wire;
  char* ws = comm->workspace;
  char* recv = ws + a.layout.recv_offset;
  char* gather = ws + a.layout.gather_offset;
  const int P = comm->ranks;
  for (int r = 0; r < sched.rounds; ++r) {
    a.round_group_begin = static_cast<std::size_t>(r) * sched.round_groups;
    a.round_groups = sched.round_groups;
    a.num_tiles = sched.num_tiles;
    const bool last = r + 1 == sched.rounds;
    // Stage push.
    a.round = 3 * r;
    a.stages = kStagePush;
    ECHO_CUDA_CHECK(owner_allreduce(a, false, sched.grid, stream));
    // Quantized all-to-all.
    ECHO_NCCL_CHECK(ncclGroupStart());
    for (int k = 1; k < P; ++k) {
      const int to = (comm->rank + k) % P;
      const int from = (comm->rank - k + P) % P;
      ECHO_NCCL_CHECK(ncclSend(gather + static_cast<std::size_t>(to) * wire, wire, ncclUint8, to, comm->nccl, stream));
      ECHO_NCCL_CHECK(ncclRecv(recv + static_cast<std::size_t>(from) * wire, wire, ncclUint8, from, comm->nccl, stream));
    }
    ECHO_NCCL_CHECK(ncclGroupEnd());
    // Stages reduce + gather (own slot).
    a.round = 3 * r + 1;
    a.stages = kStageReduce;
    ECHO_CUDA_CHECK(owner_allreduce(a, false, sched.grid, stream));
    ECHO_NCCL_CHECK(ncclAllGather(gather + static_cast<std::size_t>(comm->rank) * wire, gather, wire,
                                  ncclUint8, comm->nccl, stream));
    // Stage tail.
    a.round = 3 * r + 2;
    a.stages = kStageTail;
    ECHO_CUDA_CHECK(owner_allreduce(a, last, sched.grid, stream));
  }
  return Status::Ok();
}

// The exact path's lines of one round (parity 0, the NCCL transport's only one): this rank's slot
// to every peer, every peer's slot into this rank's staging. One line per four elements with
// 16-bit terms, two with fp32 ones (exact_terms_16bit); a slot holds the fp32 size.
Status nccl_exact_exchange(Communicator* comm, std::size_t exact_count, bool terms_16bit, cudaStream_t stream) {
  const std::size_t slot_bytes = comm->layout.exact_capacity / 2 * 16;
  const std::size_t bytes = (exact_count + 3) / 4 * (terms_16bit ? 1 : 2) * 16;
  char* staging = comm->workspace + comm->layout.exact_offset;
  const int P = comm->ranks;
  ECHO_NCCL_CHECK(ncclGroupStart());
  for (int k = 1; k < P; ++k) {
    const int to = (comm->rank + k) % P;
    const int from = (comm->rank - k + P) % P;
    ECHO_NCCL_CHECK(ncclSend(staging + static_cast<std::size_t>(comm->rank) * slot_bytes, bytes, ncclUint8, to,
                             comm->nccl, stream));
    ECHO_NCCL_CHECK(ncclRecv(staging + static_cast<std::size_t>(from) * slot_bytes, bytes, ncclUint8, from,
                             comm->nccl, stream));
  }
  ECHO_NCCL_CHECK(ncclGroupEnd());
  return Status::Ok();
}

}  // namespace echo::cuda
