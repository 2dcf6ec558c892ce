// echotk bench: the Echo all-reduce against NCCL on the GPUs present, in nccl-tests columns
// (size, count, type, time, algbw, busbw, #wrong) plus the speedup over NCCL bf16 at the same size
// and the relative error of the result against the exact fp64 sum. Medians over --iters timed
// iterations after --warmup, each iteration's time the slowest rank's (CUDA events). Rows with the
// fused compensator are timed as the paper does: matmul + all-reduce minus the matmul alone, so the
// side-stream update overlaps the matmul. The matmul stands for the next layer's projection of the
// message's tokens: (count / 8192 tokens, at most 8192) x 8192 x 8192 unless --matmul-m fixes its
// rows, so its run-to-run jitter stays small next to the all-reduce at every size.
// --background-duty adds a peer-to-peer copy loop between the GPUs (paper Table 3). --graph K times
// the rows from CUDA graphs of K calls per rank instead of one launch per call, as serving engines
// replay their decode steps: the per-call time then leaves out the host's launch cost, which
// dominates below a few hundred KiB.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "echo/cuda/bench_support.h"
#include "echo/cuda/communicator.h"

namespace echo::cli {
namespace {

const char* kCmd = "bench";

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail(kCmd, kExitFailure, std::string(what) + ": " + cudaGetErrorString(e));
}
void nccl_ok(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) fail(kCmd, kExitFailure, std::string(what) + ": " + ncclGetErrorString(r));
}

struct RowSpec {
  std::string name;
  bool nccl_baseline = false;
  int bits = 4;
  cuda::Transport transport = cuda::Transport::kPeerToPeer;
  CompensatorMode mode = CompensatorMode::kOff;
  ResidualMode residual = ResidualMode::kGlobal;
  bool with_matmul = false;
  long long exact_max = -1;  // -1: the library default
  DType state_dtype = DType::kFloat32;
};

