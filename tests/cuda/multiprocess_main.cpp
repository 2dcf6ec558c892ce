// One process per GPU, as mpirun or a torchrun-style launcher starts them: the NCCL unique id
// travels the usual way (MPI_Bcast when built with MPI, else a file written by rank 0), the
// communicator shares its workspace through CUDA IPC handles, and every rank checks its outputs
// against the CPU reference bit for bit. Exit code 0 when all ranks match.
//   RANK / WORLD_SIZE (torchrun), OMPI_COMM_WORLD_RANK / _SIZE or PMI_RANK / PMI_SIZE (mpirun)
//   echo_cuda_multiprocess <id-file>      (the file is only used without MPI)
#include <cuda_runtime_api.h>
#include <nccl.h>
#ifdef ECHO_HAVE_MPI
#include <mpi.h>
#endif

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "echo/allreduce.h"
#include "echo/cuda/communicator.h"
#include "echo/dtype.h"
#include "test_data.h"

namespace {

int env_int(std::initializer_list<const char*> names, int fallback) {
  for (const char* n : names) {
    if (const char* v = std::getenv(n)) return std::atoi(v);
  }
  return fallback;
}

[[maybe_unused]] bool exchange_id_file(const std::string& path, int rank, ncclUniqueId* id) {
  if (rank == 0) {
    const std::string tmp = path + ".tmp";
    std::ofstream(tmp, std::ios::binary).write(reinterpret_cast<const char*>(id), sizeof(*id));
    return std::rename(tmp.c_str(), path.c_str()) == 0;  // readers never see a partial id
  }
  for (int i = 0; i < 6000; ++i) {
    std::ifstream f(path, std::ios::binary);
    if (f && f.read(reinterpret_cast<char*>(id), sizeof(*id))) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

int fail(int rank, const std::string& what) {
  std::fprintf(stderr, "rank %d: %s\n", rank, what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
#ifdef ECHO_HAVE_MPI
  MPI_Init(&argc, &argv);
#endif
  const int rank = env_int({"OMPI_COMM_WORLD_RANK", "PMI_RANK", "RANK"}, 0);
  const int ranks = env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "WORLD_SIZE"}, 1);
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess) return fail(rank, "cudaGetDeviceCount failed");
  if (gpus < ranks) return fail(rank, "needs one GPU per rank");
  if (cudaSetDevice(rank) != cudaSuccess) return fail(rank, "cudaSetDevice failed");
  ncclUniqueId id;
  if (rank == 0 && ncclGetUniqueId(&id) != ncclSuccess) return fail(rank, "ncclGetUniqueId failed");
#ifdef ECHO_HAVE_MPI
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
#else
  if (argc < 2 || !exchange_id_file(argv[1], rank, &id)) return fail(rank, "no NCCL id file");
#endif
  ncclComm_t nccl;
  if (ncclCommInitRank(&nccl, ranks, id, rank) != ncclSuccess) return fail(rank, "ncclCommInitRank failed");

  // Both transports; a message above the exact-path switch-over and an awkward one below it (the
  // exact path stores into the peers' IPC-mapped staging), for the local residual's default.
  echo::CompensatorSpec local;
  local.residual = echo::ResidualMode::kLocal;
  echo::AllReduceSpec deployed;  // bf16, forward
  deployed.compensator = local;
  const std::size_t below = echo::cuda::default_exact_max_count(ranks, deployed) - 13;
  int failures = 0;
  for (echo::cuda::Transport t : {echo::cuda::Transport::kPeerToPeer, echo::cuda::Transport::kNccl}) {
    for (const std::size_t n : {std::size_t{3000017}, below}) {
      echo::cuda::CommOptions opt;
      opt.transport = t;
      echo::cuda::Communicator* comm = nullptr;
      echo::Status s = echo::cuda::create_from_nccl(nccl, opt, &comm);
      if (!s.ok()) return fail(rank, s.message());
      echo::AllReduceSpec spec;
      spec.compensator = local;
      spec.exact_max_count = echo::cuda::default_exact_max_count(ranks, spec);
      echo::cuda::CompensatorBuffers* state = nullptr;
      s = echo::cuda::create_compensator(comm, n, &state);
      if (!s.ok()) return fail(rank, s.message());
      std::vector<std::vector<float>> in(ranks);
      for (int r = 0; r < ranks; ++r) in[r] = echo::test::make_input(77 + r, n, spec.dtype, 128);
      std::vector<std::uint16_t> bits(n);
      for (std::size_t i = 0; i < n; ++i) bits[i] = echo::float_to_bfloat16_bits(in[rank][i]);
      void* d = nullptr;
      if (cudaMalloc(&d, n * 2) != cudaSuccess) return fail(rank, "cudaMalloc failed");
      if (cudaMemcpy(d, bits.data(), n * 2, cudaMemcpyHostToDevice) != cudaSuccess) return fail(rank, "cudaMemcpy failed");
      cudaStream_t stream;
      if (cudaStreamCreate(&stream) != cudaSuccess) return fail(rank, "cudaStreamCreate failed");
      constexpr int kCalls = 3;  // in place: each call reduces the previous output
      for (int k = 0; k < kCalls && s.ok(); ++k) s = echo::cuda::allreduce(comm, d, d, n, spec, state, stream);
      if (s.ok()) s = echo::cuda::synchronize(comm, nullptr);
      if (!s.ok()) return fail(rank, s.message());
      if (cudaMemcpy(bits.data(), d, n * 2, cudaMemcpyDeviceToHost) != cudaSuccess) return fail(rank, "cudaMemcpy failed");
      // Reference: the same three in-place calls on every rank's data.
      std::vector<echo::CompensatorState> states(ranks);
      std::vector<std::vector<float>> cur = in;
      for (int k = 0; k < kCalls; ++k) {
        std::vector<std::vector<float>> next(ranks, std::vector<float>(n));
        std::vector<const float*> ip(ranks);
        std::vector<float*> op(ranks);
        for (int r = 0; r < ranks; ++r) {
          ip[r] = cur[r].data();
          op[r] = next[r].data();
        }
        const echo::Status ref = echo::allreduce(spec, ranks, n, ip.data(), op.data(), states.data(), nullptr, nullptr);
        if (!ref.ok()) return fail(rank, "reference: " + ref.message());
        cur = next;
      }
      std::size_t bad = 0;
      for (std::size_t i = 0; i < n; ++i) bad += bits[i] != echo::float_to_bfloat16_bits(cur[rank][i]);
      std::printf("rank %d transport %s, %s path: %zu of %zu outputs differ from the reference\n", rank,
                  t == echo::cuda::Transport::kNccl ? "nccl" : "p2p", n <= spec.exact_max_count ? "exact" : "quantized",
                  bad, n);
      failures += bad != 0;
      if (cudaFree(d) != cudaSuccess || cudaStreamDestroy(stream) != cudaSuccess) return fail(rank, "clean-up failed");
      s = echo::cuda::destroy_compensator(state);
      if (s.ok()) s = echo::cuda::destroy(comm);
      if (!s.ok()) return fail(rank, s.message());
    }
  }
  if (ncclCommDestroy(nccl) != ncclSuccess) return fail(rank, "ncclCommDestroy failed");
#ifdef ECHO_HAVE_MPI
  MPI_Finalize();
#endif
  return failures == 0 ? 0 : 1;
}
