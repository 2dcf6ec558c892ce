// Host side of the communicator: options, workspace layout, creation for both process models, the
// compensator buffers and the error record. The call path is allreduce.cpp, its plan plan.cpp.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <string>
#include <vector>

#include "check.h"
#include "communicator_impl.h"
#include "launch.h"

namespace echo::cuda {
namespace {

std::size_t align_up(std::size_t v, std::size_t a) { return (v + a - 1) / a * a; }

}  // namespace

Status validate_options(const CommOptions& o) {
  if (o.slot_bytes != 0 && o.slot_bytes < kMinSlotBytes) {
    return Status(StatusCode::kInvalidArgument, "CommOptions::slot_bytes must be 0 (the default) or at least " +
                                                    std::to_string(kMinSlotBytes) + ", got " +
                                                    std::to_string(o.slot_bytes));
  }
  if (!(o.timeout_seconds > 0.0) || !std::isfinite(o.timeout_seconds) || o.timeout_seconds > 1e9) {
    return Status(StatusCode::kInvalidArgument,
                  "CommOptions::timeout_seconds must be positive, finite and at most 1e9, got " +
                      std::to_string(o.timeout_seconds));
  }
  if (!(o.tiles_per_sqrt_iteration >= 0.0) || !std::isfinite(o.tiles_per_sqrt_iteration) || o.tiles_per_wave < 0 ||
      o.reduce_lag_waves < 0 || o.tail_lag_waves < 0) {
    return Status(StatusCode::kInvalidArgument,
                  "CommOptions tiling and lags must be >= 0 (0 picks the default)");
  }
  return Status::Ok();
}

Status can_implement(const AllReduceSpec& spec, int ranks, const CommOptions& options) {
  ECHO_TRY(can_implement(spec, ranks));
  return validate_options(options);
}

WorkspaceLayout make_layout(const CommOptions& options, int ranks) {
  WorkspaceLayout l{};
  l.slot_bytes = align_up(options.slot_bytes != 0 ? options.slot_bytes : default_slot_bytes(ranks), 256);
  l.exact_capacity = align_up(std::max<std::size_t>(options.exact_capacity, kExactChunk), kExactChunk);
  std::size_t off = 0;
  l.recv_offset = off;
  off += static_cast<std::size_t>(ranks) * l.slot_bytes;
  l.gather_offset = off;
  off += static_cast<std::size_t>(ranks) * l.slot_bytes;
  l.exact_offset = off;
  off += align_up(2 * static_cast<std::size_t>(ranks) * (l.exact_capacity / 2) * 16, 256);
  l.push_flags_offset = off;
  off += align_up(static_cast<std::size_t>(ranks) * kMaxTilesPerRound * 8, 256);
  l.gather_flags_offset = off;
  off += align_up(static_cast<std::size_t>(ranks) * kMaxTilesPerRound * 8, 256);
  l.scale_words_offset = off;
  off += align_up(static_cast<std::size_t>(ranks) * 8, 256);
  l.control_offset = off;
  off += align_up(sizeof(Control), 256);
  l.total_bytes = off;
  return l;
}

Status init_local(Communicator* comm) {
  ECHO_CUDA_CHECK(cudaSetDevice(comm->device));
  cudaDeviceProp prop{};
  ECHO_CUDA_CHECK(cudaGetDeviceProperties(&prop, comm->device));
  comm->sm_count = prop.multiProcessorCount;
  // Every kernel is loaded now, never inside a call (lazy loading could synchronize the context
  // while this rank's kernel waits for a peer).
  ECHO_CUDA_CHECK(owner_allreduce_preload());
  ECHO_CUDA_CHECK(exact_allreduce_preload());
  ECHO_CUDA_CHECK(backward_max_preload());
  ECHO_CUDA_CHECK(compensator_update_preload());
  comm->exact_blocks_per_sm = exact_allreduce_max_blocks_per_sm();
  comm->layout = make_layout(comm->options, comm->ranks);
  void* ws = nullptr;
  ECHO_CUDA_CHECK(cudaMalloc(&ws, comm->layout.total_bytes));
  comm->workspace = static_cast<char*>(ws);
  // Flags start at 0, below every epoch (epochs start at 1).
  ECHO_CUDA_CHECK(cudaMemset(ws, 0, comm->layout.total_bytes));
  ECHO_CUDA_CHECK(cudaDeviceSynchronize());  // zeroed before any peer learns the address
  void* err = nullptr;
  ECHO_CUDA_CHECK(cudaHostAlloc(&err, sizeof(device::ErrorRecord), cudaHostAllocMapped));
  std::memset(err, 0, sizeof(device::ErrorRecord));
  comm->error = static_cast<device::ErrorRecord*>(err);
  ECHO_CUDA_CHECK(cudaStreamCreateWithFlags(&comm->side, cudaStreamNonBlocking));
  ECHO_CUDA_CHECK(cudaEventCreateWithFlags(&comm->entry_done, cudaEventDisableTiming));
  ECHO_CUDA_CHECK(cudaEventCreateWithFlags(&comm->update_done, cudaEventDisableTiming));
  comm->peer_base[comm->rank] = comm->workspace;
  return Status::Ok();
}

int work_queues() {
  const char* v = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  if (v == nullptr || *v == '\0') return 8;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (*end != '\0' || n < 1) return 8;  // the driver ignores a value it cannot read
  return static_cast<int>(std::min(n, 32L));
}

void request_work_queues() { setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0); }

