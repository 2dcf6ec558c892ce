// The device API beyond the host-array path: in-place and out-of-place calls on offset-shifted
// buffers, messages split into several rounds, the lean loops of aligned calls, CUDA graph capture and replay, 10,000 calls of
// changing sizes without a host sync, a peer that never arrives (timeout instead of a hang), the
// NCCL transport bit-identical to the peer-to-peer path, and one host thread per GPU.
#include <boost/test/unit_test.hpp>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <thread>

#include "device_group.h"
#include "test_data.h"
#include "work_queues_fixture.h"

namespace {

using namespace echo;
using test::DeviceGroup;

AllReduceSpec spec_of(DType dt, CompensatorMode mode, ResidualMode res) {
  AllReduceSpec s;
  s.dtype = dt;
  s.compensator.mode = mode;
  s.compensator.residual = res;
  return s;
}

// Reference outputs for `calls` consecutive calls of the same inputs (the state evolves).
std::vector<std::vector<float>> reference_after(const AllReduceSpec& spec, int p, std::size_t n,
                                                const std::vector<std::vector<float>>& in, int calls) {
  std::vector<CompensatorState> states(p);
  std::vector<std::vector<float>> out(p, std::vector<float>(n));
  std::vector<const float*> ip(p);
  std::vector<float*> op(p);
  for (int r = 0; r < p; ++r) {
    ip[r] = in[r].data();
    op[r] = out[r].data();
  }
  for (int k = 0; k < calls; ++k) {
    const Status s = echo::allreduce(spec, p, n, ip.data(), op.data(),
                                     spec.compensator.mode == CompensatorMode::kOff ? nullptr : states.data(),
                                     nullptr, nullptr);
    BOOST_REQUIRE(s.ok());
  }
  return out;
}

// One call per rank on device buffers at element offset `shift`, in place or not.
void run_shifted(DeviceGroup& g, const AllReduceSpec& spec, std::size_t n, std::size_t shift, bool in_place,
                 const std::vector<std::vector<float>>& in, std::vector<std::vector<float>>* out) {
  const std::size_t es = dtype_size(spec.dtype);
  std::vector<void*> bufs(g.ranks), outs(g.ranks);
  for (int r = 0; r < g.ranks; ++r) {
    TEST_CUDA(cudaSetDevice(g.devices[r]));
    TEST_CUDA(cudaMalloc(&bufs[r], (n + shift) * es));
    TEST_CUDA(cudaMalloc(&outs[r], (n + shift + 3) * es));
    const auto bits = test::to_bits(in[r], spec.dtype);
    TEST_CUDA(cudaMemcpy(static_cast<char*>(bufs[r]) + shift * es, bits.data(), bits.size(), cudaMemcpyHostToDevice));
  }
  for (int r = 0; r < g.ranks; ++r) {
    char* src = static_cast<char*>(bufs[r]) + shift * es;
    char* dst = in_place ? src : static_cast<char*>(outs[r]) + (shift + 3) * es;
    TEST_OK(cuda::allreduce(g.comms[r], src, dst, n, spec, g.states[r], g.streams[r]));
  }
  g.sync();
  out->assign(g.ranks, {});
  for (int r = 0; r < g.ranks; ++r) {
    std::vector<unsigned char> bits(n * es);
    const char* dst = in_place ? static_cast<char*>(bufs[r]) + shift * es : static_cast<char*>(outs[r]) + (shift + 3) * es;
    TEST_CUDA(cudaSetDevice(g.devices[r]));
    TEST_CUDA(cudaMemcpy(bits.data(), dst, bits.size(), cudaMemcpyDeviceToHost));
    (*out)[r] = test::from_bits(bits, spec.dtype);
    cudaFree(bufs[r]);
    cudaFree(outs[r]);
  }
}

std::vector<std::vector<float>> inputs(int p, std::size_t n, DType dt, std::uint64_t seed) {
  std::vector<std::vector<float>> in(p);
  for (int r = 0; r < p; ++r) in[r] = test::make_input(seed + r, n, dt, 128);
  return in;
}

}  // namespace

