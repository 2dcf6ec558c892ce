#include "timing.h"

#include <algorithm>
#include <string>

namespace echo::bench {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

Status time_loop(const Context& c, int warmup, int iters, const RankCall& op, std::vector<double>* ms, int graph,
                 const RankCall& close) {
  std::vector<std::vector<double>> per(c.P, std::vector<double>(iters));
  ECHO_TRY(on_every_rank(c.P, [&](int r) -> Status {
    const std::string rank = "rank " + std::to_string(r) + ": ";
    const cudaStream_t stream = c.stream(r);
    ECHO_BENCH_CUDA(cudaSetDevice(c.devs[r]), rank + "cudaSetDevice");
    for (int k = 0; k < warmup; ++k) ECHO_TRY(op(r));
    if (close) ECHO_TRY(close(r));
    ECHO_BENCH_CUDA(cudaStreamSynchronize(stream), rank + "warm-up calls");
    GraphExec exec;
    if (graph > 0) {
      const std::string what = rank + "CUDA graph of " + std::to_string(graph) + " calls";
      cudaGraph_t g = nullptr;
      ECHO_BENCH_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), what + ", begin capture");
      for (int k = 0; k < graph; ++k) ECHO_TRY(op(r));
      if (close) ECHO_TRY(close(r));
      ECHO_BENCH_CUDA(cudaStreamEndCapture(stream, &g), what + ", end capture");
      ECHO_TRY(exec.instantiate(g, what));
      ECHO_BENCH_CUDA(cudaGraphLaunch(exec.get(), stream), what + ", upload");  // the first launch uploads it
      ECHO_BENCH_CUDA(cudaStreamSynchronize(stream), what + ", upload");
    }
    std::vector<Event> ev(iters + 1);
    for (auto& e : ev) ECHO_TRY(e.create(rank + "timing"));
    ECHO_BENCH_CUDA(cudaEventRecord(ev[0].get(), stream), rank + "cudaEventRecord");
    for (int k = 0; k < iters; ++k) {
      if (exec.get() != nullptr) {
        ECHO_BENCH_CUDA(cudaGraphLaunch(exec.get(), stream), rank + "cudaGraphLaunch");
      } else {
        ECHO_TRY(op(r));
      }
      ECHO_BENCH_CUDA(cudaEventRecord(ev[k + 1].get(), stream), rank + "cudaEventRecord");
    }
    ECHO_BENCH_CUDA(cudaStreamSynchronize(stream), rank + "timed calls");
    for (int k = 0; k < iters; ++k) {
      float t = 0;
      ECHO_BENCH_CUDA(cudaEventElapsedTime(&t, ev[k].get(), ev[k + 1].get()), rank + "cudaEventElapsedTime");
      per[r][k] = graph > 0 ? t / graph : t;
    }
    return Status::Ok();
  }));
  ms->assign(iters, 0.0);
  for (int r = 0; r < c.P; ++r) {
    for (int k = 0; k < iters; ++k) (*ms)[k] = std::max((*ms)[k], per[r][k]);
  }
  return Status::Ok();
}

}  // namespace echo::bench