namespace {

// The communicators of create_group, built into `made`; on an error the caller frees what was made.
Status build_group(int ranks, const int* devices, const CommOptions& options, int most_shared,
                   std::vector<std::unique_ptr<Communicator>>& made) {
  for (int r = 0; r < ranks; ++r) {
    made[r] = std::make_unique<Communicator>();
    Communicator* c = made[r].get();
    c->rank = r;
    c->ranks = ranks;
    c->device = devices[r];
    c->options = options;
    c->ranks_on_device = static_cast<int>(std::count(devices, devices + ranks, devices[r]));
    c->max_ranks_on_device = most_shared;
    ECHO_TRY(init_local(c));
  }
  // Peer access between distinct devices; ranks on one device use the plain pointers. The NCCL
  // transport shares no memory between ranks (every byte goes through NCCL).
  for (int r = 0; r < ranks; ++r) {
    if (options.transport == Transport::kNccl) continue;  // init_local set the own base
    ECHO_CUDA_CHECK(cudaSetDevice(devices[r]));
    for (int q = 0; q < ranks; ++q) {
      if (devices[q] == devices[r]) continue;
      int can = 0;
      ECHO_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, devices[r], devices[q]));
      if (!can) {
        return Status(StatusCode::kUnsupported, "device " + std::to_string(devices[r]) +
                                                    " cannot access device " + std::to_string(devices[q]) +
                                                    " (use Transport::kNccl)");
      }
      // Peer access is a process-wide property of a device pair: enable each pair once.
      static std::mutex enabled_mutex;
      static std::set<std::pair<int, int>> enabled;
      std::lock_guard<std::mutex> lock(enabled_mutex);
      if (!enabled.insert({devices[r], devices[q]}).second) continue;
      const cudaError_t e = cudaDeviceEnablePeerAccess(devices[q], 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) ECHO_CUDA_CHECK(e);
      (void)cudaGetLastError();
    }
    for (int q = 0; q < ranks; ++q) made[r]->peer_base[q] = made[q]->workspace;
  }
  if (options.transport == Transport::kNccl) {
    // NCCL needs one GPU per rank; its communicators are driven by one host thread per rank.
    std::vector<ncclComm_t> nccl(ranks);
    ECHO_NCCL_CHECK(ncclCommInitAll(nccl.data(), ranks, devices));
    for (int r = 0; r < ranks; ++r) {
      made[r]->nccl = nccl[r];
      made[r]->owns_nccl = true;
    }
  }
  for (int r = 0; r < ranks; ++r) {
    ECHO_CUDA_CHECK(cudaSetDevice(devices[r]));
    ECHO_CUDA_CHECK(cudaDeviceSynchronize());  // every workspace is zeroed before any peer writes
  }
  return Status::Ok();
}

}  // namespace