// The local residual runs twice: as one fused kernel per round, and in the split form (push +
// reduce, then the tail: CommOptions::split_tail_min_count 0). Each configuration runs on the
// quantized path and on the exact path (exact_max_count n), bf16 state with the dual compensator
// and the local residual also in the exact kernel compiled for it.
BOOST_AUTO_TEST_CASE(in_place_out_of_place_shifted_and_rounds) {
  if (!test::gpu_present()) return;
  struct Config {
    CompensatorMode mode;
    ResidualMode residual;
    std::size_t split_tail_min_count;
    DType state = DType::kFloat32;
  };
  for (int p : {2, 4}) {
    for (bool exact : {false, true}) {
      for (auto [mode, res, split_min, state] :
           {Config{CompensatorMode::kOff, ResidualMode::kGlobal, 0},
            Config{CompensatorMode::kDual, ResidualMode::kGlobal, 0},
            Config{CompensatorMode::kDual, ResidualMode::kLocal, cuda::kDefaultSplitTailMinCount},
            Config{CompensatorMode::kDual, ResidualMode::kLocal, 0},
            Config{CompensatorMode::kDual, ResidualMode::kLocal, 0, DType::kBFloat16}}) {
        cuda::CommOptions opt;
        opt.slot_bytes = 64 << 10;  // forces several rounds at these sizes
        opt.split_tail_min_count = split_min;
        DeviceGroup g;
        const std::size_t n = 777777;
        g.create(p, opt, n);
        AllReduceSpec spec = spec_of(DType::kBFloat16, mode, res);
        spec.compensator.state_dtype = state;
        spec.exact_max_count = exact ? n : 0;
        std::vector<std::vector<float>> in = inputs(p, n, spec.dtype, 11);
        // Three consecutive calls, shifting the buffers and alternating in place / out of place.
        for (int call = 0; call < 3; ++call) {
          std::vector<std::vector<float>> got;
          run_shifted(g, spec, n, static_cast<std::size_t>(call) * 3 + 1, call % 2 == 0, in, &got);
          const auto want = reference_after(spec, p, n, in, call + 1);
          for (int r = 0; r < p; ++r) {
            BOOST_REQUIRE_MESSAGE(test::same_bits(got[r], want[r]),
                                  "P" << p << " mode " << compensator_mode_name(mode) << "/"
                                      << residual_mode_name(res) << " state " << dtype_name(state)
                                      << (exact ? " exact path" : "") << " split from " << split_min
                                      << " call " << call << " rank " << r);
          }
        }
        g.destroy();
      }
    }
  }
}

// Aligned buffers, no x' output and whole block iterations: the push, reduce and tail of most
// tiles run their lean loops (the host-array path always asks for x', so only the device API
// reaches them), among them the copies compiled for the dual compensator with the local residual
// and bf16 state. Three calls in place, so the state is applied and updated: bit-identical to the
// reference in every compensated configuration, both bit widths, P = 2, 3, 4, with the local
// residual's kernels fused and split (CommOptions::split_tail_min_count 0; its push + reduce kernel
// batches the peers' copies at P = 3 and 4).
BOOST_AUTO_TEST_CASE(lean_tiles_match_the_reference) {
  if (!test::gpu_present()) return;
  struct Config {
    CompensatorMode mode;
    ResidualMode residual;
    DType state;
  };
  const Config configs[] = {{CompensatorMode::kDual, ResidualMode::kLocal, DType::kBFloat16},
                            {CompensatorMode::kDual, ResidualMode::kLocal, DType::kFloat32},
                            {CompensatorMode::kSingle, ResidualMode::kLocal, DType::kBFloat16},
                            {CompensatorMode::kDual, ResidualMode::kGlobal, DType::kBFloat16},
                            {CompensatorMode::kOff, ResidualMode::kGlobal, DType::kFloat32}};
  const std::size_t n = (std::size_t{1} << 19) + 77;
  for (int p : {2, 3, 4}) {
    for (std::size_t split_min : {cuda::kDefaultSplitTailMinCount, std::size_t{0}}) {
      cuda::CommOptions opt;
      opt.split_tail_min_count = split_min;
      DeviceGroup g;
      g.create(p, opt, n);
      for (int bits : {4, 8}) {
        for (const Config& c : configs) {
          AllReduceSpec spec = spec_of(DType::kBFloat16, c.mode, c.residual);
          spec.quant.bits = bits;
          spec.compensator.state_dtype = c.state;
          spec.exact_max_count = 0;  // the quantized path at every size
          for (int r = 0; r < p; ++r) {
            if (g.states[r] != nullptr) TEST_OK(cuda::reset_compensator(g.states[r], g.streams[r]));
          }
          const std::vector<std::vector<float>> in = inputs(p, n, spec.dtype, 31 + bits);
          for (int call = 0; call < 3; ++call) {
            std::vector<std::vector<float>> got;
            run_shifted(g, spec, n, 0, true, in, &got);
            const auto want = reference_after(spec, p, n, in, call + 1);
            for (int r = 0; r < p; ++r) {
              BOOST_REQUIRE_MESSAGE(test::same_bits(got[r], want[r]),
                                    "P" << p << " " << bits << "-bit " << compensator_mode_name(c.mode) << "/"
                                        << residual_mode_name(c.residual) << " state " << dtype_name(c.state)
                                        << " split from " << split_min << " call " << call << " rank " << r);
            }
          }
        }
      }
      g.destroy();
    }
  }
}