std::vector<RowSpec> all_rows() {
  std::vector<RowSpec> r;
  r.push_back({"nccl-bf16", true});
  r.push_back({"nccl-t8", false, 8, cuda::Transport::kNccl, CompensatorMode::kOff, ResidualMode::kGlobal, false, 0});
  r.push_back({"nccl-t4", false, 4, cuda::Transport::kNccl, CompensatorMode::kOff, ResidualMode::kGlobal, false, 0});
  r.push_back({"echo8", false, 8});
  r.push_back({"echo4", false, 4});
  r.push_back({"echo4-comp-global", false, 4, cuda::Transport::kPeerToPeer, CompensatorMode::kDual,
               ResidualMode::kGlobal, true});
  r.push_back({"echo4-comp-local", false, 4, cuda::Transport::kPeerToPeer, CompensatorMode::kDual,
               ResidualMode::kLocal, true});
  // The compensated calls on their own (no matmul): their own time, meaningful at every size, where
  // the matmul-subtracted rows above drown in the matmul's run-to-run spread below a few MiB.
  r.push_back({"echo4-comp-global-alone", false, 4, cuda::Transport::kPeerToPeer, CompensatorMode::kDual,
               ResidualMode::kGlobal, false});
  r.push_back({"echo4-comp-local-alone", false, 4, cuda::Transport::kPeerToPeer, CompensatorMode::kDual,
               ResidualMode::kLocal, false});
  r.push_back({"echo4-comp-global-bf16", false, 4, cuda::Transport::kPeerToPeer, CompensatorMode::kDual,
               ResidualMode::kGlobal, false, -1, DType::kBFloat16});
  r.push_back({"echo4-comp-local-bf16", false, 4, cuda::Transport::kPeerToPeer, CompensatorMode::kDual,
               ResidualMode::kLocal, false, -1, DType::kBFloat16});
  // bf16 state timed as the paper does (matmul + all-reduce minus the matmul alone).
  r.push_back({"echo4-comp-global-bf16-matmul", false, 4, cuda::Transport::kPeerToPeer, CompensatorMode::kDual,
               ResidualMode::kGlobal, true, -1, DType::kBFloat16});
  r.push_back({"echo4-comp-local-bf16-matmul", false, 4, cuda::Transport::kPeerToPeer, CompensatorMode::kDual,
               ResidualMode::kLocal, true, -1, DType::kBFloat16});
  r.push_back({"echo4-quant", false, 4, cuda::Transport::kPeerToPeer, CompensatorMode::kOff,
               ResidualMode::kGlobal, false, 0});
  r.push_back({"exact", false, 4, cuda::Transport::kPeerToPeer, CompensatorMode::kOff, ResidualMode::kGlobal,
               false, 1LL << 40});
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

struct Options {
  int ranks = 0;
  std::size_t min_bytes = 64 << 10;
  std::size_t max_bytes = std::size_t{1} << 30;
  int factor = 2;
  int iters = 50;
  int warmup = 10;
  std::vector<std::string> rows;
  double duty = 0.0;
  int mm_m = 0, mm_n = 8192, mm_k = 8192;  // mm_m 0: rows follow the message (matmul_rows)
  std::string markdown;
  int tiles_per_wave = 0;
  double tiles_per_sqrt = 0.0;
  int reduce_lag_waves = 0, tail_lag_waves = 0;
  std::size_t slot_mib = 0;
  long long exact_max = -1;  // the Echo rows' exact-path limit; -1: the library default
  std::size_t split_tail_min = cuda::kDefaultSplitTailMinCount;
  bool skip_verify = false;
  int graph = 0;  // calls per CUDA graph (0: one launch per call)
};

// Background peer-to-peer load: every GPU copies to the next one for `duty` of the time.
class Background {
 public:
  void start(const std::vector<int>& devs, double duty) {
    if (duty <= 0.0 || devs.size() < 2) return;
    stop_ = false;
    for (std::size_t g = 0; g < devs.size(); ++g) {
      threads_.emplace_back([this, devs, g, duty] {
        const int src = devs[g], dst = devs[(g + 1) % devs.size()];
        const std::size_t bytes = 64 << 20;
        void *a = nullptr, *b = nullptr;
        cudaSetDevice(dst);
        cudaMalloc(&b, bytes);
        cudaSetDevice(src);
        cudaMalloc(&a, bytes);
        cudaStream_t s;
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        cudaEvent_t e0, e1;
        cudaEventCreate(&e0);
        cudaEventCreate(&e1);
        cudaEventRecord(e0, s);
        cudaMemcpyPeerAsync(b, dst, a, src, bytes, s);
        cudaEventRecord(e1, s);
        cudaEventSynchronize(e1);
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        const double idle_us = ms * 1e3 * (1.0 - duty) / duty;
        while (!stop_) {
          for (int k = 0; k < 4; ++k) {
            cudaMemcpyPeerAsync(b, dst, a, src, bytes, s);
            if (idle_us > 1.0) (void)cuda::bench::spin(idle_us, s);
          }
          cudaStreamSynchronize(s);
        }
        cudaStreamSynchronize(s);
        cudaFree(a);
        cudaSetDevice(dst);
        cudaFree(b);
      });
    }
  }
  void stop() {
    stop_ = true;
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

struct Context {
  Options opt;
  int P = 0;
  std::vector<int> devs;
  std::vector<cudaStream_t> streams;
  std::vector<ncclComm_t> nccl;
  std::vector<cuda::Communicator*> p2p, ncclt;
  std::vector<cuda::CompensatorBuffers*> states;
  std::vector<void*> in, out;
  std::vector<cuda::bench::Matmul*> mm;
  double* ref = nullptr;      // on devs[0]: fp64 exact sum
  void* scratch = nullptr;    // on devs[0]: a peer's output
  double* sums = nullptr;     // on devs[0]
  unsigned long long* mismatches = nullptr;
};

// Runs op(rank) iters times on every rank, one host thread per GPU; returns per-iteration times
// (slowest rank) in ms. With `graph` > 0 each rank captures `graph` calls of op (then close(rank),
// which must leave no work forked off its stream) into a CUDA graph after the warm-up, and an
// iteration is one replay of it, its time divided by `graph`.
std::vector<double> time_loop(Context& c, int warmup, int iters, const std::function<void(int)>& op,
                              int graph = 0, const std::function<void(int)>& close = nullptr) {
  std::vector<std::vector<double>> per(c.P, std::vector<double>(iters));
  std::vector<std::thread> th;
  std::vector<std::string> errors(c.P);
  for (int r = 0; r < c.P; ++r) {
    th.emplace_back([&, r] {
      cudaSetDevice(c.devs[r]);
      for (int k = 0; k < warmup; ++k) op(r);
      if (close) close(r);
      cudaStreamSynchronize(c.streams[r]);
      cudaGraphExec_t exec = nullptr;
      if (graph > 0) {
        cudaGraph_t g = nullptr;
        cudaError_t e = cudaStreamBeginCapture(c.streams[r], cudaStreamCaptureModeThreadLocal);
        if (e == cudaSuccess) {
          for (int k = 0; k < graph; ++k) op(r);
          if (close) close(r);
          e = cudaStreamEndCapture(c.streams[r], &g);
        }
        if (e == cudaSuccess) e = cudaGraphInstantiate(&exec, g, 0);
        if (g != nullptr) cudaGraphDestroy(g);
        if (e == cudaSuccess) e = cudaGraphLaunch(exec, c.streams[r]);  // uploads the graph
        if (e == cudaSuccess) e = cudaStreamSynchronize(c.streams[r]);
        if (e != cudaSuccess) {
          errors[r] = std::string("rank ") + std::to_string(r) + ": CUDA graph of " + std::to_string(graph) +
                      " calls: " + cudaGetErrorString(e);
          return;  // the other ranks' replays time out in the library's peer waits and fail too
        }
      }
      std::vector<cudaEvent_t> ev(iters + 1);
      for (auto& e : ev) cudaEventCreate(&e);
      cudaEventRecord(ev[0], c.streams[r]);
      for (int k = 0; k < iters; ++k) {
        if (exec != nullptr) {
          cudaGraphLaunch(exec, c.streams[r]);
        } else {
          op(r);
        }
        cudaEventRecord(ev[k + 1], c.streams[r]);
      }
      cudaStreamSynchronize(c.streams[r]);
      for (int k = 0; k < iters; ++k) {
        float ms = 0;
        cudaEventElapsedTime(&ms, ev[k], ev[k + 1]);
        per[r][k] = graph > 0 ? ms / graph : ms;
      }
      for (auto& e : ev) cudaEventDestroy(e);
      if (exec != nullptr) cudaGraphExecDestroy(exec);
    });
  }
  for (auto& t : th) t.join();
  for (const std::string& e : errors) {
    if (!e.empty()) fail(kCmd, kExitFailure, e);
  }
  std::vector<double> worst(iters, 0.0);
  for (int r = 0; r < c.P; ++r) {
    for (int k = 0; k < iters; ++k) worst[k] = std::max(worst[k], per[r][k]);
  }
  return worst;
}

// Most rows of the overlapped matmul when they follow the message (--matmul-m 0): 8192 keeps it
// at about 1.4 ms on an H200, below the clock drops that a longer one brings on.
constexpr int kMatmulMaxRows = 8192;

// The most rows the overlapped matmul runs with: --matmul-m when set, kMatmulMaxRows otherwise.
int matmul_max_rows(const Options& opt) { return opt.mm_m > 0 ? opt.mm_m : kMatmulMaxRows; }

// Rows of the overlapped matmul for a message of `count` elements: the message's tokens at a
// hidden size of --matmul-k, at least 1 and at most kMatmulMaxRows, or --matmul-m when set.
int matmul_rows(const Options& opt, std::size_t count) {
  if (opt.mm_m > 0) return opt.mm_m;
  const std::size_t tokens = count / static_cast<std::size_t>(opt.mm_k);
  return static_cast<int>(std::clamp<std::size_t>(tokens, 1, kMatmulMaxRows));
}

// The overlapped bf16 matmul of rank r on its stream (`rows` rows).
void run_matmul(Context& c, int r, int rows) {
  check(kCmd, cuda::bench::matmul_run(c.mm[r], c.streams[r], rows));
}

struct Verify {
  unsigned long long wrong = 0;
  double rel_error = 0;
};

Verify verify(Context& c, std::size_t count) {
  cudaSetDevice(c.devs[0]);
  cuda_ok(cudaMemset(c.sums, 0, 2 * sizeof(double)), "memset");
  cuda_ok(cudaMemset(c.mismatches, 0, sizeof(unsigned long long)), "memset");
  check(kCmd, cuda::bench::error_norms(c.ref, c.out[0], count, DType::kBFloat16, c.sums, nullptr));
  for (int r = 1; r < c.P; ++r) {
    cuda_ok(cudaMemcpyPeer(c.scratch, c.devs[0], c.out[r], c.devs[r], count * 2), "copy");
    check(kCmd, cuda::bench::count_mismatches(c.out[0], c.scratch, count * 2, c.mismatches, nullptr));
  }
  double sums[2];
  Verify v;
  cuda_ok(cudaMemcpy(sums, c.sums, sizeof(sums), cudaMemcpyDeviceToHost), "copy");
  cuda_ok(cudaMemcpy(&v.wrong, c.mismatches, sizeof(v.wrong), cudaMemcpyDeviceToHost), "copy");
  v.rel_error = sums[1] > 0 ? std::sqrt(sums[0] / sums[1]) : 0.0;
  return v;
}

void prepare_inputs(Context& c, std::size_t count) {
  for (int r = 0; r < c.P; ++r) {
    cudaSetDevice(c.devs[r]);
    check(kCmd, cuda::bench::fill_random(c.in[r], count, DType::kBFloat16, 1234 + r, nullptr));
    cuda_ok(cudaDeviceSynchronize(), "fill");
  }
  if (c.opt.skip_verify) return;
  cudaSetDevice(c.devs[0]);
  for (int r = 0; r < c.P; ++r) {
    const void* src = c.in[r];
    if (r != 0) {
      cuda_ok(cudaMemcpyPeer(c.scratch, c.devs[0], c.in[r], c.devs[r], count * 2), "copy");
      src = c.scratch;
    }
    check(kCmd, cuda::bench::accumulate_fp64(c.ref, src, count, DType::kBFloat16, r == 0, nullptr));
  }
  cuda_ok(cudaDeviceSynchronize(), "reference");
}

struct Measured {
  double ms = 0;
  Verify v;
};

Measured run_row(Context& c, const RowSpec& row, std::size_t count) {
  Measured m;
  const int mm_rows = matmul_rows(c.opt, count);
  std::function<void(int)> op, close;
  AllReduceSpec spec;
  spec.dtype = DType::kBFloat16;
  spec.quant.bits = row.bits;
  spec.compensator.mode = row.mode;
  spec.compensator.residual = row.residual;
  spec.compensator.state_dtype = row.state_dtype;
  const long long exact_max = row.exact_max >= 0 ? row.exact_max : c.opt.exact_max;
  spec.exact_max_count =
      exact_max < 0 ? cuda::default_exact_max_count(c.P, spec) : static_cast<std::size_t>(exact_max);
  if (row.nccl_baseline) {
    op = [&](int r) {
      nccl_ok(ncclAllReduce(c.in[r], c.out[r], count, ncclBfloat16, ncclSum, c.nccl[r], c.streams[r]),
              "ncclAllReduce");
    };
  } else {
    auto& comms = row.transport == cuda::Transport::kNccl ? c.ncclt : c.p2p;
    const bool comp = row.mode != CompensatorMode::kOff;
    if (comp) {
      for (int r = 0; r < c.P; ++r) {
        cudaSetDevice(c.devs[r]);
        check(kCmd, cuda::reset_compensator(c.states[r], c.streams[r]));
      }
    }
    op = [&, comp](int r) {
      check(kCmd, cuda::allreduce(comms[r], c.in[r], c.out[r], count, spec, comp ? c.states[r] : nullptr,
                                  c.streams[r]));
      if (row.with_matmul) run_matmul(c, r, mm_rows);
    };
    // A graph's capture ends with the side-stream update of its last call joined back.
    close = [&](int r) { check(kCmd, cuda::join(comms[r], c.streams[r])); };
  }
  const auto t = time_loop(c, c.opt.warmup, c.opt.iters, op, c.opt.graph, close);
  m.ms = median(t);
  if (row.with_matmul) {
    // The matmul alone, measured right after the row with the same iterations: its time drifts
    // over a run (clocks under sustained load), so a single early measurement would bias the
    // difference by a few hundred microseconds.
    m.ms -= median(time_loop(c, c.opt.warmup, c.opt.iters, [&](int r) { run_matmul(c, r, mm_rows); }));
  }
  if (!row.nccl_baseline) {
    auto& comms = row.transport == cuda::Transport::kNccl ? c.ncclt : c.p2p;
    for (int r = 0; r < c.P; ++r) check(kCmd, cuda::synchronize(comms[r], nullptr));
  }
  if (!c.opt.skip_verify) m.v = verify(c, count);
  return m;
}

std::string fmt(double v, int prec) {
  std::ostringstream o;
  o << std::fixed << std::setprecision(prec) << v;
  return o.str();
}

void measure_links(Context& c, std::ostream& out) {
  if (c.P < 2) return;
  const std::size_t bytes = 256 << 20;
  std::vector<void*> src(c.P), dst(c.P * c.P, nullptr);
  for (int r = 0; r < c.P; ++r) {
    cudaSetDevice(c.devs[r]);
    cuda_ok(cudaMalloc(&src[r], bytes), "malloc");
    for (int q = 0; q < c.P; ++q) {
      if (q != r) cuda_ok(cudaMalloc(&dst[r * c.P + q], bytes), "malloc");  // on r, written by q
    }
  }
  auto timed = [&](bool all) {
    std::vector<std::vector<cudaStream_t>> s(c.P, std::vector<cudaStream_t>(c.P));
    std::vector<cudaEvent_t> e0(c.P), e1(c.P);
    for (int r = 0; r < c.P; ++r) {
      cudaSetDevice(c.devs[r]);
      for (auto& x : s[r]) cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking);
      cudaEventCreate(&e0[r]);
      cudaEventCreate(&e1[r]);
    }
    double worst = 0;
    for (int rep = 0; rep < 3; ++rep) {
      for (int r = 0; r < c.P; ++r) cudaSetDevice(c.devs[r]), cudaDeviceSynchronize();
      const auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < (all ? c.P : 1); ++r) {
        cudaSetDevice(c.devs[r]);
        for (int q = 0; q < (all ? c.P : 2); ++q) {
          if (q == r) continue;
          cudaMemcpyPeerAsync(dst[q * c.P + r], c.devs[q], src[r], c.devs[r], bytes, s[r][q]);
        }
      }
      for (int r = 0; r < c.P; ++r) cudaSetDevice(c.devs[r]), cudaDeviceSynchronize();
      worst = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    for (int r = 0; r < c.P; ++r) {
      cudaSetDevice(c.devs[r]);
      for (auto& x : s[r]) cudaStreamDestroy(x);
    }
    return worst;
  };
  const double one = timed(false);
  const double all = timed(true);
  // SM-driven: every GPU's kernel stores into (loads from) all its peers at once.
  auto sm_timed = [&](bool store) {
    double t = 0;
    for (int rep = 0; rep < 3; ++rep) {
      for (int r = 0; r < c.P; ++r) cudaSetDevice(c.devs[r]), cudaDeviceSynchronize();
      const auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < c.P; ++r) {
        cudaSetDevice(c.devs[r]);
        std::vector<void*> peers;
        for (int q = 0; q < c.P; ++q) {
          if (q != r) peers.push_back(dst[q * c.P + r]);  // lives on q
        }
        if (store) {
          check(kCmd, cuda::bench::peer_store(peers.data(), static_cast<int>(peers.size()), bytes, nullptr));
        } else {
          check(kCmd, cuda::bench::peer_load(peers.data(), static_cast<int>(peers.size()), bytes, src[r], nullptr));
        }
      }
      for (int r = 0; r < c.P; ++r) cudaSetDevice(c.devs[r]), cudaDeviceSynchronize();
      t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    return t;
  };
  const double st = sm_timed(true);
  const double ld = sm_timed(false);
  out << "# SM-driven, every GPU with all " << (c.P - 1) << " peers at once: stores " << fmt(bytes * (c.P - 1) / st / 1e9, 1)
      << " GB/s egress per GPU, loads " << fmt(bytes * (c.P - 1) / ld / 1e9, 1) << " GB/s ingress per GPU\n";
  out << "# peer copy bandwidth: one copy " << fmt(bytes / one / 1e9, 1) << " GB/s; every GPU to all "
      << (c.P - 1) << " peers at once " << fmt(bytes * (c.P - 1) / all / 1e9, 1) << " GB/s egress per GPU\n";
  for (int r = 0; r < c.P; ++r) {
    cudaSetDevice(c.devs[r]);
    cudaFree(src[r]);
    for (int q = 0; q < c.P; ++q) {
      if (dst[r * c.P + q]) cudaFree(dst[r * c.P + q]);
    }
  }
}

void run_bench(Options opt) {
  int gpus = 0;
  cuda_ok(cudaGetDeviceCount(&gpus), "cudaGetDeviceCount");
  if (gpus == 0) fail(kCmd, kExitFailure, "no CUDA device");
  Context c;
  c.opt = opt;
  c.P = opt.ranks > 0 ? opt.ranks : std::min(gpus, kMaxRanks);
  if (c.P > gpus) fail(kCmd, kExitBadInput, "bench runs one rank per GPU; --ranks exceeds the GPUs present");
  for (int r = 0; r < c.P; ++r) c.devs.push_back(r);
  std::vector<RowSpec> rows;
  for (const auto& r : all_rows()) {
    const bool asked = std::find(opt.rows.begin(), opt.rows.end(), r.name) != opt.rows.end();
    if (!opt.rows.empty() && !asked) continue;
    // The matmul-subtracted rows time the matmul too, which is not captured into the graphs.
    if (opt.graph > 0 && r.with_matmul) {
      if (asked) fail(kCmd, kExitBadInput, "row " + r.name + " runs a matmul and cannot be timed with --graph");
      continue;
    }
    rows.push_back(r);
  }
  if (rows.empty()) fail(kCmd, kExitBadInput, "no known row selected (--rows)");
  const std::size_t max_count = opt.max_bytes / 2;

  cudaDeviceProp prop{};
  cuda_ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  int driver = 0;
  cudaDriverGetVersion(&driver);
  std::ostringstream head;
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof(date), "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  head << "# echotk bench " << date << ": " << c.P << " x " << prop.name << ", CUDA driver API "
       << driver / 1000 << "." << (driver % 1000) / 10 << ", NCCL " << NCCL_MAJOR << "." << NCCL_MINOR << "."
       << NCCL_PATCH << ", bf16, medians of " << opt.iters << " iterations after " << opt.warmup
       << " warm-up, background peer-to-peer duty " << fmt(opt.duty * 100, 0) << "%, Echo receive slots "
       << ((opt.slot_mib != 0 ? opt.slot_mib << 20 : cuda::default_slot_bytes(c.P)) >> 20) << " MiB"
       << (opt.exact_max >= 0 ? ", exact path up to " + std::to_string(opt.exact_max) + " elements" : std::string())
       << (opt.graph > 0 ? ", per-call times from CUDA graphs of " + std::to_string(opt.graph) +
                               " calls (rows with a matmul left out)"
                         : std::string())
       << "\n";

  c.streams.resize(c.P);
  c.in.resize(c.P);
  c.out.resize(c.P);
  c.mm.resize(c.P, nullptr);
  for (int r = 0; r < c.P; ++r) {
    cuda_ok(cudaSetDevice(c.devs[r]), "cudaSetDevice");
    cuda_ok(cudaStreamCreateWithFlags(&c.streams[r], cudaStreamNonBlocking), "stream");
    cuda_ok(cudaMalloc(&c.in[r], max_count * 2), "malloc");
    cuda_ok(cudaMalloc(&c.out[r], max_count * 2), "malloc");
    check(kCmd, cuda::bench::matmul_create(matmul_max_rows(opt), opt.mm_n, opt.mm_k, &c.mm[r]));
  }
  cudaSetDevice(c.devs[0]);
  cuda_ok(cudaMalloc(&c.ref, max_count * sizeof(double)), "malloc");
  cuda_ok(cudaMalloc(&c.scratch, max_count * 2), "malloc");
  cuda_ok(cudaMalloc(&c.sums, 2 * sizeof(double)), "malloc");
  cuda_ok(cudaMalloc(&c.mismatches, sizeof(unsigned long long)), "malloc");
  c.nccl.resize(c.P);
  nccl_ok(ncclCommInitAll(c.nccl.data(), c.P, c.devs.data()), "ncclCommInitAll");
  cuda::CommOptions co;
  co.tiles_per_wave = opt.tiles_per_wave;
  co.tiles_per_sqrt_iteration = opt.tiles_per_sqrt;
  co.reduce_lag_waves = opt.reduce_lag_waves;
  co.tail_lag_waves = opt.tail_lag_waves;
  co.slot_bytes = opt.slot_mib << 20;
  co.split_tail_min_count = opt.split_tail_min;
  c.p2p.resize(c.P);
  check(kCmd, cuda::create_group(c.P, c.devs.data(), co, c.p2p.data()));
  co.transport = cuda::Transport::kNccl;
  c.ncclt.resize(c.P);
  check(kCmd, cuda::create_group(c.P, c.devs.data(), co, c.ncclt.data()));
  c.states.resize(c.P);
  for (int r = 0; r < c.P; ++r) check(kCmd, cuda::create_compensator(c.p2p[r], max_count, &c.states[r]));

  // Load the idle kernel now: a first launch inside the timed loops could synchronize a device.
  for (int r = 0; r < c.P; ++r) {
    cudaSetDevice(c.devs[r]);
    check(kCmd, cuda::bench::spin(1.0, nullptr));
    cuda_ok(cudaDeviceSynchronize(), "spin");
  }
  std::cout << head.str();
  measure_links(c, std::cout);
  Background bg;
  bg.start(c.devs, opt.duty);
  const int top_rows = matmul_max_rows(opt);
  const double matmul_ms =
      median(time_loop(c, 3, std::max(10, opt.iters / 2), [&](int r) { run_matmul(c, r, top_rows); }));
  std::cout << "# matmul " << (opt.mm_m > 0 ? std::to_string(opt.mm_m) : "(count / " + std::to_string(opt.mm_k) + ", 1.." +
                                                                          std::to_string(kMatmulMaxRows) + ")")
            << "x" << opt.mm_n << "x" << opt.mm_k << " bf16, alone at " << top_rows << " rows: " << fmt(matmul_ms * 1e3, 1)
            << " us at the start (the compensated rows subtract the matmul alone measured right after each of them)\n";
  const std::string cols = "| row | size (B) | count | type | time (us) | algbw (GB/s) | busbw (GB/s) | #wrong | speedup | rel. error |";
  std::ostringstream table;
  table << cols << "\n|---|---:|---:|---|---:|---:|---:|---:|---:|---:|\n";
  std::cout << cols << std::endl;
  for (std::size_t bytes = opt.min_bytes; bytes <= opt.max_bytes; bytes *= opt.factor) {
    const std::size_t count = bytes / 2;
    prepare_inputs(c, count);
    double nccl_ms = 0;
    for (const RowSpec& row : rows) {
      const Measured m = run_row(c, row, count);
      if (row.nccl_baseline) nccl_ms = m.ms;
      const double algbw = bytes / (m.ms * 1e-3) / 1e9;
      const double busbw = algbw * 2.0 * (c.P - 1) / c.P;
      std::ostringstream line;
      line << "| " << row.name << " | " << bytes << " | " << count << " | bf16 | " << fmt(m.ms * 1e3, 1) << " | "
           << fmt(algbw, 1) << " | " << fmt(busbw, 1) << " | " << (opt.skip_verify ? std::string("-") : std::to_string(m.v.wrong))
           << " | " << (nccl_ms > 0 ? fmt(nccl_ms / m.ms, 2) + "x" : std::string("-")) << " | "
           << (opt.skip_verify ? std::string("-") : fmt(m.v.rel_error, 6)) << " |";
      std::cout << line.str() << std::endl;
      table << line.str() << "\n";
    }
  }
  bg.stop();
  if (!opt.markdown.empty()) {
    std::ofstream md(opt.markdown, std::ios::app);
    if (!md) fail(kCmd, kExitBadInput, "cannot write " + opt.markdown);
    md << "\n" << head.str() << "\n" << table.str();
  }
  for (int r = 0; r < c.P; ++r) {
    cudaSetDevice(c.devs[r]);
    cudaDeviceSynchronize();
    cuda::destroy_compensator(c.states[r]);
    cuda::destroy(c.p2p[r]);
    cuda::destroy(c.ncclt[r]);
    ncclCommDestroy(c.nccl[r]);
    cuda::bench::matmul_destroy(c.mm[r]);
    cudaFree(c.in[r]);
    cudaFree(c.out[r]);
  }
}

}  // namespace

void register_bench(CLI::App& app) {
  auto opt = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(kCmd, "Echo all-reduce against NCCL on the GPUs present (nccl-tests columns)");
  sub->add_option("--ranks", opt->ranks, "ranks, one per GPU (default: every GPU, at most 8)");
  sub->add_option("-b,--min-bytes", opt->min_bytes, "smallest message in bytes of bf16")->capture_default_str();
  sub->add_option("-e,--max-bytes", opt->max_bytes, "largest message in bytes of bf16")->capture_default_str();
  sub->add_option("-f,--factor", opt->factor, "size multiplier between rows")->capture_default_str()->check(CLI::Range(2, 1024));
  sub->add_option("-n,--iters", opt->iters, "timed iterations per row (median)")->capture_default_str()->check(CLI::Range(1, 100000));
  sub->add_option("-w,--warmup", opt->warmup, "warm-up iterations per row")->capture_default_str();
  sub->add_option("--rows", opt->rows,
                  "rows to run: nccl-bf16 nccl-t8 nccl-t4 echo8 echo4 echo4-comp-global echo4-comp-local "
                  "echo4-comp-global-alone echo4-comp-local-alone echo4-comp-global-bf16 echo4-comp-local-bf16 "
                  "echo4-comp-global-bf16-matmul echo4-comp-local-bf16-matmul echo4-quant exact (default: all; "
                  "the -bf16 rows time the compensated call alone with bf16 state, the -bf16-matmul rows with "
                  "bf16 state as the paper does, matmul + all-reduce minus the matmul alone)");
  sub->add_option("--background-duty", opt->duty, "fraction of time each GPU copies to the next one (0: off)")
      ->capture_default_str()->check(CLI::Range(0.0, 1.0));
  sub->add_option("--matmul-m", opt->mm_m,
                  "rows of the overlapped bf16 matmul (0: the message's tokens, count / matmul-k, at most 8192)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--matmul-n", opt->mm_n, "columns of the overlapped bf16 matmul")->capture_default_str();
  sub->add_option("--matmul-k", opt->mm_k, "inner size of the overlapped bf16 matmul")->capture_default_str();
  sub->add_option("--markdown", opt->markdown, "append the table (with date, GPU, driver) to this file");
  sub->add_option("--tiles-per-sqrt-iteration", opt->tiles_per_sqrt,
                  "tiling of the Echo kernels: about this many tiles times the square root of a segment's "
                  "block iterations (0: default, 16 for 4 bits and 24 for 8)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--tiles-per-wave", opt->tiles_per_wave,
                  "tiling of the Echo kernels by tiles per wave of resident jobs instead (0: the square-root rule)");
  sub->add_option("--reduce-lag-waves", opt->reduce_lag_waves,
                  "waves of resident jobs between a tile's push and its reduce (0: default, 3)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--tail-lag-waves", opt->tail_lag_waves,
                  "waves of resident jobs between a tile's reduce and its tail (0: default, 3)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--exact-max-count", opt->exact_max,
                  "the Echo rows' exact-path limit in elements, for rows that do not fix their own "
                  "(echo4-quant, exact, nccl-t*); default: the library's default for P ranks")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--split-tail-min-count", opt->split_tail_min,
                  "messages of at least this many elements run the compensated local-residual kernels in "
                  "their split form, the tail in a kernel of its own (0: at every size)")
      ->capture_default_str();
  sub->add_option("--slot-mib", opt->slot_mib, "receive slot per source in MiB (0: the library's default for P ranks)")
      ->capture_default_str();
  sub->add_flag("--skip-verify", opt->skip_verify, "skip the #wrong and error columns (faster)");
  sub->add_option("--graph", opt->graph,
                  "time every row from CUDA graphs of this many calls per rank, replayed --iters times, "
                  "instead of one launch per call (0: plain launches; the rows with a matmul are left out)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  sub->callback([opt] { run_bench(*opt); });
}

}  // namespace echo::cli
