// Per-job timeline of one Echo all-reduce call on the GPUs present (one rank per GPU, one host
// thread each): every job of the owner kernel with its stage, multiprocessor, start, end and time
// spent waiting on peer flags, per rank, as CSV; then a summary per rank and stage (jobs, block
// time working and waiting) against the block time the call had (grid x call length). It shows
// how well the pipeline packs the stages: the gap between the stages' sum and the call.
//   echo_cuda_job_trace [elements] [bits] [compensator] [csv] [reduce_lag_waves] [tail_lag_waves]
// compensator: off, dual, dual-bf16, global, global-bf16 (dual: local residual), as
// echo_cuda_stage_probe. Times are per GPU (each GPU's clock), from that rank's first job. The
// kernels record only in a build with -DECHO_CUDA_JOB_TRACE=ON, whose kernels spill more (the
// recording's registers), so its times run somewhat above those of a normal build.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "check.h"
#include "communicator_impl.h"
#include "compensator_name.h"
#include "echo/bench/device_ops.h"
#include "echo/cuda/communicator.h"
#include "echo/text_output.h"
#include "kernel_args.h"

using namespace echo;
using namespace echo::cuda;

namespace {

constexpr std::size_t kRecords = std::size_t{1} << 20;  // per rank: more than any call's jobs

int fail(const std::string& what, const Status& s) {
  std::fprintf(stderr, "echo_cuda_job_trace: %s: %s\n", what.c_str(), s.message().c_str());
  return 1;
}

// Runs fn(rank) on one host thread per rank and returns the first failure.
template <typename F>
Status on_every_rank(int P, F fn) {
  std::vector<Status> st(P);
  std::vector<std::thread> th;
  for (int r = 0; r < P; ++r) th.emplace_back([&, r] { st[r] = fn(r); });
  for (auto& t : th) t.join();
  for (const Status& s : st) {
    if (!s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (std::size_t{1} << 29);
  const int bits = argc > 2 ? std::atoi(argv[2]) : 4;
  const std::string comp = argc > 3 ? argv[3] : "off";
  const std::string csv_path = argc > 4 ? argv[4] : "";
  CompensatorSpec compensator;
  if (!tools::compensator_from_name(comp, &compensator)) {
    std::fprintf(stderr, "unknown compensator '%s' (%s)\n", comp.c_str(), tools::kCompensatorNames);
    return 2;
  }
  int P = 0;
  if (cudaGetDeviceCount(&P) != cudaSuccess || P < 1) {
    std::fprintf(stderr, "echo_cuda_job_trace: no CUDA device\n");
    return 1;
  }
  P = std::min(P, kMaxRanks);
  request_work_queues();
  std::vector<int> devs(P);
  for (int r = 0; r < P; ++r) devs[r] = r;
  std::vector<Communicator*> comms(P, nullptr);
  CommOptions options;
  options.reduce_lag_waves = argc > 5 ? std::atoi(argv[5]) : 0;
  options.tail_lag_waves = argc > 6 ? std::atoi(argv[6]) : 0;
  if (Status s = create_group(P, devs.data(), options, comms.data()); !s.ok()) return fail("create_group", s);

  AllReduceSpec spec;
  spec.dtype = DType::kBFloat16;
  spec.quant.bits = bits;
  spec.quant.group = 128;
  spec.quant.kind = QuantizerKind::kZeroAware;
  spec.compensator = compensator;
  spec.exact_max_count = default_exact_max_count(P, spec);
  std::vector<void*> in(P), out(P);
  std::vector<unsigned long long*> records(P);
  std::vector<CompensatorBuffers*> states(P, nullptr);
  Status s = on_every_rank(P, [&](int r) -> Status {
    if (cudaSetDevice(devs[r]) != cudaSuccess || cudaMalloc(&in[r], n * 2) != cudaSuccess ||
        cudaMalloc(&out[r], n * 2) != cudaSuccess ||
        cudaMalloc(&records[r], kRecords * kJobTraceWords * 8) != cudaSuccess) {
      return Status(StatusCode::kDeviceError, "allocation on rank " + std::to_string(r));
    }
    ECHO_TRY(bench::fill_random(in[r], n, DType::kBFloat16, 11 + r, nullptr));
    if (spec.compensator.mode != CompensatorMode::kOff) {
      ECHO_TRY(create_compensator(comms[r], n, &states[r]));
    }
    return Status::Ok();
  });
  if (!s.ok()) return fail("setup", s);

  // Three calls to warm up (and to make the state not fresh), then the traced one.
  auto call = [&](int r) -> Status {
    ECHO_TRY(allreduce(comms[r], in[r], out[r], n, spec, states[r], nullptr));
    return synchronize(comms[r], nullptr);
  };
  for (int k = 0; k < 3; ++k) {
    if (Status w = on_every_rank(P, call); !w.ok()) return fail("warm-up call", w);
  }
  std::vector<float> call_ms(P, 0.0f);
  s = on_every_rank(P, [&](int r) -> Status {
    ECHO_CUDA_CHECK(cudaSetDevice(devs[r]));
    ECHO_CUDA_CHECK(cudaMemset(records[r], 0, kRecords * kJobTraceWords * 8));
    set_job_trace(comms[r], records[r], kRecords);
    cudaEvent_t e0, e1;
    ECHO_CUDA_CHECK(cudaEventCreate(&e0));
    ECHO_CUDA_CHECK(cudaEventCreate(&e1));
    ECHO_CUDA_CHECK(cudaEventRecord(e0, nullptr));
    ECHO_TRY(allreduce(comms[r], in[r], out[r], n, spec, states[r], nullptr));
    ECHO_CUDA_CHECK(cudaEventRecord(e1, nullptr));
    ECHO_TRY(synchronize(comms[r], nullptr));
    ECHO_CUDA_CHECK(cudaEventSynchronize(e1));
    ECHO_CUDA_CHECK(cudaEventElapsedTime(&call_ms[r], e0, e1));
    ECHO_CUDA_CHECK(cudaEventDestroy(e0));
    ECHO_CUDA_CHECK(cudaEventDestroy(e1));
    set_job_trace(comms[r], nullptr, 0);
    return Status::Ok();
  });
  if (!s.ok()) return fail("traced call", s);

  // Every rank's records; a job always writes its start time, so an empty record is unused.
  std::vector<std::vector<unsigned long long>> host(P, std::vector<unsigned long long>(kRecords * kJobTraceWords));
  bool any = false;
  for (int r = 0; r < P; ++r) {
    if (cudaSetDevice(devs[r]) != cudaSuccess ||
        cudaMemcpy(host[r].data(), records[r], host[r].size() * 8, cudaMemcpyDeviceToHost) != cudaSuccess) {
      return fail("records", Status(StatusCode::kDeviceError, "copying rank " + std::to_string(r) + "'s records"));
    }
    for (std::size_t i = 0; i < kRecords && !any; ++i) any = host[r][i * kJobTraceWords + 2] != 0;
  }
  if (!any) {
    std::fprintf(stderr,
                 "echo_cuda_job_trace: no job was recorded: build with -DECHO_CUDA_JOB_TRACE=ON "
                 "(scripts/build_gpu_bundle.sh DIR -DECHO_CUDA_JOB_TRACE=ON)\n");
    return 1;
  }
  std::ostringstream csv;  // written to csv_path (temporary file, then renamed) at the end
  csv << "rank,record,job,stage,block,sm,start_us,wait_us,end_us\n";
  const char* kinds[4] = {"idle", "push", "reduce", "tail"};
  std::printf("n=%zu bits=%d compensator=%s P=%d\n", n, bits, comp.c_str(), P);
  for (int r = 0; r < P; ++r) {
    const std::vector<unsigned long long>& h = host[r];
    unsigned long long t0 = ~0ull, t1 = 0;
    for (std::size_t i = 0; i < kRecords; ++i) {
      if (h[i * kJobTraceWords + 2] == 0) continue;
      t0 = std::min(t0, h[i * kJobTraceWords + 2]);
      t1 = std::max(t1, h[i * kJobTraceWords + 3]);
    }
    double busy[4] = {}, wait[4] = {};
    long jobs[4] = {};
    std::vector<bool> sms(1024, false), blocks(1 << 16, false);
    for (std::size_t i = 0; i < kRecords; ++i) {
      const unsigned long long* w = &h[i * kJobTraceWords];
      if (w[2] == 0) continue;
      const int kind = static_cast<int>(w[0] >> 56);
      const unsigned sm = static_cast<unsigned>(w[1] >> 32);
      const unsigned block = static_cast<unsigned>((w[0] >> 32) & 0xFFFFFFu);
      if (block < blocks.size()) blocks[block] = true;
      const double wait_us = static_cast<double>(w[1] & 0xFFFFFFFFull) * 1e-3;
      const double start = static_cast<double>(w[2] - t0) * 1e-3, end = static_cast<double>(w[3] - t0) * 1e-3;
      busy[kind & 3] += end - start - wait_us;
      wait[kind & 3] += wait_us;
      ++jobs[kind & 3];
      if (sm < sms.size()) sms[sm] = true;
      if (!csv_path.empty()) {
        char line[160];
        std::snprintf(line, sizeof line, "%d,%zu,%llu,%s,%u,%u,%.3f,%.3f,%.3f\n", r, i, w[0] & 0xFFFFFFFFull,
                      kinds[kind & 3], block, sm, start, wait_us, end);
        csv << line;
      }
    }
    const double span = static_cast<double>(t1 - t0) * 1e-3;
    const long grid = static_cast<long>(std::count(blocks.begin(), blocks.end(), true));
    double used = 0;
    for (int k = 0; k < 4; ++k) used += busy[k] + wait[k];
    std::printf("rank %d: call %.1f us (events), jobs from first start to last end %.1f us, %ld blocks on %ld SMs; "
                "jobs fill %.0f%% of the blocks' time\n",
                r, call_ms[r] * 1e3, span, grid, static_cast<long>(std::count(sms.begin(), sms.end(), true)),
                grid > 0 && span > 0 ? 100.0 * used / (static_cast<double>(grid) * span) : 0.0);
    for (int k = 0; k < 4; ++k) {
      std::printf("  %-6s %6ld jobs  working %10.1f block-us  waiting on flags %10.1f block-us\n", kinds[k], jobs[k],
                  busy[k], wait[k]);
    }
  }
  if (!csv_path.empty()) {
    if (Status w = write_text_file_atomically(csv_path, csv.str()); !w.ok()) return fail("CSV " + csv_path, w);
  }
  return 0;
}