// Overflow-groups wide (docs/numerics.md 2.4) and the Hadamard rotation (2.6) in the lean loops:
// whole aligned bf16 tiles whose groups reach magnitudes up to 1e37 and the fp16 scale boundary
// (test::make_wide_input; ordinary inputs with the rotation alone), fused and split, uncompensated
// and with the configurations the lean loops are compiled for.
BOOST_AUTO_TEST_CASE(lean_tiles_with_wide_groups_and_rotation_match_the_reference) {
  if (!test::gpu_present()) return;
  const std::size_t n = (std::size_t{1} << 19) + 77;
  for (int p : {2, 4}) {
    for (std::size_t split_min : {cuda::kDefaultSplitTailMinCount, std::size_t{0}}) {
      cuda::CommOptions opt;
      opt.split_tail_min_count = split_min;
      DeviceGroup g;
      g.create(p, opt, n);
      for (int bits : {4, 8}) {
        for (int option = 0; option < 6; ++option) {
          const CompensatorMode mode = option % 2 ? CompensatorMode::kDual : CompensatorMode::kOff;
          const bool wide = option < 4;                 // wide groups, wide values
          const bool rotate = option >= 2;              // the Hadamard rotation
          AllReduceSpec spec = spec_of(DType::kBFloat16, mode, ResidualMode::kLocal);
          spec.quant.bits = bits;
          spec.quant.overflow = wide ? OverflowGroups::kWide : OverflowGroups::kPoison;
          spec.quant.rotation = rotate ? Rotation::kHadamard : Rotation::kNone;
          spec.compensator.state_dtype = DType::kBFloat16;
          spec.exact_max_count = 0;
          for (int r = 0; r < p; ++r) {
            if (g.states[r] != nullptr) TEST_OK(cuda::reset_compensator(g.states[r], g.streams[r]));
          }
          std::vector<std::vector<float>> in(p);
          for (int r = 0; r < p; ++r) {
            in[r] = wide ? test::make_wide_input(57 + r, n, spec.dtype, 128, r) : test::make_input(57 + r, n, spec.dtype, 128);
          }
          for (int call = 0; call < 2; ++call) {
            std::vector<std::vector<float>> got;
            run_shifted(g, spec, n, 0, true, in, &got);
            const auto want = reference_after(spec, p, n, in, call + 1);
            for (int r = 0; r < p; ++r) {
              BOOST_REQUIRE_MESSAGE(test::same_bits(got[r], want[r]),
                                    (wide ? "wide " : "") << (rotate ? "hadamard " : "") << "P" << p << " " << bits
                                                          << "-bit " << compensator_mode_name(mode) << " split from "
                                                          << split_min << " call " << call << " rank " << r);
            }
            if (wide && !rotate) {
              for (float v : got[0]) BOOST_REQUIRE(std::isfinite(v));
            }
          }
        }
      }
      g.destroy();
    }
  }
}

