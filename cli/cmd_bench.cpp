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
// dominates below a few hundred KiB. --markdown and --csv append the table to a file
// (data/bench/README.md names the CSV's columns).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "echo/cuda/bench_support.h"
#include "echo/cuda/communicator.h"
#include "echo/cuda/power_monitor.h"
#include "echo/text_output.h"

namespace echo::cli {
namespace {

namespace fs = std::filesystem;

const char* kCmd = "bench";

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail(kCmd, kExitFailure, std::string(what) + ": " + cudaGetErrorString(e));
}
void nccl_ok(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) fail(kCmd, kExitFailure, std::string(what) + ": " + ncclGetErrorString(r));
}

void use_device(int device) { cuda_ok(cudaSetDevice(device), "cudaSetDevice"); }

// Runs body(r) on one host thread per rank. fail() throws, and an exception may not leave a
// thread: the first one is rethrown here once every thread has ended, so an error on one rank
// ends the command with its message (the other ranks' peer waits time out in the library).
void on_every_rank(int ranks, const std::function<void(int)>& body) {
  std::vector<std::exception_ptr> errors(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
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
  std::string csv;
  int tiles_per_wave = 0;
  double tiles_per_sqrt = 0.0;
  int reduce_lag_waves = 0, tail_lag_waves = 0;
  std::size_t slot_mib = 0;
  long long exact_max = -1;  // the Echo rows' exact-path limit; -1: the library default
  std::size_t split_tail_min = cuda::kDefaultSplitTailMinCount;
  bool skip_verify = false;
  int graph = 0;  // calls per CUDA graph (0: one launch per call)
  double settle_below = 0.5;    // a row starts once every GPU draws at most this share of its power limit
  double settle_max_s = 10.0;   // ... or after this many seconds
};

// Background peer-to-peer load: every GPU copies to the next one for `duty` of the time. Buffers,
// streams and each copy's calibration are set up, and checked, before start() returns; a copy that
// fails later ends its loop, and stop() reports it (the rows timed meanwhile ran without the load).
class Background {
 public:
  ~Background() { halt(); }
  void start(const std::vector<int>& devs, double duty) {
    if (duty <= 0.0 || devs.size() < 2) return;
    lanes_.resize(devs.size());
    for (std::size_t g = 0; g < devs.size(); ++g) {
      Lane& l = lanes_[g];
      l.src = devs[g];
      l.dst = devs[(g + 1) % devs.size()];
      cuda_ok(cudaSetDevice(l.dst), "background: cudaSetDevice");
      cuda_ok(cudaMalloc(&l.b, kBytes), "background: cudaMalloc");
      cuda_ok(cudaSetDevice(l.src), "background: cudaSetDevice");
      cuda_ok(cudaMalloc(&l.a, kBytes), "background: cudaMalloc");
      cuda_ok(cudaStreamCreateWithFlags(&l.s, cudaStreamNonBlocking), "background: cudaStreamCreate");
      cudaEvent_t e0, e1;
      cuda_ok(cudaEventCreate(&e0), "background: cudaEventCreate");
      cuda_ok(cudaEventCreate(&e1), "background: cudaEventCreate");
      cuda_ok(cudaEventRecord(e0, l.s), "background: cudaEventRecord");
      cuda_ok(cudaMemcpyPeerAsync(l.b, l.dst, l.a, l.src, kBytes, l.s), "background: cudaMemcpyPeerAsync");
      cuda_ok(cudaEventRecord(e1, l.s), "background: cudaEventRecord");
      cuda_ok(cudaEventSynchronize(e1), "background: calibration copy");
      float ms = 0;
      cuda_ok(cudaEventElapsedTime(&ms, e0, e1), "background: cudaEventElapsedTime");
      cuda_ok(cudaEventDestroy(e0), "background: cudaEventDestroy");
      cuda_ok(cudaEventDestroy(e1), "background: cudaEventDestroy");
      l.idle_us = ms * 1e3 * (1.0 - duty) / duty;
    }
    stop_ = false;
    for (Lane& l : lanes_) threads_.emplace_back([this, &l] { loop(l); });
  }
  // Ends the copy loops; fails if one of them hit an error.
  void stop() {
    halt();
    if (!error_.empty()) fail(kCmd, kExitFailure, error_);
  }

 private:
  static constexpr std::size_t kBytes = 64 << 20;
  struct Lane {
    int src = 0, dst = 0;
    void *a = nullptr, *b = nullptr;
    cudaStream_t s = nullptr;
    double idle_us = 0;
  };

  void loop(const Lane& l) {
    cudaError_t e = cudaSetDevice(l.src);
    std::string what = "cudaSetDevice";
    while (e == cudaSuccess && !stop_) {
      for (int k = 0; k < 4 && e == cudaSuccess; ++k) {
        e = cudaMemcpyPeerAsync(l.b, l.dst, l.a, l.src, kBytes, l.s);
        what = "cudaMemcpyPeerAsync";
        if (e == cudaSuccess && l.idle_us > 1.0) {
          const Status st = cuda::bench::spin(l.idle_us, l.s);
          if (!st.ok()) {
            record("background: GPU " + std::to_string(l.src) + ": idle kernel: " + st.message());
            return;
          }
        }
      }
      if (e == cudaSuccess) {
        e = cudaStreamSynchronize(l.s);
        what = "copy";
      }
    }
    if (e != cudaSuccess) {
      record("background: GPU " + std::to_string(l.src) + " -> " + std::to_string(l.dst) + ": " + what + ": " +
             cudaGetErrorString(e));
    }
  }
  void record(const std::string& message) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_.empty()) error_ = message;
  }
  // Joins the loops and frees the buffers (errors of the clean-up itself are not reported).
  void halt() {
    stop_ = true;
    for (auto& t : threads_) t.join();
    threads_.clear();
    for (Lane& l : lanes_) {
      (void)cudaSetDevice(l.src);
      if (l.s != nullptr) {
        (void)cudaStreamSynchronize(l.s);
        (void)cudaStreamDestroy(l.s);
      }
      if (l.a != nullptr) (void)cudaFree(l.a);
      if (l.b != nullptr) {
        (void)cudaSetDevice(l.dst);
        (void)cudaFree(l.b);
      }
    }
    lanes_.clear();
  }

  std::atomic<bool> stop_{false};
  std::vector<Lane> lanes_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::string error_;
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
  on_every_rank(c.P, [&](int r) {
    const std::string rank = "rank " + std::to_string(r) + ": ";
    auto ok = [&](cudaError_t e, const char* what) { cuda_ok(e, (rank + what).c_str()); };
    const cudaStream_t stream = c.streams[r];
    ok(cudaSetDevice(c.devs[r]), "cudaSetDevice");
    for (int k = 0; k < warmup; ++k) op(r);
    if (close) close(r);
    ok(cudaStreamSynchronize(stream), "warm-up calls");
    cudaGraphExec_t exec = nullptr;
    if (graph > 0) {
      const std::string what = "CUDA graph of " + std::to_string(graph) + " calls";
      cudaGraph_t g = nullptr;
      ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), (what + ", begin capture").c_str());
      for (int k = 0; k < graph; ++k) op(r);
      if (close) close(r);
      ok(cudaStreamEndCapture(stream, &g), (what + ", end capture").c_str());
      const cudaError_t e = cudaGraphInstantiate(&exec, g, 0);
      (void)cudaGraphDestroy(g);
      ok(e, (what + ", instantiate").c_str());
      ok(cudaGraphLaunch(exec, stream), (what + ", upload").c_str());  // the first launch uploads it
      ok(cudaStreamSynchronize(stream), (what + ", upload").c_str());
    }
    std::vector<cudaEvent_t> ev(iters + 1);
    for (auto& e : ev) ok(cudaEventCreate(&e), "cudaEventCreate");
    ok(cudaEventRecord(ev[0], stream), "cudaEventRecord");
    for (int k = 0; k < iters; ++k) {
      if (exec != nullptr) {
        ok(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
      } else {
        op(r);
      }
      ok(cudaEventRecord(ev[k + 1], stream), "cudaEventRecord");
    }
    ok(cudaStreamSynchronize(stream), "timed calls");
    for (int k = 0; k < iters; ++k) {
      float ms = 0;
      ok(cudaEventElapsedTime(&ms, ev[k], ev[k + 1]), "cudaEventElapsedTime");
      per[r][k] = graph > 0 ? ms / graph : ms;
    }
    for (auto& e : ev) ok(cudaEventDestroy(e), "cudaEventDestroy");
    if (exec != nullptr) ok(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
  });
  std::vector<double> worst(iters, 0.0);
  for (int r = 0; r < c.P; ++r) {
    for (int k = 0; k < iters; ++k) worst[k] = std::max(worst[k], per[r][k]);
  }
  return worst;
}