Status create_group(int ranks, const int* devices, const CommOptions& options, Communicator** comms) {
  if (ranks < 1 || ranks > kMaxRanks) {
    return Status(StatusCode::kInvalidArgument, "ranks must be in [1, 8], got " + std::to_string(ranks));
  }
  if (devices == nullptr || comms == nullptr) {
    return Status(StatusCode::kInvalidArgument, "devices and comms must not be null");
  }
  ECHO_TRY(validate_options(options));
  // The group's most shared GPU: its ranks' streams must each get a hardware queue.
  int most_shared = 0;
  int busiest = devices[0];
  for (int r = 0; r < ranks; ++r) {
    const int sharing = static_cast<int>(std::count(devices, devices + ranks, devices[r]));
    if (sharing > most_shared) {
      most_shared = sharing;
      busiest = devices[r];
    }
  }
  const int queues = work_queues();
  if (most_shared > 1 && most_shared * kStreamsPerRank > queues) {
    const std::string need = std::to_string(most_shared * kStreamsPerRank);
    return Status(StatusCode::kUnsupported,
                  std::to_string(most_shared) + " ranks share GPU " + std::to_string(busiest) + ": their " + need +
                      " streams need CUDA_DEVICE_MAX_CONNECTIONS >= " + need + " (now " + std::to_string(queues) +
                      "), set before the first CUDA call (echo::cuda::request_work_queues); with fewer hardware "
                      "queues one rank's kernel can wait behind another's and the call times out");
  }
  if (options.transport == Transport::kNccl && most_shared > 1) {
    return Status(StatusCode::kInvalidArgument, "the NCCL transport needs one GPU per rank; " +
                                                    std::to_string(most_shared) + " ranks share GPU " +
                                                    std::to_string(busiest));
  }
  std::vector<std::unique_ptr<Communicator>> made(ranks);
  if (const Status built = build_group(ranks, devices, options, most_shared, made); !built.ok()) {
    // Free what was made (workspaces, pinned memory, streams): a caller that retries, as the peer
    // access refusal suggests with Transport::kNccl, does not leak a workspace per attempt.
    for (auto& c : made) {
      if (c) (void)destroy(c.release());
    }
    return built;
  }
  for (int r = 0; r < ranks; ++r) comms[r] = made[r].release();
  return Status::Ok();
}

Status destroy(Communicator* comm) {
  if (comm == nullptr) return Status::Ok();
  std::unique_ptr<Communicator> owned(comm);
  ECHO_CUDA_CHECK(cudaSetDevice(comm->device));
  ECHO_CUDA_CHECK(cudaDeviceSynchronize());
  for (int r = 0; r < comm->ranks; ++r) {
    if (comm->peer_ipc[r]) ECHO_CUDA_CHECK(cudaIpcCloseMemHandle(comm->peer_base[r]));
  }
  if (comm->owns_nccl) ECHO_NCCL_CHECK(ncclCommDestroy(comm->nccl));
  if (comm->side) ECHO_CUDA_CHECK(cudaStreamDestroy(comm->side));
  if (comm->entry_done) ECHO_CUDA_CHECK(cudaEventDestroy(comm->entry_done));
  if (comm->update_done) ECHO_CUDA_CHECK(cudaEventDestroy(comm->update_done));
  if (comm->error) ECHO_CUDA_CHECK(cudaFreeHost(comm->error));
  if (comm->workspace) ECHO_CUDA_CHECK(cudaFree(comm->workspace));
  return Status::Ok();
}

int comm_rank(const Communicator* comm) { return comm->rank; }
int comm_ranks(const Communicator* comm) { return comm->ranks; }
int comm_device(const Communicator* comm) { return comm->device; }