BOOST_AUTO_TEST_CASE(cuda_graph_replay) {
  if (!test::gpu_present()) return;
  const int p = 4;
  const std::size_t n = 100003;
  for (ResidualMode res : {ResidualMode::kGlobal, ResidualMode::kLocal}) {
    DeviceGroup g;
    g.create(p, cuda::CommOptions{}, n);
    AllReduceSpec spec = spec_of(DType::kBFloat16, CompensatorMode::kDual, res);
    const auto in = inputs(p, n, spec.dtype, 99);
    std::vector<void*> in_d(p), out_d(p);
    std::vector<cudaGraphExec_t> exec(p);
    constexpr int kCallsPerGraph = 3;
    constexpr int kReplays = 4;
    for (int r = 0; r < p; ++r) {
      TEST_CUDA(cudaSetDevice(g.devices[r]));
      TEST_CUDA(cudaMalloc(&in_d[r], n * 2));
      TEST_CUDA(cudaMalloc(&out_d[r], n * 2));
      const auto bits = test::to_bits(in[r], spec.dtype);
      TEST_CUDA(cudaMemcpy(in_d[r], bits.data(), bits.size(), cudaMemcpyHostToDevice));
      // Capture: three calls, then join the side-stream update so the capture is closed.
      cudaGraph_t graph;
      TEST_CUDA(cudaStreamBeginCapture(g.streams[r], cudaStreamCaptureModeThreadLocal));
      for (int k = 0; k < kCallsPerGraph; ++k) {
        TEST_OK(cuda::allreduce(g.comms[r], in_d[r], out_d[r], n, spec, g.states[r], g.streams[r]));
      }
      TEST_OK(cuda::join(g.comms[r], g.streams[r]));
      TEST_CUDA(cudaStreamEndCapture(g.streams[r], &graph));
      TEST_CUDA(cudaGraphInstantiate(&exec[r], graph, 0));
      TEST_CUDA(cudaGraphDestroy(graph));
    }
    for (int rep = 0; rep < kReplays; ++rep) {
      for (int r = 0; r < p; ++r) {
        TEST_CUDA(cudaSetDevice(g.devices[r]));
        TEST_CUDA(cudaGraphLaunch(exec[r], g.streams[r]));
      }
    }
    g.sync();
    const auto want = reference_after(spec, p, n, in, kCallsPerGraph * kReplays);
    for (int r = 0; r < p; ++r) {
      std::vector<unsigned char> bits(n * 2);
      TEST_CUDA(cudaSetDevice(g.devices[r]));
      TEST_CUDA(cudaMemcpy(bits.data(), out_d[r], bits.size(), cudaMemcpyDeviceToHost));
      BOOST_REQUIRE_MESSAGE(test::same_bits(test::from_bits(bits, spec.dtype), want[r]),
                            "graph replay, residual " << residual_mode_name(res) << ", rank " << r);
      cudaGraphExecDestroy(exec[r]);
      cudaFree(in_d[r]);
      cudaFree(out_d[r]);
    }
    g.destroy();
  }
}

BOOST_AUTO_TEST_CASE(ten_thousand_calls_changing_sizes) {
  if (!test::gpu_present()) return;
  const int p = 4;
  const std::size_t max_n = 1 << 18;
  DeviceGroup g;
  cuda::CommOptions opt;
  opt.timeout_seconds = 20.0;
  g.create(p, opt, 0);
  AllReduceSpec spec = spec_of(DType::kBFloat16, CompensatorMode::kOff, ResidualMode::kGlobal);
  const std::size_t exact = max_n / 4;
  spec.exact_max_count = exact;
  const auto in = inputs(p, max_n, spec.dtype, 5);
  std::vector<void*> in_d(p), out_d(p);
  for (int r = 0; r < p; ++r) {
    TEST_CUDA(cudaSetDevice(g.devices[r]));
    TEST_CUDA(cudaMalloc(&in_d[r], max_n * 2));
    TEST_CUDA(cudaMalloc(&out_d[r], max_n * 2));
    const auto bits = test::to_bits(in[r], spec.dtype);
    TEST_CUDA(cudaMemcpy(in_d[r], bits.data(), bits.size(), cudaMemcpyHostToDevice));
  }
  std::mt19937 rng(3);
  std::size_t n = 0;
  for (int call = 0; call < 10000; ++call) {
    // Sizes on both sides of the exact-path switch-over, with a few bits of every alignment.
    n = 1 + rng() % (call % 3 == 0 ? max_n : exact * 2);
    for (int r = 0; r < p; ++r) {
      TEST_OK(cuda::allreduce(g.comms[r], in_d[r], out_d[r], n, spec, nullptr, g.streams[r]));
    }
    if (call % 2500 == 2499) g.sync();  // bounded queue; no sync inside a call
  }
  g.sync();
  std::vector<std::vector<float>> in_n(p);
  for (int r = 0; r < p; ++r) in_n[r].assign(in[r].begin(), in[r].begin() + n);
  const auto want = reference_after(spec, p, n, in_n, 1);
  for (int r = 0; r < p; ++r) {
    std::vector<unsigned char> bits(n * 2);
    TEST_CUDA(cudaSetDevice(g.devices[r]));
    TEST_CUDA(cudaMemcpy(bits.data(), out_d[r], bits.size(), cudaMemcpyDeviceToHost));
    BOOST_REQUIRE(test::same_bits(test::from_bits(bits, spec.dtype), want[r]));
    cudaFree(in_d[r]);
    cudaFree(out_d[r]);
  }
  g.destroy();
}

