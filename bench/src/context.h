// What a benchmark run holds on its GPUs: per rank a stream, input and output buffers, the
// overlapped matmul, an NCCL communicator, Echo communicators of both transports and a compensator
// state; on the first GPU the buffers of the verification. Everything is released when the
// Context goes out of scope, also after an error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cuda_resources.h"
#include "echo/bench/harness.h"
#include "echo/bench/matmul.h"
#include "echo/cuda/communicator.h"

namespace echo::bench {

struct NcclCommDeleter {
  void operator()(ncclComm* comm) const;
};
struct CommunicatorDeleter {
  void operator()(cuda::Communicator* comm) const { (void)cuda::destroy(comm); }
};
struct CompensatorDeleter {
  void operator()(cuda::CompensatorBuffers* state) const { (void)cuda::destroy_compensator(state); }
};

// One rank's resources; members are released in reverse order (the state before its
// communicator, the stream last).
struct RankResources {
  int device = 0;
  Stream stream;
  DeviceBuffer in, out;
  std::unique_ptr<Matmul> matmul;
  std::unique_ptr<ncclComm, NcclCommDeleter> nccl;
  std::unique_ptr<cuda::Communicator, CommunicatorDeleter> p2p, ncclt;
  std::unique_ptr<cuda::CompensatorBuffers, CompensatorDeleter> state;
};

struct Context {
  Options opt;
  int P = 0;
  std::vector<int> devs;
  // On devs[0], for the #differ and error columns.
  DeviceBuffer ref;         // fp64 exact sum
  DeviceBuffer scratch;     // a peer's input or output
  DeviceBuffer sums;        // two doubles
  DeviceBuffer mismatches;  // one counter
  // Every rank's input as bf16 bits, for the #wrong column (sizes up to kReferenceMaxCount), and
  // the reference's results on them so far, by call (rows of one call share one computation).
  std::vector<std::vector<std::uint16_t>> host_inputs;
  std::map<std::string, std::vector<std::uint16_t>> expected;
  std::vector<RankResources> ranks;

  cudaStream_t stream(int r) const { return ranks[r].stream.get(); }
  cuda::Communicator* comm(int r, cuda::Transport t) const {
    return t == cuda::Transport::kNccl ? ranks[r].ncclt.get() : ranks[r].p2p.get();
  }
};

// Allocates everything for messages of up to opt.max_bytes on devices 0 .. P - 1.
Status open_context(const Options& opt, int P, Context* c);

// Runs body(r) on one host thread per rank and returns the first failure in rank order (a failing
// rank's peers time out in the library and fail too).
Status on_every_rank(int ranks, const std::function<Status(int)>& body);

// Every rank's GPU made current and idle.
Status synchronize_all(const Context& c, const char* what);

}  // namespace echo::bench
