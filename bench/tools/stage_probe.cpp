// Times the stages of the owner kernel on one GPU, without peers: the NCCL transport's one-stage
// launches (push, reduce, tail) on local buffers for a simulated rank of P, so each stage's cost
// can be read alone (and profiled with ncu: no launch waits on another GPU). Variants with a split
// form (owner_split_tail: the compensated local residual on 8-element lanes) run its kernels, push
// + reduce and tail, as a call of at least CommOptions::split_tail_min_count elements does.
//   echo_cuda_stage_probe [elements] [ranks] [bits] [compensator] [tiles_per_wave] [transport]
// compensator: off, dual (local residual, fp32 state), dual-bf16, global (global residual, fp32
// state; also times the side-stream update kernel), global-bf16. The state is marked not fresh, so
// the apply step runs as in every call after the first. transport: plain (the default), wide
// (overflow-groups wide, docs/numerics.md 2.4; the random input stays below the fp16 scale limit,
// so this times what the option costs the common path), hadamard (the rotation of 2.6) or
// wide-hadamard (both).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "communicator_impl.h"
#include "compensator_name.h"
#include "echo/bench/device_ops.h"
#include "launch.h"
#include "plan.h"

using namespace echo;
using namespace echo::cuda;

namespace {

// A failed CUDA call or library status ends the probe: its times would mean nothing.
void ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "echo_cuda_stage_probe: %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}
void ok(const Status& s, const char* what) {
  if (s.ok()) return;
  std::fprintf(stderr, "echo_cuda_stage_probe: %s: %s\n", what, s.message().c_str());
  std::exit(1);
}

// A whole decimal number in [lo, hi], or the usage error naming the argument.
long long argument(int argc, char** argv, int i, long long fallback, long long lo, long long hi, const char* name) {
  if (argc <= i) return fallback;
  char* end = nullptr;
  const long long v = std::strtoll(argv[i], &end, 10);
  if (end == argv[i] || *end != '\0' || v < lo || v > hi) {
    std::fprintf(stderr,
                 "echo_cuda_stage_probe: %s must be a whole number in [%lld, %lld], got '%s'\n"
                 "usage: echo_cuda_stage_probe [elements] [ranks] [bits 4|8] [compensator] [tiles_per_wave] "
                 "[transport plain|wide|hadamard|wide-hadamard]\n",
                 name, lo, hi, argv[i]);
    std::exit(2);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const auto n = static_cast<std::size_t>(argument(argc, argv, 1, 1LL << 29, 1, 1LL << 34, "elements"));
  const int P = static_cast<int>(argument(argc, argv, 2, 4, 2, kMaxRanks, "ranks"));
  const int bits = static_cast<int>(argument(argc, argv, 3, 4, 4, 8, "bits"));
  if (bits != 4 && bits != 8) {
    std::fprintf(stderr, "echo_cuda_stage_probe: bits must be 4 or 8, got %d\n", bits);
    return 2;
  }
  const std::string comp_name = argc > 4 ? argv[4] : "off";
  CompensatorSpec cs;
  if (!tools::compensator_from_name(comp_name, &cs)) {
    std::fprintf(stderr, "echo_cuda_stage_probe: unknown compensator '%s' (%s)\n", comp_name.c_str(),
                 tools::kCompensatorNames);
    return 2;
  }
  const std::string transport = argc > 6 ? argv[6] : "plain";
  if (transport != "plain" && transport != "wide" && transport != "hadamard" && transport != "wide-hadamard") {
    std::fprintf(stderr, "echo_cuda_stage_probe: transport must be plain, wide, hadamard or wide-hadamard, got '%s'\n",
                 transport.c_str());
    return 2;
  }
  const Compensation cw = compensation_of(cs.mode, cs.residual);
  const bool comp = cw != Compensation::kOff;
  CommOptions opt;
  opt.tiles_per_wave = static_cast<int>(argument(argc, argv, 5, 0, 0, 1 << 20, "tiles_per_wave"));
  const int dev = 0;
  ok(cudaSetDevice(dev), "cudaSetDevice");
  int devs[1] = {dev};
  Communicator* c1 = nullptr;
  // A one-rank group gives the workspace; the probe then pretends to be rank 0 of P.
  opt.slot_bytes = std::size_t{160} << 20;
  ok(create_group(1, devs, opt, &c1), "create_group");
  Communicator& c = *c1;
  c.ranks = P;
  c.layout = make_layout(opt, P);
  void* ws = nullptr;
  ok(cudaMalloc(&ws, c.layout.total_bytes), "cudaMalloc (workspace)");
  ok(cudaMemset(ws, 0, c.layout.total_bytes), "cudaMemset (workspace)");
  for (int r = 0; r < P; ++r) c.peer_base[r] = static_cast<char*>(ws);
  void *in = nullptr, *out = nullptr;
  ok(cudaMalloc(&in, n * 2), "cudaMalloc (input)");
  ok(cudaMalloc(&out, n * 2), "cudaMalloc (output)");
  ok(bench::fill_random(in, n, DType::kBFloat16, 5, nullptr), "fill_random");
  CompensatorBuffers* st = nullptr;
  if (comp) ok(create_compensator(c1, n, &st), "create_compensator");

  // The call as the communicator would make it (plan and kernel arguments: make_plan, call_args),
  // over the NCCL transport's one-stage launches, with this one-GPU setup's workspace.
  AllReduceSpec spec;
  spec.dtype = DType::kBFloat16;
  spec.quant.bits = bits;
  spec.quant.overflow = transport == "wide" || transport == "wide-hadamard" ? OverflowGroups::kWide
                                                                             : OverflowGroups::kPoison;
  spec.quant.rotation = transport == "hadamard" || transport == "wide-hadamard" ? Rotation::kHadamard
                                                                                 : Rotation::kNone;
  spec.compensator = cs;
  c.workspace = static_cast<char*>(ws);
  c.options.transport = Transport::kNccl;
  c.options.timeout_seconds = 1.0;
  if (comp) ok(cudaMemset(st->fresh, 0, sizeof(int)), "cudaMemset (fresh mark)");
  const Plan plan = make_plan(c, n, spec);
  const Schedule& sched = plan.schedule;
  CallArgs a = call_args(c, plan, n, spec, in, out, st, nullptr);
  a.round_groups = sched.round_groups;
  a.num_tiles = sched.num_tiles;
  const std::size_t gps = plan.groups_per_segment;
  const std::size_t round_groups = std::min(sched.round_groups, gps);
  const int per_sm = owner_allreduce_blocks_per_sm(spec.dtype, bits, spec.quant.group, cw);
  const int grid = sched.grid;
  const int rounds = sched.rounds;
  std::printf("n=%zu P=%d bits=%d comp=%s transport=%s: grid %d blocks (%d/SM resident), tile %d groups, %d tiles, rounds needed %d%s\n",
              n, P, bits, comp_name.c_str(), transport.c_str(), grid, per_sm, a.tile_groups, a.num_tiles, rounds,
              rounds > 1 ? " (each stage runs the first round only: times and rates cover that round)" : "");
  cudaEvent_t e0, e1;
  ok(cudaEventCreate(&e0), "cudaEventCreate");
  ok(cudaEventCreate(&e1), "cudaEventCreate");
  const char* names[3] = {"push", "reduce", "tail"};
  const int stages[3] = {kStagePush, kStageReduce, kStageTail};
  // Elements one launch covers: the first round of every segment.
  const double share = rounds > 1 ? static_cast<double>(round_groups) / static_cast<double>(gps) : 1.0;
  const double elems[3] = {share * static_cast<double>(n) * (P - 1) / P, share * static_cast<double>(n) / P,
                           share * static_cast<double>(n) * (P - 1) / P};
  // The fastest of five launches, in ms.
  auto best_of_five = [&](auto launch) {
    float best = 1e30f;
    for (int rep = 0; rep < 5; ++rep) {
      ok(cudaEventRecord(e0), "cudaEventRecord");
      ok(launch(), "launch");
      ok(cudaEventRecord(e1), "cudaEventRecord");
      ok(cudaEventSynchronize(e1), "kernel");
      float ms = 0;
      ok(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
      best = std::min(best, ms);
    }
    return best;
  };
  for (int k = 0; k < 3; ++k) {
    a.stages = stages[k];
    const float best = best_of_five([&] { return owner_allreduce(a, false, grid, nullptr); });
    std::printf("  stage %-6s %8.1f us  %6.2f G elements/s  (%s)\n", names[k], best * 1e3, elems[k] / best / 1e6,
                cudaGetErrorString(cudaGetLastError()));
  }
  if (cw == Compensation::kGlobal) {
    // The global mode's update over the whole message (it runs on the side stream in a call).
    const int update_grid = std::max(1, c.sm_count * kAuxBlocksPerSm);
    const float best = best_of_five([&] { return compensator_update(a, update_grid, nullptr); });
    std::printf("  update %8.1f us  %6.2f G elements/s  (%s)\n", best * 1e3, static_cast<double>(n) / best / 1e6,
                cudaGetErrorString(cudaGetLastError()));
  }
  // Bandwidth calibration: a device-local copy of the message.
  float ms = 0;
  ok(cudaEventRecord(e0), "cudaEventRecord");
  ok(cudaMemcpyAsync(out, in, n * 2, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync");
  ok(cudaEventRecord(e1), "cudaEventRecord");
  ok(cudaEventSynchronize(e1), "local copy");
  ok(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
  std::printf("  local copy of the message: %.1f us (%.0f GB/s read+write)\n", ms * 1e3, 4.0 * n / ms / 1e6);
  return 0;
}