BOOST_AUTO_TEST_CASE(missing_peer_times_out_with_rank_tile_stage) {
  if (!test::gpu_present()) return;
  DeviceGroup g;
  cuda::CommOptions opt;
  opt.timeout_seconds = 0.2;
  g.create(2, opt, 0);
  const AllReduceSpec spec = spec_of(DType::kBFloat16, CompensatorMode::kOff, ResidualMode::kGlobal);
  const std::size_t n = 1 << 16;
  void* buf = nullptr;
  TEST_CUDA(cudaSetDevice(g.devices[0]));
  TEST_CUDA(cudaMalloc(&buf, n * 2));
  TEST_CUDA(cudaMemset(buf, 0x3c, n * 2));
  // Rank 1 never calls: rank 0 must fail, not hang.
  TEST_OK(cuda::allreduce(g.comms[0], buf, buf, n, spec, nullptr, g.streams[0]));
  const Status s = cuda::synchronize(g.comms[0], nullptr);
  BOOST_CHECK(s.code() == StatusCode::kTimeout);
  BOOST_TEST_MESSAGE("timeout status: " << s.message());
  BOOST_CHECK(s.message().find("rank 0") != std::string::npos);
  BOOST_CHECK(s.message().find("tile") != std::string::npos);
  BOOST_CHECK(s.message().find("stage") != std::string::npos);
  // The communicator refuses further calls instead of running on inconsistent flags.
  BOOST_CHECK(cuda::allreduce(g.comms[0], buf, buf, n, spec, nullptr, g.streams[0]).code() == StatusCode::kTimeout);
  cudaFree(buf);
  for (int r = 0; r < 2; ++r) {
    cudaSetDevice(g.devices[r]);
    cudaStreamDestroy(g.streams[r]);
    cuda::destroy(g.comms[r]);
  }
}

// More ranks on one GPU than its hardware queues serve (two streams each) are refused with a
// message naming the variable, before any device work; a rank alone on its GPU never is. The
// check reads the environment, so this runs without a GPU as well; the process's own queue count
// is left as it was.
BOOST_AUTO_TEST_CASE(too_many_ranks_for_the_work_queues_are_refused) {
  if (!test::gpu_present()) return;
  const char* before = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  const std::string saved = before != nullptr ? before : "";
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "4", 1);
  BOOST_CHECK_EQUAL(cuda::work_queues(), 4);
  const int devices[3] = {0, 0, 0};
  cuda::Communicator* comms[3] = {nullptr, nullptr, nullptr};
  const Status s = cuda::create_group(3, devices, cuda::CommOptions{}, comms);
  BOOST_CHECK(s.code() == StatusCode::kUnsupported);
  BOOST_TEST_MESSAGE("refusal: " << s.message());
  BOOST_CHECK(s.message().find("3 ranks share GPU 0") != std::string::npos);
  BOOST_CHECK(s.message().find("CUDA_DEVICE_MAX_CONNECTIONS >= 6") != std::string::npos);
  BOOST_CHECK(comms[0] == nullptr);
  // One rank per GPU cannot wait on itself across queues: frameworks that serialize their streams
  // through a single queue (CUDA_DEVICE_MAX_CONNECTIONS=1) are not refused.
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "1", 1);
  const int alone[1] = {0};
  cuda::Communicator* one = nullptr;
  const Status t = cuda::create_group(1, alone, cuda::CommOptions{}, &one);
  BOOST_CHECK_MESSAGE(t.message().find("CUDA_DEVICE_MAX_CONNECTIONS") == std::string::npos, t.message());
  if (t.ok()) BOOST_CHECK(cuda::destroy(one).ok());
  // A HostGroup whose communicators are refused fails with the same message and frees cleanly
  // (it crashed in its destructor before); it shares a GPU only with fewer GPUs than kMaxRanks.
  if (cuda::device_count() < kMaxRanks) {
    std::unique_ptr<cuda::HostGroup> group;
    const Status h = cuda::HostGroup::create(cuda::device_count() + 1, AllReduceSpec{}, &group);
    BOOST_CHECK(h.code() == StatusCode::kUnsupported);
    BOOST_CHECK_MESSAGE(h.message().find("CUDA_DEVICE_MAX_CONNECTIONS") != std::string::npos, h.message());
    BOOST_CHECK(group == nullptr);
  }
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "not a number", 1);
  BOOST_CHECK_EQUAL(cuda::work_queues(), 8);  // the driver's default
  if (before != nullptr) {
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", saved.c_str(), 1);
  } else {
    unsetenv("CUDA_DEVICE_MAX_CONNECTIONS");
  }
}

