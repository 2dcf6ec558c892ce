// Host side of the communicator: workspace layout, creation for both process models, the per-call
// launch sequence and the schedule cache.
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

Schedule plan_schedule(const ScheduleInputs& in) {
  Schedule s{};
  const std::size_t gb = in.group_bytes;
  const std::size_t pb = in.param_bytes;
  const int groups_per_iter = (32 / (in.group / in.lane_elements)) * kWarpsPerBlock;
  // Slot capacity in whole block iterations, leaving room to align the parameter region.
  std::size_t cap = (in.slot_bytes - 256) / (gb + pb);
  cap = std::max<std::size_t>(cap / groups_per_iter * groups_per_iter, groups_per_iter);
  const std::size_t gps = in.groups_per_segment;
  s.rounds = static_cast<int>(std::max<std::size_t>(1, (gps + cap - 1) / cap));
  s.round_groups = align_up((gps + s.rounds - 1) / s.rounds, groups_per_iter);
  s.codes_bytes = align_up(cap * gb, 256);
  // Tiles and lag must be the same on every rank (flags are indexed by tile): derive them from
  // the group's most shared GPU; only the grid follows this rank's own GPU.
  const int resident_tiling = std::max(1, in.sm_count * in.blocks_per_sm / in.max_ranks_on_device);
  const int resident = std::max(1, in.sm_count * in.blocks_per_sm / in.ranks_on_device);
  const int jobs_per_step = 2 * in.ranks - 1;
  const int per_wave = std::max(1, resident_tiling / jobs_per_step);
  std::size_t tg;
  if (in.tiles_per_wave > 0) {
    const std::size_t target_tiles = static_cast<std::size_t>(per_wave) * in.tiles_per_wave;
    tg = align_up(std::max<std::size_t>(1, (s.round_groups + target_tiles - 1) / target_tiles), groups_per_iter);
  } else {
    // About default_tiles_per_sqrt_iteration(bits) * sqrt(iterations) tiles, each of a whole
    // number of block iterations (rounded to the nearest, at least one).
    const double factor =
        in.tiles_per_sqrt_iteration > 0.0 ? in.tiles_per_sqrt_iteration : default_tiles_per_sqrt_iteration(in.bits);
    const double iterations = static_cast<double>(s.round_groups / groups_per_iter);
    const double per_tile = iterations / (factor * std::sqrt(iterations));
    const std::size_t its = std::max<std::size_t>(1, static_cast<std::size_t>(std::llround(per_tile)));
    tg = its * static_cast<std::size_t>(groups_per_iter);
  }
  while ((s.round_groups + tg - 1) / tg > static_cast<std::size_t>(kMaxTilesPerRound)) tg += groups_per_iter;
  s.tile_groups = static_cast<int>(tg);
  s.num_tiles = static_cast<int>((s.round_groups + tg - 1) / tg);
  const auto waves = [&](int w) {
    return std::max(1, std::min(per_wave * (w > 0 ? w : kDefaultLagWaves), s.num_tiles));
  };
  s.lag = waves(in.reduce_lag_waves);
  s.tail_lag = waves(in.tail_lag_waves);
  const long long jobs = static_cast<long long>(s.num_tiles + s.lag + s.tail_lag) * jobs_per_step;
  s.grid = static_cast<int>(std::min<long long>(resident, jobs));
  return s;
}

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
  ECHO_RETURN_IF_ERROR(can_implement(spec, ranks));
  return validate_options(options);
}

