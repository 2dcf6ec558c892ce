// The P2P communicator (echo/cuda/communicator.h) for one process per GPU: an NCCL communicator
// made from a unique id that the Python side shares through torch.distributed, the Echo
// communicator on top of it (create_from_nccl), and one compensator state per pass direction.
// Calls take this rank's [n] contribution and enqueue on the caller's stream.
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>

#include <cuda_runtime_api.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nccl.h>

#include "allreduce_binding.h"
#include "arrays.h"
#include "echo/cuda/communicator.h"

namespace echotk {
namespace {

#define ECHOTK_RETURN_IF_ERROR(expr)         \
  do {                                      \
    const echo::Status echotk_st_ = (expr); \
    if (!echotk_st_.ok()) return echotk_st_; \
  } while (0)

constexpr int kCuda = nb::device::cuda::value;

void check_nccl(ncclResult_t result, const char* what) {
  if (result != ncclSuccess) {
    throw std::runtime_error(std::string(what) + " failed: " + ncclGetErrorString(result));
  }
}

echo::cuda::Transport parse_transport(const std::string& name) {
  if (name == "p2p") return echo::cuda::Transport::kPeerToPeer;
  if (name == "nccl") return echo::cuda::Transport::kNccl;
  throw nb::value_error(("transport must be 'p2p' or 'nccl', got '" + name + "'").c_str());
}

// A fresh NCCL unique id (made by rank 0) as bytes.
nb::bytes nccl_unique_id() {
  ncclUniqueId id;
  check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
  return nb::bytes(id.internal, sizeof id.internal);
}

// One rank of an Echo communicator over its own NCCL communicator. Closed explicitly (close()) or
// when the Python object dies; every state is freed before the communicator, NCCL last.
class RankCommunicator {
 public:
  RankCommunicator(nb::bytes id, int world, int rank, int device, const std::string& transport)
      : world_(world), rank_(rank), device_(device), transport_(transport) {
    if (id.size() != sizeof(ncclUniqueId)) {
      throw nb::value_error(("the NCCL unique id has " + std::to_string(id.size()) + " bytes, not " +
                             std::to_string(sizeof(ncclUniqueId)))
                                .c_str());
    }
    if (world < 1 || world > 8) {
      throw nb::value_error(("the world size must lie in [1, 8], got " + std::to_string(world)).c_str());
    }
    if (rank < 0 || rank >= world) {
      throw nb::value_error(("rank " + std::to_string(rank) + " is outside the world of " +
                             std::to_string(world))
                                .c_str());
    }
    echo::cuda::CommOptions options;
    options.transport = parse_transport(transport);
    ncclUniqueId unique;
    std::memcpy(unique.internal, id.c_str(), sizeof unique.internal);
    echo::Status status;
    {
      // Both wait for the other ranks: the GIL must not be held meanwhile.
      nb::gil_scoped_release release;
      cudaError_t err = cudaSetDevice(device);
      if (err != cudaSuccess) {
        (void)cudaGetLastError();
        status = echo::Status(echo::StatusCode::kDeviceError,
                              "cudaSetDevice(" + std::to_string(device) + ") failed: " + cudaGetErrorString(err));
      } else {
        const ncclResult_t made = ncclCommInitRank(&nccl_, world, unique, rank);
        if (made != ncclSuccess) {
          nccl_ = nullptr;
          status = echo::Status(echo::StatusCode::kDeviceError,
                                std::string("ncclCommInitRank failed: ") + ncclGetErrorString(made));
        } else {
          status = echo::cuda::create_from_nccl(nccl_, options, &comm_);
        }
      }
    }
    if (!status.ok()) {
      comm_ = nullptr;
      close_quietly();
      raise_if_error(status);
    }
  }

  ~RankCommunicator() { close_quietly(); }
  RankCommunicator(const RankCommunicator&) = delete;
  RankCommunicator& operator=(const RankCommunicator&) = delete;