// One host thread per GPU, each issuing its rank's calls (the one-process model), with the NCCL
// transport (no memory shared between ranks) against the peer-to-peer path: bit-identical, on
// the quantized and the exact path, forward and backward.
BOOST_AUTO_TEST_CASE(thread_per_gpu_and_nccl_transport_bit_identical) {
  if (!test::gpu_present()) return;
  const int gpus = cuda::device_count();
  if (gpus < 2) {  // NCCL needs one GPU per rank
    std::cout << "skipped (needs two GPUs, one per NCCL rank)" << std::endl;
    return;
  }
  const int p = std::min(gpus, kMaxRanks);
  struct Shape {
    CompensatorMode mode;
    ResidualMode res;
    Direction dir;
    std::size_t n;
  };
  const std::size_t exact_max = cuda::default_exact_max_count(p);
  constexpr std::size_t kWideShape = 70003;
  for (const Shape& sh : {Shape{CompensatorMode::kOff, ResidualMode::kGlobal, Direction::kForward, 1234567},
                          Shape{CompensatorMode::kDual, ResidualMode::kLocal, Direction::kForward, 1234567},
                          Shape{CompensatorMode::kDual, ResidualMode::kGlobal, Direction::kForward, 1234567},
                          Shape{CompensatorMode::kDual, ResidualMode::kLocal, Direction::kBackward, 1234567},
                          Shape{CompensatorMode::kOff, ResidualMode::kGlobal, Direction::kForward, 70001},
                          Shape{CompensatorMode::kDual, ResidualMode::kLocal, Direction::kBackward, 70001},
                          Shape{CompensatorMode::kOff, ResidualMode::kGlobal, Direction::kForward, kWideShape},
                          Shape{CompensatorMode::kDual, ResidualMode::kLocal, Direction::kBackward, kWideShape}}) {
    const std::size_t n = sh.n;
    const CompensatorMode mode = sh.mode;
    const ResidualMode res = sh.res;
    AllReduceSpec spec = spec_of(DType::kBFloat16, mode, res);
    spec.direction = sh.dir;
    spec.exact_max_count = exact_max;
    // The kWideShape shapes: wide groups (docs/numerics.md 2.4) past the fp16 scale limit, on the
    // quantized path; the backward one with the Hadamard rotation (2.6) as well.
    const bool wide = n == kWideShape;
    if (wide) {
      spec.quant.overflow = OverflowGroups::kWide;
      spec.exact_max_count = 0;
      if (sh.dir == Direction::kBackward) spec.quant.rotation = Rotation::kHadamard;
    }
    std::vector<std::vector<float>> in = inputs(p, n, spec.dtype, 21);
    if (wide) {
      for (int r = 0; r < p; ++r) in[r] = test::make_wide_input(21 + r, n, spec.dtype, 128, r);
    }
    const auto want = reference_after(spec, p, n, in, 2);
    for (cuda::Transport t : {cuda::Transport::kPeerToPeer, cuda::Transport::kNccl}) {
      cuda::CommOptions opt;
      opt.transport = t;
      DeviceGroup g;
      g.create(p, opt, n);
      std::vector<std::vector<float>> got(p);
      std::vector<Status> status(p);
      std::vector<std::thread> threads;
      for (int r = 0; r < p; ++r) {
        threads.emplace_back([&, r] {
          cudaSetDevice(g.devices[r]);
          void* d = nullptr;
          cudaMalloc(&d, n * 2);
          const auto bits = test::to_bits(in[r], spec.dtype);
          cudaMemcpy(d, bits.data(), bits.size(), cudaMemcpyHostToDevice);
          void* o = nullptr;
          cudaMalloc(&o, n * 2);
          for (int k = 0; k < 2 && status[r].ok(); ++k) {
            status[r] = cuda::allreduce(g.comms[r], d, o, n, spec, g.states[r], g.streams[r]);
          }
          if (status[r].ok()) status[r] = cuda::synchronize(g.comms[r], nullptr);
          std::vector<unsigned char> ob(n * 2);
          cudaMemcpy(ob.data(), o, ob.size(), cudaMemcpyDeviceToHost);
          got[r] = test::from_bits(ob, spec.dtype);
          cudaFree(d);
          cudaFree(o);
        });
      }
      for (auto& th : threads) th.join();
      for (int r = 0; r < p; ++r) {
        BOOST_REQUIRE_MESSAGE(status[r].ok(), status[r].message());
        BOOST_REQUIRE_MESSAGE(test::same_bits(got[r], want[r]),
                              (t == cuda::Transport::kNccl ? "nccl" : "p2p")
                                  << " transport, mode " << compensator_mode_name(mode) << "/"
                                  << residual_mode_name(res) << " " << direction_name(sh.dir) << ", n " << n
                                  << ", rank " << r);
      }
      g.destroy();
    }
  }
}

