// Throughput of the CPU reference: the quantize+dequantize round trip and one simulated P = 4
// all-reduce, with 1 and with all OpenMP threads. Medians over repeats after a warm-up.
//
//   build/bin/echo_bench_reference [elements]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "echo/allreduce.h"
#include "echo/quantizer.h"

namespace {

double median_seconds(const std::function<void()>& body, int repeats) {
  // Warm-up: the first calls also pay page faults until the allocator reuses its large blocks.
  for (int i = 0; i < 3; ++i) body();
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    body();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::vector<float> random_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (1u << 22);
  const int max_threads = omp_get_max_threads();
  std::printf("elements per rank: %zu, OpenMP threads available: %d\n", n, max_threads);
  std::printf("%-44s %8s %12s %14s\n", "benchmark", "threads", "median ms", "G elements/s");

  const std::vector<float> x = random_values(n, 1);
  std::vector<float> y(n);
  for (int threads : {1, max_threads}) {
    omp_set_num_threads(threads);
    for (int bits : {4, 8}) {
      echo::QuantSpec spec{bits, 128, echo::QuantizerKind::kZeroAware};
      const double s = median_seconds([&] { echo::quantize_dequantize(spec, x.data(), n, y.data()); }, 9);
      char name[64];
      std::snprintf(name, sizeof name, "quantize+dequantize %d-bit zero-aware g=128", bits);
      std::printf("%-44s %8d %12.3f %14.3f\n", name, threads, s * 1e3, n / s * 1e-9);
    }
    const int ranks = 4;
    std::vector<std::vector<float>> in(ranks), out(ranks, std::vector<float>(n));
    std::vector<const float*> in_ptr(ranks);
    std::vector<float*> out_ptr(ranks);
    for (int r = 0; r < ranks; ++r) {
      in[r] = random_values(n, 10 + r);
      in_ptr[r] = in[r].data();
      out_ptr[r] = out[r].data();
    }
    for (echo::CompensatorMode mode : {echo::CompensatorMode::kOff, echo::CompensatorMode::kDual}) {
      echo::AllReduceSpec spec;
      spec.compensator.mode = mode;
      std::vector<echo::CompensatorState> states(ranks);
      echo::AllReduceWorkspace workspace;
      const double s = median_seconds([&] {
        echo::allreduce(spec, ranks, n, in_ptr.data(), out_ptr.data(), states.data(), nullptr, nullptr, &workspace);
      }, 5);
      char name[64];
      std::snprintf(name, sizeof name, "all-reduce P=4 bf16 4-bit, compensator %s",
                    echo::compensator_mode_name(mode));
      std::printf("%-44s %8d %12.3f %14.3f\n", name, threads, s * 1e3, ranks * n / s * 1e-9);
    }
  }
  return 0;
}