namespace {

Status validate_call(const Communicator* comm, std::size_t count, const AllReduceSpec& spec,
                     const CompensatorBuffers* state) {
  ECHO_RETURN_IF_ERROR(can_implement(spec, comm->ranks));
  if (count == 0) return Status(StatusCode::kInvalidArgument, "element count must be >= 1");
  if (spec.compensator.mode != CompensatorMode::kOff) {
    if (state == nullptr) {
      return Status(StatusCode::kInvalidArgument, "the compensator needs a state");
    }
    if (state->comm != comm) {
      return Status(StatusCode::kInvalidArgument, "compensator state belongs to another communicator");
    }
    if (count > state->capacity) {
      return Status(StatusCode::kInvalidArgument,
                    "message of " + std::to_string(count) + " elements exceeds the state capacity " +
                        std::to_string(state->capacity));
    }
    if (state->count != 0 && state->state_dtype != spec.compensator.state_dtype) {
      return Status(StatusCode::kInvalidArgument,
                    std::string("compensator state of rank ") + std::to_string(comm->rank) + " holds " +
                        dtype_name(state->state_dtype) + " averages but the call asks for " +
                        dtype_name(spec.compensator.state_dtype) + " (reset the state to change its type)");
    }
    if (state->count != 0 && state->count != count) {
      return Status(StatusCode::kInvalidArgument,
                    "compensator state of rank " + std::to_string(comm->rank) + " holds " +
                        std::to_string(state->count) + " elements but the message has " +
                        std::to_string(count) + " (reset the state between passes of different size)");
    }
  }
  return Status::Ok();
}

const Schedule& schedule_for(Communicator* comm, const AllReduceSpec& spec, std::size_t gps) {
  const Compensation comp = compensation_of(spec.compensator.mode, spec.compensator.residual);
  const ScheduleKey key{static_cast<int>(spec.dtype), spec.quant.bits, static_cast<int>(spec.quant.kind),
                        spec.quant.group, gps, static_cast<int>(comp)};
  auto it = comm->schedules.find(key);
  if (it != comm->schedules.end()) return it->second;
  ScheduleInputs in{};
  in.slot_bytes = comm->layout.slot_bytes;
  in.groups_per_segment = gps;
  in.group_bytes = static_cast<std::size_t>(spec.quant.group) * spec.quant.bits / 8;
  in.param_bytes = spec.quant.param_bytes();
  in.group = spec.quant.group;
  in.bits = spec.quant.bits;
  in.lane_elements = lane_elements(spec.quant.bits, spec.quant.group, comp);
  in.blocks_per_sm = owner_allreduce_blocks_per_sm(spec.dtype, spec.quant.bits, spec.quant.group, comp);
  in.sm_count = comm->sm_count;
  in.ranks = comm->ranks;
  in.ranks_on_device = comm->ranks_on_device;
  in.max_ranks_on_device = comm->max_ranks_on_device;
  in.tiles_per_wave = comm->options.tiles_per_wave;
  in.tiles_per_sqrt_iteration = comm->options.tiles_per_sqrt_iteration;
  in.reduce_lag_waves = comm->options.reduce_lag_waves;
  in.tail_lag_waves = comm->options.tail_lag_waves;
  return comm->schedules.emplace(key, plan_schedule(in)).first->second;
}

}  // namespace

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
    ECHO_RETURN_IF_ERROR(init_local(c));
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
  ECHO_RETURN_IF_ERROR(validate_options(options));
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

Status nccl_allreduce(Communicator* comm, const CallArgs& base, const Schedule& sched,
                      cudaStream_t stream);
Status nccl_exact_exchange(Communicator* comm, std::size_t exact_count, bool terms_16bit, cudaStream_t stream);