// Options and arguments the library refuses before any GPU work: a slot below kMinSlotBytes, a
// timeout that is not positive and finite, the NCCL transport with ranks sharing a GPU, and a
// misaligned x' output; and a compensator state destroyed after its communicator.
BOOST_AUTO_TEST_CASE(bad_options_and_arguments_are_refused) {
  if (!test::gpu_present()) return;
  const int one[1] = {0};
  cuda::Communicator* c = nullptr;
  auto refused = [&](const cuda::CommOptions& o, const char* what) {
    const Status st = cuda::create_group(1, one, o, &c);
    BOOST_CHECK_MESSAGE(st.code() == StatusCode::kInvalidArgument, what << ": " << st.message());
    BOOST_CHECK_MESSAGE(st.message().find(what) != std::string::npos, st.message());
    BOOST_CHECK(c == nullptr);
  };
  cuda::CommOptions o;
  o.slot_bytes = 4096;
  refused(o, "slot_bytes");
  o = cuda::CommOptions{};
  o.timeout_seconds = 0.0;
  refused(o, "timeout_seconds");
  o.timeout_seconds = std::nan("");
  refused(o, "timeout_seconds");
  o = cuda::CommOptions{};
  o.transport = cuda::Transport::kNccl;
  const int shared[2] = {0, 0};
  cuda::Communicator* two[2] = {nullptr, nullptr};
  const Status nccl = cuda::create_group(2, shared, o, two);
  BOOST_CHECK_MESSAGE(nccl.code() == StatusCode::kInvalidArgument, nccl.message());
  BOOST_CHECK(nccl.message().find("one GPU per rank") != std::string::npos);

  // Two ranks on GPU 0; rank 0's call with a misaligned x' output is refused before it launches
  // anything, so rank 1 need not call.
  TEST_OK(cuda::create_group(2, shared, cuda::CommOptions{}, two));
  const std::size_t n = 4096;
  cuda::CompensatorBuffers* state = nullptr;
  TEST_OK(cuda::create_compensator(two[0], n, &state));
  void *in = nullptr, *out = nullptr;
  float* xp = nullptr;
  TEST_CUDA(cudaMalloc(&in, n * 2));
  TEST_CUDA(cudaMalloc(&out, n * 2));
  TEST_CUDA(cudaMalloc(&xp, (n + 4) * sizeof(float)));
  AllReduceSpec spec = spec_of(DType::kBFloat16, CompensatorMode::kDual, ResidualMode::kLocal);
  const Status misaligned = cuda::allreduce(two[0], in, out, n, spec, state, nullptr, xp + 1);
  BOOST_CHECK_MESSAGE(misaligned.code() == StatusCode::kInvalidArgument, misaligned.message());
  BOOST_CHECK(misaligned.message().find("16-byte aligned") != std::string::npos);
  TEST_CUDA(cudaFree(in));
  TEST_CUDA(cudaFree(out));
  TEST_CUDA(cudaFree(xp));
  TEST_OK(cuda::destroy(two[0]));
  TEST_OK(cuda::destroy(two[1]));
  TEST_OK(cuda::destroy_compensator(state));  // after its communicator
}
