// Echo all-reduce on CUDA GPUs: the public host API (docs/cuda-api.md).
//
//   Communicator*  create_group(...)  one process driving P GPUs (ranks may share a GPU)
//                  create_from_nccl() one process per GPU; peer buffers through CUDA IPC handles
//                                     exchanged over the caller's NCCL communicator
//   allreduce(comm, in, out, count, spec, state, stream)  enqueue one call, returns at once
//   synchronize(comm, &report)        wait for the calls so far; report the last one's result
//   destroy(comm)
//
// Every function returns a Status; none exits or throws. allreduce performs no host
// synchronization: stages are ordered across GPUs by peer-visible flags and inside a GPU by the
// caller's stream, so repeated calls can be captured into a CUDA graph.
#pragma once

// The runtime API with its C++ overloads (cudaMalloc(T**), ...), which users of this header have
// had from it since it included <nccl.h>.
#include <cuda_runtime.h>

#include <cstddef>

#include "echo/allreduce.h"
#include "echo/cuda/can_implement.h"
#include "echo/cuda/tuning.h"
#include "echo/status.h"

// NCCL's communicator handle, declared as <nccl.h> declares it, so that users of this header need
// no NCCL headers (only create_from_nccl takes one; the library links NCCL itself).
struct ncclComm;
typedef struct ncclComm* ncclComm_t;

namespace echo::cuda {

enum class Transport : int {
  kPeerToPeer = 0,  // kernels write into peers' memory over NVLink (the Echo path)
  kNccl = 1,        // same algorithm and bits over ncclSend/ncclRecv + ncclAllGather; shares no
                    // memory between ranks (no peer access, no CUDA IPC), so ranks need not
                    // reach each other's memory (other nodes)
};

// Creation refuses (kInvalidArgument) a slot_bytes other than 0 below kMinSlotBytes, a timeout that
// is not positive, finite and at most 1e9 s, and negative tiling or lag settings.
struct CommOptions {
  // Bytes of one source's receive slot: one round of a segment's codes and parameters (0:
  // default_slot_bytes(P), echo/cuda/tuning.h; at least kMinSlotBytes). Larger messages run in several rounds (bit-identical: rounds split on
  // tile boundaries).
  std::size_t slot_bytes = 0;
  // Elements per round of the exact small-message path.
  std::size_t exact_capacity = std::size_t{1} << 20;
  // A wait on a peer flag longer than this fails the call with kTimeout (rank, tile, stage). With
  // Transport::kNccl the ranks wait inside NCCL, which this bound does not reach.
  double timeout_seconds = 10.0;
  // Tiling of a segment's round of n block iterations: about tiles_per_sqrt_iteration * sqrt(n)
  // tiles (0 picks 16 for 4 bits and 24 for 8, docs/performance.md, "Tiles by the square-root
  // rule"); or, when tiles_per_wave > 0, about that many tiles per wave of resident blocks.
  double tiles_per_sqrt_iteration = 0.0;
  int tiles_per_wave = 0;
  // How far, in waves of resident jobs, a tile's reduce trails its push and its tail trails its
  // reduce (0 picks the default, 3): a stage taken later finds its peers' flags raised more often,
  // at the cost of a longer fill and drain (docs/performance.md, "Lags of three waves").
  int reduce_lag_waves = 0;
  int tail_lag_waves = 0;
  // Messages of at least this many elements run the split form of the owner kernel where their
  // variant has one (echo/cuda/tuning.h); 0 runs it at every size (bit-identical either way).
  std::size_t split_tail_min_count = kDefaultSplitTailMinCount;
  Transport transport = Transport::kPeerToPeer;
};

// Hardware work queues from the host to each GPU: the driver reads CUDA_DEVICE_MAX_CONNECTIONS
// when it creates a context (default 8, at most 32). Every rank issues work on two streams of its
// GPU (the caller's and the library's side stream). When the streams of the ranks sharing a GPU
// outnumber the queues, streams share a queue, and a rank's kernel can wait in it behind another
// rank's kernel that spins until the first has run: the call times out. create_group refuses such
// a group (kUnsupported, naming the variable); a rank alone on its GPU has nobody to wait behind,
// whatever the variable says.
inline constexpr int kStreamsPerRank = 2;
// The queue count the environment asks for (8 when CUDA_DEVICE_MAX_CONNECTIONS is unset).
int work_queues();
// Sets CUDA_DEVICE_MAX_CONNECTIONS to 32 unless the environment already sets it. Programs that put
// more than four ranks on one GPU call it before their first CUDA call (later it has no effect on
// a context that already exists).
void request_work_queues();

class Communicator;
struct CompensatorBuffers;

// can_implement(spec, ranks) (echo/cuda/can_implement.h) and the CommOptions that creation
// refuses: the single validation of a request before any GPU work.
Status can_implement(const AllReduceSpec& spec, int ranks, const CommOptions& options);

// Single process: ranks[r] of comms lives on devices[r]; several ranks may share one device (at
// most work_queues() / kStreamsPerRank of them when they do).
Status create_group(int ranks, const int* devices, const CommOptions& options, Communicator** comms);
// One process per GPU: `nccl` spans the ranks; the current device is this rank's GPU.
Status create_from_nccl(ncclComm_t nccl, const CommOptions& options, Communicator** comm);
Status destroy(Communicator* comm);

int comm_rank(const Communicator* comm);
int comm_ranks(const Communicator* comm);
int comm_device(const Communicator* comm);

// Compensator state of one rank for one pass direction (m1, m2 in fp32, on the rank's device),
// for messages of up to `capacity` elements; starts reset.
Status create_compensator(Communicator* comm, std::size_t capacity, CompensatorBuffers** state);
// Start of a pass: the next call applies no correction and starts the averages from zero. Needs the
// state's communicator alive; destroy_compensator does not (states may outlive it).
Status reset_compensator(CompensatorBuffers* state, cudaStream_t stream);
Status destroy_compensator(CompensatorBuffers* state);

// One all-reduce of `count` elements of spec.dtype; in == out is allowed. `state` may be null when
// spec.compensator.mode is off. `compensated` (optional, fp32[count], 16-byte aligned) receives
// x' = x + c.
// In the global residual mode the state update runs on a side stream after the call, reading the
// output: do not write `out` before the next call on this communicator or join().
Status allreduce(Communicator* comm, const void* in, void* out, std::size_t count,
                 const AllReduceSpec& spec, CompensatorBuffers* state, cudaStream_t stream,
                 float* compensated = nullptr);
// Makes `stream` wait for the pending state update (before ending a graph capture, or before
// reading the state).
Status join(Communicator* comm, cudaStream_t stream);
// Waits for every call issued so far and fills the last call's report (poisoned groups of this
// rank's segment, shared exponent, path taken). Returns kTimeout if a peer wait timed out.
Status synchronize(Communicator* comm, AllReduceReport* report);

}  // namespace echo::cuda