Status create_compensator(Communicator* comm, std::size_t capacity, CompensatorBuffers** state) {
  if (comm == nullptr || state == nullptr || capacity == 0) {
    return Status(StatusCode::kInvalidArgument, "create_compensator needs a communicator and a capacity");
  }
  ECHO_CUDA_CHECK(cudaSetDevice(comm->device));
  auto s = std::make_unique<CompensatorBuffers>();
  s->comm = comm;
  s->device = comm->device;
  s->capacity = capacity;
  const std::size_t padded = align_up(capacity, 64);
  auto allocate = [&]() -> Status {
    ECHO_CUDA_CHECK(cudaMalloc(&s->m1, padded * sizeof(float)));
    ECHO_CUDA_CHECK(cudaMalloc(&s->m2, padded * sizeof(float)));
    ECHO_CUDA_CHECK(cudaMalloc(&s->stash, padded * sizeof(float)));
    ECHO_CUDA_CHECK(cudaMalloc(&s->fresh, sizeof(int)));
    ECHO_CUDA_CHECK(cudaMemset(s->m1, 0, padded * sizeof(float)));
    ECHO_CUDA_CHECK(cudaMemset(s->m2, 0, padded * sizeof(float)));
    const int one = 1;
    ECHO_CUDA_CHECK(cudaMemcpy(s->fresh, &one, sizeof(int), cudaMemcpyHostToDevice));
    return Status::Ok();
  };
  if (const Status made = allocate(); !made.ok()) {
    (void)destroy_compensator(s.release());  // what was allocated before the failure
    return made;
  }
  *state = s.release();
  return Status::Ok();
}

Status reset_compensator(CompensatorBuffers* state, cudaStream_t stream) {
  if (state == nullptr) return Status(StatusCode::kInvalidArgument, "null compensator state");
  Communicator* comm = state->comm;
  ECHO_CUDA_CHECK(cudaSetDevice(comm->device));
  if (comm->update_pending) ECHO_CUDA_CHECK(cudaStreamWaitEvent(stream, comm->update_done, 0));
  comm->update_pending = false;
  const std::size_t bytes = align_up(state->capacity, 64) * sizeof(float);
  // Zero averages and the fresh mark: the next call applies no correction (empty state).
  ECHO_CUDA_CHECK(cudaMemsetAsync(state->m1, 0, bytes, stream));
  ECHO_CUDA_CHECK(cudaMemsetAsync(state->m2, 0, bytes, stream));
  ECHO_CUDA_CHECK(cudaMemsetAsync(state->fresh, 0x01, 1, stream));
  state->count = 0;
  return Status::Ok();
}

Status destroy_compensator(CompensatorBuffers* state) {
  if (state == nullptr) return Status::Ok();
  std::unique_ptr<CompensatorBuffers> owned(state);
  // Its own device, not its communicator's: a state may be destroyed after its communicator.
  ECHO_CUDA_CHECK(cudaSetDevice(state->device));
  ECHO_CUDA_CHECK(cudaDeviceSynchronize());
  ECHO_CUDA_CHECK(cudaFree(state->m1));
  ECHO_CUDA_CHECK(cudaFree(state->m2));
  ECHO_CUDA_CHECK(cudaFree(state->stash));
  ECHO_CUDA_CHECK(cudaFree(state->fresh));
  return Status::Ok();
}

Status check_error_record(const Communicator* comm) {
  const device::ErrorRecord& e = *comm->error;
  if (e.code == 0) return Status::Ok();
  static const char* kStages[] = {"push", "reduce", "gather", "tail", "exact", "scale"};
  const char* stage = e.stage >= 0 && e.stage < 6 ? kStages[e.stage] : "?";
  return Status(StatusCode::kTimeout,
                "rank " + std::to_string(e.rank) + " timed out in stage " + stage + " waiting for peer " +
                    std::to_string(e.peer) + ", tile " + std::to_string(e.tile) + " (flag " +
                    std::to_string(e.seen) + " < " + std::to_string(e.epoch) + ")");
}

}  // namespace echo::cuda
