// One process per GPU: with the peer-to-peer transport the rank's workspace is shared with its
// peers through CUDA IPC handles, exchanged with one ncclAllGather over the caller's NCCL
// communicator (the NCCL transport shares no memory) (launched by mpirun or a
// torchrun-style launcher; the NCCL unique id reaches the processes the usual way, see
// tests/cuda/multiprocess_main.cpp).
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "check.h"
#include "communicator_impl.h"

namespace echo::cuda {

namespace {

// Device memory and the stream the exchange uses, freed whether it succeeds or not.
struct ExchangeTemporaries {
  void* d_all = nullptr;
  void* d_one = nullptr;
  cudaStream_t stream = nullptr;
  ~ExchangeTemporaries() {
    if (d_all != nullptr) (void)cudaFree(d_all);
    if (d_one != nullptr) (void)cudaFree(d_one);
    if (stream != nullptr) (void)cudaStreamDestroy(stream);
  }
};

// This rank's workspace, the exchange of every rank's IPC handle and device, and the peers'
// workspaces opened; on an error the caller destroys `c` (which closes what was opened).
Status connect(Communicator* c, ncclComm_t nccl, const CommOptions& options, int ranks, int rank, int device) {
  ExchangeTemporaries t;
  c->rank = rank;
  c->ranks = ranks;
  c->device = device;
  c->options = options;
  c->nccl = nccl;
  ECHO_TRY(init_local(c));

  // Exchange: every rank's IPC handle and device id.
  struct Entry {
    cudaIpcMemHandle_t handle;
    int device;
    int pad[15];
  };
  Entry mine{};
  ECHO_CUDA_CHECK(cudaIpcGetMemHandle(&mine.handle, c->workspace));
  mine.device = device;
  ECHO_CUDA_CHECK(cudaMalloc(&t.d_all, sizeof(Entry) * (ranks + 1)));
  Entry* d_all = static_cast<Entry*>(t.d_all);
  Entry* d_mine = d_all + ranks;
  ECHO_CUDA_CHECK(cudaMemcpy(d_mine, &mine, sizeof(Entry), cudaMemcpyHostToDevice));
  ECHO_CUDA_CHECK(cudaStreamCreateWithFlags(&t.stream, cudaStreamNonBlocking));
  const cudaStream_t s = t.stream;
  ECHO_NCCL_CHECK(ncclAllGather(d_mine, d_all, sizeof(Entry), ncclUint8, nccl, s));
  ECHO_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<Entry> all(ranks);
  ECHO_CUDA_CHECK(cudaMemcpy(all.data(), d_all, sizeof(Entry) * ranks, cudaMemcpyDeviceToHost));
  ECHO_CUDA_CHECK(cudaFree(t.d_all));
  t.d_all = nullptr;
  c->ranks_on_device = 0;
  for (int r = 0; r < ranks; ++r) {
    if (all[r].device == device) ++c->ranks_on_device;
    int same = 0;
    for (int q = 0; q < ranks; ++q) same += all[q].device == all[r].device;
    c->max_ranks_on_device = std::max(c->max_ranks_on_device, same);
  }
  // The NCCL transport moves every byte between ranks through NCCL, so it opens no peer memory:
  // it also serves ranks that cannot map each other's memory (other nodes).
  for (int r = 0; r < ranks && options.transport == Transport::kPeerToPeer; ++r) {
    if (r == rank) continue;
    void* p = nullptr;
    ECHO_CUDA_CHECK(cudaIpcOpenMemHandle(&p, all[r].handle, cudaIpcMemLazyEnablePeerAccess));
    c->peer_base[r] = static_cast<char*>(p);
    c->peer_ipc[r] = true;
  }
  // Every rank has zeroed its workspace (init_local synchronizes) before anyone writes into a peer:
  // one more collective acts as the barrier.
  ECHO_CUDA_CHECK(cudaMalloc(&t.d_one, sizeof(int)));
  int* d_one = static_cast<int*>(t.d_one);
  ECHO_NCCL_CHECK(ncclAllReduce(d_one, d_one, 1, ncclInt32, ncclSum, nccl, s));
  ECHO_CUDA_CHECK(cudaStreamSynchronize(s));
  return Status::Ok();
}

}  // namespace

Status create_from_nccl(ncclComm_t nccl, const CommOptions& options, Communicator** comm) {
  if (nccl == nullptr || comm == nullptr) {
    return Status(StatusCode::kInvalidArgument, "create_from_nccl needs an NCCL communicator");
  }
  ECHO_TRY(validate_options(options));
  auto c = std::make_unique<Communicator>();
  int ranks = 0, rank = 0, device = 0;
  ECHO_NCCL_CHECK(ncclCommCount(nccl, &ranks));
  ECHO_NCCL_CHECK(ncclCommUserRank(nccl, &rank));
  ECHO_NCCL_CHECK(ncclCommCuDevice(nccl, &device));
  if (ranks > kMaxRanks) {
    return Status(StatusCode::kInvalidArgument, "at most 8 ranks, the NCCL communicator has " +
                                                    std::to_string(ranks));
  }
  if (const Status st = connect(c.get(), nccl, options, ranks, rank, device); !st.ok()) {
    (void)destroy(c.release());  // the workspace, pinned memory, streams and opened peers made so far
    return st;
  }
  *comm = c.release();
  return Status::Ok();
}

}  // namespace echo::cuda