// The smallest advance of NVML's clock-limit counters listed under the table: the driver adds the
// limited time to them about every 100 ms, so a smaller advance seen across a short row may belong
// to the row before it (measured on H200: 9-87 ms across rows of 4-15 ms that followed limited ones).
constexpr unsigned long long kLimitedNoteMinNs = 100'000'000;

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
  use_device(c.devs[0]);
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
    use_device(c.devs[r]);
    check(kCmd, cuda::bench::fill_random(c.in[r], count, DType::kBFloat16, 1234 + r, nullptr));
    cuda_ok(cudaDeviceSynchronize(), "fill");
  }
  if (c.opt.skip_verify) return;
  use_device(c.devs[0]);
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
        use_device(c.devs[r]);
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

// Every rank's GPU made current and idle.
void synchronize_all(const Context& c, const char* what) {
  for (int r = 0; r < c.P; ++r) {
    use_device(c.devs[r]);
    cuda_ok(cudaDeviceSynchronize(), what);
  }
}

// Each measurement runs three times; the third is reported (the first two warm the links up).
void measure_links(Context& c, std::ostream& out) {
  if (c.P < 2) return;
  const std::size_t bytes = 256 << 20;
  std::vector<void*> src(c.P), dst(c.P * c.P, nullptr);
  for (int r = 0; r < c.P; ++r) {
    use_device(c.devs[r]);
    cuda_ok(cudaMalloc(&src[r], bytes), "link test: cudaMalloc");
    for (int q = 0; q < c.P; ++q) {
      if (q != r) cuda_ok(cudaMalloc(&dst[r * c.P + q], bytes), "link test: cudaMalloc");  // on r, written by q
    }
  }
  // Copy engines: GPU 0 to GPU 1 alone, or every GPU to all its peers at once.
  auto copies_timed = [&](bool all) {
    std::vector<std::vector<cudaStream_t>> s(c.P, std::vector<cudaStream_t>(c.P));
    for (int r = 0; r < c.P; ++r) {
      use_device(c.devs[r]);
      for (auto& x : s[r]) cuda_ok(cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking), "link test: cudaStreamCreate");
    }
    double t = 0;
    for (int rep = 0; rep < 3; ++rep) {
      synchronize_all(c, "link test");
      const auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < (all ? c.P : 1); ++r) {
        use_device(c.devs[r]);
        for (int q = 0; q < (all ? c.P : 2); ++q) {
          if (q == r) continue;
          cuda_ok(cudaMemcpyPeerAsync(dst[q * c.P + r], c.devs[q], src[r], c.devs[r], bytes, s[r][q]),
                  "link test: cudaMemcpyPeerAsync");
        }
      }
      synchronize_all(c, "link test: peer copies");
      t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    for (int r = 0; r < c.P; ++r) {
      use_device(c.devs[r]);
      for (auto& x : s[r]) cuda_ok(cudaStreamDestroy(x), "link test: cudaStreamDestroy");
    }
    return t;
  };
  const double one = copies_timed(false);
  const double all = copies_timed(true);
  // SM-driven: every GPU's kernel stores into (loads from) all its peers at once.
  auto sm_timed = [&](bool store) {
    double t = 0;
    for (int rep = 0; rep < 3; ++rep) {
      synchronize_all(c, "link test");
      const auto t0 = std::chrono::steady_clock::now();
      for (int r = 0; r < c.P; ++r) {
        use_device(c.devs[r]);
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
      synchronize_all(c, store ? "link test: peer stores" : "link test: peer loads");
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
    use_device(c.devs[r]);
    cuda_ok(cudaFree(src[r]), "link test: cudaFree");
    for (int q = 0; q < c.P; ++q) {
      if (dst[r * c.P + q]) cuda_ok(cudaFree(dst[r * c.P + q]), "link test: cudaFree");
    }
  }
}

// The CSV's columns (data/bench/README.md): nccl-tests' own, then the row's speedup and error.
constexpr char kCsvHeader[] = "row,ranks,mode,size,count,type,time,algbw,busbw,#wrong,ratio_vs_nccl,rel_error\n";

// How the run times its calls, the CSV's mode column.
std::string run_mode(const Options& opt) {
  if (opt.graph > 0) return opt.duty > 0 ? "graph+background" : "graph";
  return opt.duty > 0 ? "background" : "plain";
}

// Appends `text` to the file at `path` through a temporary file beside it and a rename
// (write_text_file_atomically), so that a failure leaves the file as it was; `header` starts a
// file that is new or empty.
void append_text(const std::string& path, const std::string& text, const std::string& header = "") {
  std::string before;
  if (fs::exists(path)) {
    std::ifstream in(path, std::ios::binary);
    before.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (!in && !in.eof()) fail(kCmd, kExitFailure, "cannot read " + path);
  }
  check(kCmd, write_text_file_atomically(path, (before.empty() ? header : before) + text));
}

void run_bench(Options opt) {
  // Everything that can be refused without a GPU is refused first.
  if (opt.min_bytes < 2 || opt.min_bytes % 2 != 0 || opt.max_bytes % 2 != 0) {
    fail(kCmd, kExitBadInput, "--min-bytes and --max-bytes must be positive multiples of 2 (bf16 elements)");
  }
  if (opt.max_bytes < opt.min_bytes) fail(kCmd, kExitBadInput, "--max-bytes is below --min-bytes");
  check_output_target(kCmd, opt.markdown, "--markdown");
  check_output_target(kCmd, opt.csv, "--csv");
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
  if (rows.empty()) fail(kCmd, kExitBadInput, "no row selected (--rows)");
  const std::size_t max_count = opt.max_bytes / 2;

  int gpus = 0;
  cuda_ok(cudaGetDeviceCount(&gpus), "cudaGetDeviceCount");
  if (gpus == 0) fail(kCmd, kExitFailure, "no CUDA device");
  Context c;
  c.opt = opt;
  c.P = opt.ranks > 0 ? opt.ranks : std::min(gpus, kMaxRanks);
  if (c.P > gpus) fail(kCmd, kExitBadInput, "bench runs one rank per GPU; --ranks exceeds the GPUs present");
  for (int r = 0; r < c.P; ++r) c.devs.push_back(r);

  cudaDeviceProp prop{};
  cuda_ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  int driver = 0;
  cuda_ok(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
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
  use_device(c.devs[0]);
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
    use_device(c.devs[r]);
    check(kCmd, cuda::bench::spin(1.0, nullptr));
    cuda_ok(cudaDeviceSynchronize(), "spin");
  }
  cuda::bench::PowerMonitor power(c.devs);
  const bool settling = opt.settle_below > 0 && power.available();
  if (settling) {
    head << "# every row starts once each GPU draws at most " << fmt(opt.settle_below * 100, 0)
         << "% of its power limit with no power or thermal clock limit active (NVML), or after "
         << fmt(opt.settle_max_s, 0) << " s\n";
  } else if (opt.settle_below > 0) {
    head << "# rows start without waiting for the GPUs' power to settle: " << power.why() << "\n";
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
  std::ostringstream table, csv;
  const std::string mode = run_mode(opt);
  table << cols << "\n|---|---:|---:|---|---:|---:|---:|---:|---:|---:|\n";
  std::cout << cols << std::endl;
  // Notes on single rows (started before the GPUs settled, clocks held down while timed), listed
  // after the table; the limited-time counters are read only where the driver keeps them.
  std::vector<std::string> notes;
  double settle_total_s = 0;
  bool counters = power.available();
  for (std::size_t bytes = opt.min_bytes; bytes <= opt.max_bytes; bytes *= opt.factor) {
    const std::size_t count = bytes / 2;
    prepare_inputs(c, count);
    double nccl_ms = 0;
    for (const RowSpec& row : rows) {
      const std::string cell = row.name + " at " + std::to_string(bytes) + " B";
      if (settling) {
        bool settled = false;
        double waited = 0;
        check(kCmd, power.settle(opt.settle_below, opt.settle_max_s, &settled, &waited));
        settle_total_s += waited;
        if (!settled) notes.push_back(cell + ": started after " + fmt(waited, 1) + " s with the GPUs not settled");
      }
      std::vector<unsigned long long> limited0, limited1;
      if (counters) {
        const Status st = power.limited_ns(&limited0);
        if (!st.ok()) {
          notes.push_back("clock-limit counters not read: " + st.message());
          counters = false;
        }
      }
      const auto t0 = std::chrono::steady_clock::now();
      const Measured m = run_row(c, row, count);
      const double row_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (counters && power.limited_ns(&limited1).ok()) {
        unsigned long long worst = 0;
        for (std::size_t g = 0; g < limited0.size(); ++g) worst = std::max(worst, limited1[g] - limited0[g]);
        if (worst >= kLimitedNoteMinNs) {
          notes.push_back(cell + ": NVML's power and thermal clock-limit counters advanced " + fmt(worst * 1e-6, 0) +
                          " ms while the row ran for " + fmt(row_s * 1e3, 0) + " ms (most limited GPU)");
        }
      }
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
      csv << row.name << "," << c.P << "," << mode << "," << bytes << "," << count << ",bf16," << fmt(m.ms * 1e3, 1)
          << "," << fmt(algbw, 1) << "," << fmt(busbw, 1) << "," << (opt.skip_verify ? std::string() : std::to_string(m.v.wrong))
          << "," << (nccl_ms > 0 ? fmt(nccl_ms / m.ms, 2) : std::string()) << ","
          << (opt.skip_verify ? std::string() : fmt(m.v.rel_error, 6)) << "\n";
    }
  }
  bg.stop();
  synchronize_all(c, "end of the run");
  if (settling) {
    notes.insert(notes.begin(), "waited " + fmt(settle_total_s, 1) + " s in all for the GPUs' power to settle before rows");
  }
  // On the terminal as comment lines; in the markdown file as a list under the table (a line
  // starting with '#' would be a heading there).
  std::string list = notes.empty() ? "" : "\n";
  for (const std::string& n : notes) {
    std::cout << "# " << n << "\n";
    list += "- " + n + "\n";
  }
  std::cout.flush();
  if (!opt.markdown.empty()) append_text(opt.markdown, "\n" + head.str() + "\n" + table.str() + list);
  if (!opt.csv.empty()) append_text(opt.csv, csv.str(), kCsvHeader);
  for (int r = 0; r < c.P; ++r) {
    use_device(c.devs[r]);
    check(kCmd, cuda::destroy_compensator(c.states[r]));
    check(kCmd, cuda::destroy(c.p2p[r]));
    check(kCmd, cuda::destroy(c.ncclt[r]));
    nccl_ok(ncclCommDestroy(c.nccl[r]), "ncclCommDestroy");
    check(kCmd, cuda::bench::matmul_destroy(c.mm[r]));
    cuda_ok(cudaFree(c.in[r]), "cudaFree");
    cuda_ok(cudaFree(c.out[r]), "cudaFree");
  }
  use_device(c.devs[0]);
  for (void* p : {static_cast<void*>(c.ref), c.scratch, static_cast<void*>(c.sums), static_cast<void*>(c.mismatches)}) {
    cuda_ok(cudaFree(p), "cudaFree");
  }
}

}  // namespace

void register_bench(CLI::App& app) {
  auto opt = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(kCmd, "Echo all-reduce against NCCL on the GPUs present (nccl-tests columns)");
  sub->add_option("--ranks", opt->ranks, "ranks, one per GPU (default: every GPU, at most 8)")
      ->check(CLI::Range(0, kMaxRanks));
  sub->add_option("-b,--min-bytes", opt->min_bytes, "smallest message in bytes of bf16")->capture_default_str();
  sub->add_option("-e,--max-bytes", opt->max_bytes, "largest message in bytes of bf16")->capture_default_str();
  sub->add_option("-f,--factor", opt->factor, "size multiplier between rows")->capture_default_str()->check(CLI::Range(2, 1024));
  sub->add_option("-n,--iters", opt->iters, "timed iterations per row (median)")->capture_default_str()->check(CLI::Range(1, 100000));
  sub->add_option("-w,--warmup", opt->warmup, "warm-up iterations per row")->capture_default_str();
  std::vector<std::string> names;
  for (const RowSpec& r : all_rows()) names.push_back(r.name);
  sub->add_option("--rows", opt->rows,
                  "rows to run (default: all; the -bf16 rows time the compensated call alone with bf16 "
                  "state, the -bf16-matmul rows with bf16 state as the paper does, matmul + all-reduce minus "
                  "the matmul alone)")
      ->check(CLI::IsMember(names));
  sub->add_option("--background-duty", opt->duty, "fraction of time each GPU copies to the next one (0: off)")
      ->capture_default_str()->check(CLI::Range(0.0, 1.0));
  sub->add_option("--matmul-m", opt->mm_m,
                  "rows of the overlapped bf16 matmul (0: the message's tokens, count / matmul-k, at most 8192)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--matmul-n", opt->mm_n, "columns of the overlapped bf16 matmul")->capture_default_str();
  sub->add_option("--matmul-k", opt->mm_k, "inner size of the overlapped bf16 matmul")->capture_default_str();
  sub->add_option("--markdown", opt->markdown, "append the table (with date, GPU, driver) to this file");
  sub->add_option("--csv", opt->csv,
                  "append the rows as CSV to this file (nccl-tests columns plus row, ranks, mode, ratio against "
                  "nccl-bf16 and error; the header starts a new file)");
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
  sub->add_option("--settle-below", opt->settle_below,
                  "start each row once every GPU draws at most this share of its power limit with no power or "
                  "thermal clock limit active (NVML; a GPU at its limit lowers its clocks, and its power reading "
                  "lags the load); 0: do not wait")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  sub->add_option("--settle-max-seconds", opt->settle_max_s, "longest wait for that before a row starts anyway")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 600.0));
  sub->add_option("--graph", opt->graph,
                  "time every row from CUDA graphs of this many calls per rank, replayed --iters times, "
                  "instead of one launch per call (0: plain launches; the rows with a matmul are left out)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000));
  sub->callback([opt] { run_bench(*opt); });
}

}  // namespace echo::cli