  // out [n] = the all-reduce of every rank's x [n] (spec.dtype, on this rank's GPU), enqueued on
  // `stream`. direction_index: 0 forward, 1 backward (each its own state); fresh: reset it first.
  void allreduce(const SpecHandle& h, const std::string& direction, AnyArray x, AnyArray out, bool fresh,
                 std::uintptr_t stream_handle) {
    require_open();
    echo::AllReduceSpec spec = h.spec;
    spec.direction = parse_direction(direction);
    if (h.ranks != world_) {
      throw nb::value_error(("the spec is for " + std::to_string(h.ranks) + " ranks but the world has " +
                             std::to_string(world_))
                                .c_str());
    }
    check_values(x, "x", spec.dtype, {-1}, kCuda);
    const auto n = static_cast<std::size_t>(x.shape(0));
    if (n == 0) throw nb::value_error("x has no elements; n must be >= 1");
    check_values(out, "out", spec.dtype, {static_cast<std::int64_t>(n)}, kCuda);
    for (const auto& [name, a] : {std::pair<const char*, const AnyArray*>{"x", &x}, {"out", &out}}) {
      if (a->device_id() != device_) {
        throw nb::value_error((std::string(name) + " is on cuda:" + std::to_string(a->device_id()) +
                               " but this rank's communicator is on cuda:" + std::to_string(device_))
                                  .c_str());
      }
    }
    const bool compensate = spec.compensator.mode != echo::CompensatorMode::kOff;
    const int which = spec.direction == echo::Direction::kBackward ? 1 : 0;
    const auto stream = reinterpret_cast<cudaStream_t>(stream_handle);
    echo::Status status;
    {
      nb::gil_scoped_release release;
      status = enqueue(spec, compensate, which, x.data(), out.data(), n, fresh, stream);
    }
    raise_if_error(status);
  }

  // (poisoned groups of this rank's segment, scale exponent, exact path) of the last call; waits
  // for this GPU (echo::cuda::synchronize).
  std::tuple<std::uint64_t, int, bool> report() {
    require_open();
    echo::AllReduceReport r;
    echo::Status status;
    {
      nb::gil_scoped_release release;
      status = echo::cuda::synchronize(comm_, &r);
    }
    raise_if_error(status);
    return {r.poisoned_groups, r.scale_exponent, r.exact_path};
  }

  // Frees the states, the communicator and the NCCL communicator (waits for this GPU); idempotent.
  void close() {
    if (closed_) return;
    echo::Status status;
    {
      nb::gil_scoped_release release;
      status = release_all();
    }
    raise_if_error(status);
  }

  bool closed() const { return closed_; }
  int world() const { return world_; }
  int rank() const { return rank_; }
  int device() const { return device_; }
  const std::string& transport() const { return transport_; }

 private:
  echo::Status enqueue(const echo::AllReduceSpec& spec, bool compensate, int which, const void* in, void* out,
                       std::size_t n, bool fresh, cudaStream_t stream) {
    echo::cuda::CompensatorBuffers*& state = states_[which];
    if (cudaSetDevice(device_) != cudaSuccess) {
      (void)cudaGetLastError();
      return echo::Status(echo::StatusCode::kDeviceError, "cudaSetDevice failed");
    }
    if (compensate && fresh) {
      // A pass's first call: a state large enough (made outside any capture: it allocates), reset
      // on the stream.
      if (state == nullptr || capacities_[which] < n) {
        if (state != nullptr) ECHOTK_RETURN_IF_ERROR(echo::cuda::destroy_compensator(state));
        state = nullptr;
        capacities_[which] = 0;
        ECHOTK_RETURN_IF_ERROR(echo::cuda::create_compensator(comm_, n, &state));
        capacities_[which] = n;
      }
      ECHOTK_RETURN_IF_ERROR(echo::cuda::reset_compensator(state, stream));
    }
    if (compensate && state == nullptr) {
      return echo::Status(echo::StatusCode::kInvalidArgument, "the compensator state was never reset");
    }
    ECHOTK_RETURN_IF_ERROR(echo::cuda::allreduce(comm_, in, out, n, spec, compensate ? state : nullptr, stream));
    // The global residual's state update reads `out` on a side stream after the call; torch may hand
    // `out` to other work (or the caller write it) on this stream, so the stream waits for it here.
    return echo::cuda::join(comm_, stream);
  }