Status allreduce(Communicator* comm, const void* in, void* out, std::size_t count,
                 const AllReduceSpec& spec, CompensatorBuffers* state, cudaStream_t stream,
                 float* compensated) {
  if (comm == nullptr || in == nullptr || out == nullptr) {
    return Status(StatusCode::kInvalidArgument, "allreduce needs a communicator, input and output");
  }
  ECHO_RETURN_IF_ERROR(validate_call(comm, count, spec, state));
  if (compensated != nullptr && (reinterpret_cast<std::uintptr_t>(compensated) & 15u) != 0) {
    // x' is stored in 16-byte words; a misaligned store would fault the context.
    return Status(StatusCode::kInvalidArgument, "the compensated output must be 16-byte aligned");
  }
  // A timed-out peer wait leaves the flags of the group inconsistent: refuse further calls.
  ECHO_RETURN_IF_ERROR(check_error_record(comm));
  ECHO_CUDA_CHECK(cudaSetDevice(comm->device));

  const Segmentation seg(count, spec.quant.group, comm->ranks);
  CallArgs a{};
  a.job_trace = comm->job_trace;
  a.job_trace_records = comm->job_trace_records;
  a.rank = comm->rank;
  a.ranks = comm->ranks;
  a.dtype = spec.dtype;
  a.bits = spec.quant.bits;
  a.group = spec.quant.group;
  a.kind = spec.quant.kind;
  a.count = count;
  a.in = in;
  a.out = out;
  a.compensated = compensated;
  a.backward = spec.direction == Direction::kBackward;
  a.groups_per_segment = seg.groups_per_segment;
  a.num_groups = seg.num_groups;
  a.layout = comm->layout;
  for (int r = 0; r < comm->ranks; ++r) a.peer_base[r] = comm->peer_base[r];
  a.control = comm->control();
  a.wait.rank = comm->rank;
  a.wait.timeout_ns = static_cast<unsigned long long>(comm->options.timeout_seconds * 1e9);
  a.wait.error = comm->error;
  a.wait.abort = &a.control->abort;
  const CompensatorSpec& cs = spec.compensator;
  set_compensator_args(cs, &a.comp);
  const bool compensate = cs.mode != CompensatorMode::kOff;
  if (compensate) {
    a.comp.m1 = state->m1;
    a.comp.m2 = state->m2;
    a.comp.fresh = state->fresh;
    a.comp.stash = state->stash;
  }

  // The previous call's update (side stream) must finish before this call reads the state.
  if (comm->update_pending) {
    ECHO_CUDA_CHECK(cudaStreamWaitEvent(stream, comm->update_done, 0));
    comm->update_pending = false;
  }

  const bool exact = count <= spec.exact_max_count;
  // The NCCL transport shares no memory between ranks: the backward scale words and the exact
  // path's lines travel through NCCL as well.
  a.nccl = comm->options.transport == Transport::kNccl;
  if (a.nccl && comm->nccl == nullptr) {
    return Status(StatusCode::kUnsupported,
                  "the NCCL transport needs an NCCL communicator (create_from_nccl, or create_group "
                  "with one GPU per rank)");
  }
  const int resident_exact = std::max(1, comm->sm_count * comm->exact_blocks_per_sm / comm->ranks_on_device);
  if (a.backward) {
    const int grid = static_cast<int>(std::min<std::size_t>(
        std::max(1, comm->sm_count / comm->ranks_on_device), (count + 4095) / 4096));
    ECHO_CUDA_CHECK(backward_max(a, std::max(grid, 1), stream));
    if (a.nccl) {
      auto* words = reinterpret_cast<unsigned long long*>(comm->workspace + comm->layout.scale_words_offset);
      ECHO_NCCL_CHECK(ncclAllGather(words + comm->rank, words, 1, ncclUint64, comm->nccl, stream));
    }
  }
  if (exact) {
    const std::size_t cap = comm->layout.exact_capacity;
    const int rounds = static_cast<int>((count + cap - 1) / cap);
    for (int r = 0; r < rounds; ++r) {
      a.exact_begin = static_cast<std::size_t>(r) * cap;
      a.exact_count = std::min(cap, count - a.exact_begin);
      const int chunks = static_cast<int>((a.exact_count + kExactChunk - 1) / kExactChunk);
      const int grid = std::min(chunks, resident_exact);
      if (!a.nccl) {
        a.round = r;
        a.stages = kStagePush | kStageReduce;
        ECHO_CUDA_CHECK(exact_allreduce(a, r + 1 == rounds, grid, stream));
        continue;
      }
      // NCCL: send launch into the own slot, the slot to every peer, reduce launch.
      a.round = 2 * r;
      a.stages = kStagePush;
      ECHO_CUDA_CHECK(exact_allreduce(a, false, grid, stream));
      ECHO_RETURN_IF_ERROR(
          nccl_exact_exchange(comm, a.exact_count, exact_terms_16bit(a.dtype, a.backward, compensate), stream));
      a.round = 2 * r + 1;
      a.stages = kStageReduce;
      ECHO_CUDA_CHECK(exact_allreduce(a, r + 1 == rounds, grid, stream));
    }
  } else {
    const Schedule& sched = schedule_for(comm, spec, seg.groups_per_segment);
    a.codes_bytes = sched.codes_bytes;
    a.tile_groups = sched.tile_groups;
    a.lag = sched.lag;
    a.tail_lag = sched.tail_lag;
    if (comm->options.transport == Transport::kNccl) {
      ECHO_RETURN_IF_ERROR(nccl_allreduce(comm, a, sched, stream));
    } else {
      // One launch per round, or two where the call shape runs its tail in a kernel of its own
      // (push + reduce, then the tail, which waits for the gather flags of the launch before).
      const bool split = owner_allreduce_splits_tail(spec.quant.bits, spec.quant.group,
                                                     compensation_of(cs.mode, cs.residual), count,
                                                     comm->options.split_tail_min_count);
      const int launches = split ? 2 : 1;
      for (int r = 0; r < sched.rounds; ++r) {
        a.round_group_begin = static_cast<std::size_t>(r) * sched.round_groups;
        a.round_groups = sched.round_groups;
        a.num_tiles = sched.num_tiles;
        const bool last = r + 1 == sched.rounds;
        a.round = launches * r;
        a.stages = split ? kStagePush | kStageReduce : kStagePush | kStageReduce | kStageTail;
        a.gather_launch_back = 0;
        ECHO_CUDA_CHECK(owner_allreduce(a, last && !split, sched.grid, stream));
        if (split) {
          a.round += 1;
          a.stages = kStageTail;
          a.gather_launch_back = 1;
          ECHO_CUDA_CHECK(owner_allreduce(a, last, sched.grid, stream));
        }
      }
    }
    if (compensate && cs.residual == ResidualMode::kGlobal) {
      // Update beside the caller's next kernel: fork to the side stream, join at the next call.
      ECHO_CUDA_CHECK(cudaEventRecord(comm->entry_done, stream));
      ECHO_CUDA_CHECK(cudaStreamWaitEvent(comm->side, comm->entry_done, 0));
      const int grid = std::max(1, comm->sm_count * kAuxBlocksPerSm / comm->ranks_on_device);
      ECHO_CUDA_CHECK(compensator_update(a, grid, comm->side));
      ECHO_CUDA_CHECK(cudaMemsetAsync(state->fresh, 0, sizeof(int), comm->side));
      ECHO_CUDA_CHECK(cudaEventRecord(comm->update_done, comm->side));
      comm->update_pending = true;
    }
  }
  if (compensate) {
    state->count = count;
    state->state_dtype = cs.state_dtype;
  }
  return Status::Ok();
}

Status join(Communicator* comm, cudaStream_t stream) {
  if (comm == nullptr) return Status(StatusCode::kInvalidArgument, "null communicator");
  ECHO_CUDA_CHECK(cudaSetDevice(comm->device));
  if (comm->update_pending) {
    ECHO_CUDA_CHECK(cudaStreamWaitEvent(stream, comm->update_done, 0));
    comm->update_pending = false;
  }
  return Status::Ok();
}

Status synchronize(Communicator* comm, AllReduceReport* report) {
  if (comm == nullptr) return Status(StatusCode::kInvalidArgument, "null communicator");
  ECHO_CUDA_CHECK(cudaSetDevice(comm->device));
  ECHO_CUDA_CHECK(cudaDeviceSynchronize());
  comm->update_pending = false;
  ECHO_RETURN_IF_ERROR(check_error_record(comm));
  if (report != nullptr) {
    Control c{};
    ECHO_CUDA_CHECK(cudaMemcpy(&c, comm->control(), sizeof(Control), cudaMemcpyDeviceToHost));
    report->poisoned_groups = c.report_poisoned;
    report->scale_exponent = c.scale_exponent;
    report->exact_path = c.exact_path != 0;
  }
  return Status::Ok();
}

}  // namespace echo::cuda