  echo::Status release_all() {
    echo::Status first;
    auto keep = [&](const echo::Status& s) {
      if (first.ok() && !s.ok()) first = s;
    };
    for (auto*& state : states_) {
      if (state != nullptr) keep(echo::cuda::destroy_compensator(state));
      state = nullptr;
    }
    if (comm_ != nullptr) keep(echo::cuda::destroy(comm_));
    comm_ = nullptr;
    if (nccl_ != nullptr) {
      const ncclResult_t r = ncclCommDestroy(nccl_);
      if (r != ncclSuccess) {
        keep(echo::Status(echo::StatusCode::kDeviceError, std::string("ncclCommDestroy failed: ") +
                                                              ncclGetErrorString(r)));
      }
    }
    nccl_ = nullptr;
    closed_ = true;
    return first;
  }

  void close_quietly() noexcept {
    if (closed_) return;
    (void)release_all();
  }

  void require_open() const {
    if (closed_) throw std::runtime_error("the communicator is closed");
  }

  int world_;
  int rank_;
  int device_;
  std::string transport_;
  ncclComm_t nccl_ = nullptr;
  echo::cuda::Communicator* comm_ = nullptr;
  echo::cuda::CompensatorBuffers* states_[2] = {nullptr, nullptr};  // forward, backward
  std::size_t capacities_[2] = {0, 0};
  bool closed_ = false;
};

// What the communicator refuses of a spec at a world size (bits other than 4 and 8, the ring
// algorithm, a spec validate() refuses), before any GPU work: ValueError or RuntimeError.
void comm_can_implement(const SpecHandle& h) { raise_if_error(echo::cuda::can_implement(h.spec, h.ranks)); }

}  // namespace

void register_communicator(nb::module_& m) {
  m.def("nccl_unique_id", &nccl_unique_id, "A new NCCL unique id (bytes), made by rank 0 and shared.");
  m.def("comm_can_implement", &comm_can_implement, nb::arg("spec"),
        "Raises unless the P2P communicator implements the spec at its rank count (4 or 8 bits, owner).");
  int version = 0;
  (void)ncclGetVersion(&version);
  m.attr("NCCL_VERSION") = version;
  nb::class_<RankCommunicator>(m, "RankCommunicator",
                               "This process's rank of an Echo communicator over its own NCCL communicator")
      .def(nb::init<nb::bytes, int, int, int, const std::string&>(), nb::arg("nccl_id"), nb::arg("world"),
           nb::arg("rank"), nb::arg("device"), nb::arg("transport"),
           "ncclCommInitRank + echo::cuda::create_from_nccl on `device`; waits for every rank.")
      .def("allreduce", &RankCommunicator::allreduce, nb::arg("spec"), nb::arg("direction"), nb::arg("x"),
           nb::arg("out"), nb::arg("fresh"), nb::arg("stream"),
           "echo::cuda::allreduce of this rank's x [n] into out [n] on `stream`; fresh resets the "
           "direction's state first.")
      .def("report", &RankCommunicator::report,
           "(poisoned groups of this rank's segment, scale exponent, exact path) of the last call; waits.")
      .def("close", &RankCommunicator::close)
      .def_prop_ro("closed", &RankCommunicator::closed)
      .def_prop_ro("world", &RankCommunicator::world)
      .def_prop_ro("rank", &RankCommunicator::rank)
      .def_prop_ro("device", &RankCommunicator::device)
      .def_prop_ro("transport", &RankCommunicator::transport);
}

}  // namespace echotk
