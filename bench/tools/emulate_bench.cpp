// Speed of the one-GPU emulation (echo/cuda/emulate.h) against a device-to-device copy of the same
// memory traffic, measured in the same run: medians of CUDA-event-timed calls after warm-up.
//   echo_cuda_emulate_bench [elements] [ranks] [bits] [compensator] [dtype] [iterations] [options]
// Defaults: 16777216 elements per rank, 4 ranks, 4 bits, dual, bf16, 50 iterations, no options (the
// speed goal of docs/performance.md). compensator: off, single, dual (global residual, fp32 state),
// dual-local, dual-bf16 (global, bf16 state), dual-local-bf16, deficit (docs/numerics.md 6.2: units
// 'stream', local residual, gains 'sum', fp32 state; without a stream option a site without a
// post-norm). options: none (overflow-groups
// poison, no rotation: the kernel without the options' code), wide (overflow-groups wide, the
// default spec's; the data stays below the fp16 scale limit, so this is the cost of the variant
// alone), rotation (Hadamard, poison), wide-rotation (docs/numerics.md 2.4, 2.6), stream
// (compensator units 'stream' at a post-norm site of rows of kStreamRow elements, weights
// 1 + 0.75 sin(0.37 j): the rows' gains kernel, then the main kernel in the rotation's
// instantiation, which serves the units), stream-sqrt-clip (the same with profile 'sqrt' and clip
// 1, numerics 6.1 steps 6 and 7). The traffic counted is what the kernel must move: every rank's
// input read, the output written, and every rank's averages read and written (the stream units'
// second read of the inputs, for the rows' RMS, is not counted: it is their cost); the copy moves
// half that many bytes (each read once and written once).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "echo/cuda/emulate.h"
#include "echo/dtype.h"
#include "echo/site.h"

using namespace echo;

namespace {

constexpr const char* kUsage =
    "usage: echo_cuda_emulate_bench [elements] [ranks] [bits] [compensator] [dtype] [iterations] [options]\n"
    "  compensator: off, single, dual, dual-local, dual-bf16, dual-local-bf16, deficit\n"
    "  dtype: bf16, fp16, fp32\n"
    "  options: none, wide, rotation, wide-rotation, stream, stream-sqrt-clip\n";

// The post-norm's width in the stream options (elements divides it: rows of the message).
constexpr std::size_t kStreamRow = 1024;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "echo_cuda_emulate_bench: %s\n", what.c_str());
  std::exit(1);
}
void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail(std::string(what) + ": " + cudaGetErrorString(e));
}
void ok(const Status& s, const char* what) {
  if (!s.ok()) fail(std::string(what) + ": " + s.message());
}

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr, "echo_cuda_emulate_bench: %s\n%s", what.c_str(), kUsage);
  std::exit(2);
}

long long number(int argc, char** argv, int i, long long fallback, long long lo, long long hi, const char* name) {
  if (argc <= i) return fallback;
  char* end = nullptr;
  const long long v = std::strtoll(argv[i], &end, 10);
  if (end == argv[i] || *end != '\0' || v < lo || v > hi) {
    usage_error(std::string(name) + " must be a whole number in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                "], got '" + argv[i] + "'");
  }
  return v;
}

CompensatorSpec compensator_of(const std::string& name) {
  CompensatorSpec c;
  if (name == "off") {
    c.mode = CompensatorMode::kOff;
  } else if (name == "single") {
    c.mode = CompensatorMode::kSingle;
  } else if (name == "dual" || name == "dual-local" || name == "dual-bf16" || name == "dual-local-bf16") {
    c.mode = CompensatorMode::kDual;
    c.residual = name.find("local") != std::string::npos ? ResidualMode::kLocal : ResidualMode::kGlobal;
    c.state_dtype = name.find("bf16") != std::string::npos ? DType::kBFloat16 : DType::kFloat32;
  } else if (name == "deficit") {
    c.mode = CompensatorMode::kDeficit;
    c.residual = ResidualMode::kLocal;
    c.units = CompensatorUnits::kStream;
    c.gains = CompensatorGains::kSum;
  } else {
    usage_error("unknown compensator '" + name + "'");
  }
  return c;
}

// Median of the times of `iterations` launches of `op`, each between two events, after `warmup`.
template <typename Op>
double median_ms(int warmup, int iterations, cudaStream_t stream, Op op) {
  for (int i = 0; i < warmup; ++i) op();
  ok(cudaStreamSynchronize(stream), "warm-up");
  std::vector<cudaEvent_t> ev(2 * static_cast<std::size_t>(iterations));
  for (cudaEvent_t& e : ev) ok(cudaEventCreate(&e), "cudaEventCreate");
  for (int i = 0; i < iterations; ++i) {
    ok(cudaEventRecord(ev[2 * i], stream), "cudaEventRecord");
    op();
    ok(cudaEventRecord(ev[2 * i + 1], stream), "cudaEventRecord");
  }
  ok(cudaStreamSynchronize(stream), "timed calls");
  std::vector<double> ms(iterations);
  for (int i = 0; i < iterations; ++i) {
    float t = 0.0f;
    ok(cudaEventElapsedTime(&t, ev[2 * i], ev[2 * i + 1]), "cudaEventElapsedTime");
    ms[i] = t;
  }
  for (cudaEvent_t e : ev) cudaEventDestroy(e);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && (std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help")) {
    std::printf("%s", kUsage);
    return 0;
  }
  const auto n = static_cast<std::size_t>(number(argc, argv, 1, 1LL << 24, 1, 1LL << 31, "elements"));
  const int P = static_cast<int>(number(argc, argv, 2, 4, 1, 8, "ranks"));
  const int bits = static_cast<int>(number(argc, argv, 3, 4, 2, 8, "bits"));
  const std::string comp_name = argc > 4 ? argv[4] : "dual";
  const std::string dtype_arg = argc > 5 ? argv[5] : "bf16";
  const int iterations = static_cast<int>(number(argc, argv, 6, 50, 1, 100000, "iterations"));
  const std::string options = argc > 7 ? argv[7] : "none";
  if (options != "none" && options != "wide" && options != "rotation" && options != "wide-rotation" &&
      options != "stream" && options != "stream-sqrt-clip") {
    usage_error("unknown options '" + options + "'");
  }
  const bool stream_units = options.rfind("stream", 0) == 0;
  if (stream_units && n % kStreamRow != 0) {
    usage_error("the stream options need elements divisible by " + std::to_string(kStreamRow) + ", got " +
                std::to_string(n));
  }
  const auto dtype = parse_dtype(dtype_arg);
  if (!dtype) usage_error("unknown dtype '" + dtype_arg + "'");

  AllReduceSpec spec;
  spec.dtype = *dtype;
  spec.quant.bits = bits;
  spec.compensator = compensator_of(comp_name);
  spec.quant.overflow = options.find("wide") != std::string::npos ? OverflowGroups::kWide : OverflowGroups::kPoison;
  if (options.find("rotation") != std::string::npos) spec.quant.rotation = Rotation::kHadamard;
  if (stream_units) spec.compensator.units = CompensatorUnits::kStream;
  if (options == "stream-sqrt-clip") {
    spec.compensator.profile = CompensatorProfile::kSqrt;
    spec.compensator.clip = 1.0f;
  }
  const std::size_t es = dtype_size(spec.dtype);

  cudaStream_t stream;
  ok(cudaStreamCreate(&stream), "cudaStreamCreate");
  std::vector<float> host(static_cast<std::size_t>(P) * n);
  std::mt19937 rng(12345);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : host) v = normal(rng);
  std::vector<unsigned char> bits_in(host.size() * es);
  for (std::size_t i = 0; i < host.size(); ++i) {
    if (spec.dtype == DType::kFloat32) {
      std::memcpy(&bits_in[4 * i], &host[i], 4);
    } else {
      const std::uint16_t h = spec.dtype == DType::kBFloat16 ? float_to_bfloat16_bits(host[i]) : float_to_half_bits(host[i]);
      std::memcpy(&bits_in[2 * i], &h, 2);
    }
  }
  cuda::EmulateArguments args;
  args.spec = spec;
  args.ranks = P;
  args.count = n;
  void* parts = nullptr;
  void* out = nullptr;
  void* workspace = nullptr;
  void* state = nullptr;
  ok(cudaMalloc(&parts, bits_in.size()), "cudaMalloc parts");
  ok(cudaMalloc(&out, n * es), "cudaMalloc out");
  ok(cudaMalloc(&workspace, cuda::emulate_workspace_bytes()), "cudaMalloc workspace");
  ok(cudaMemcpy(parts, bits_in.data(), bits_in.size(), cudaMemcpyHostToDevice), "upload");
  args.parts = parts;
  args.out = out;
  args.workspace = workspace;
  void* gains = nullptr;
  void* weights = nullptr;
  void* ratios = nullptr;
  if (stream_units) {
    std::vector<float> w(kStreamRow);
    for (std::size_t j = 0; j < w.size(); ++j) w[j] = 1.0f + 0.75f * std::sin(0.37f * static_cast<float>(j));
    args.site = post_norm_site(w);
    args.gains_bytes = cuda::emulate_gains_bytes(spec, P, n, args.site);
    ok(cudaMalloc(&gains, args.gains_bytes), "cudaMalloc gains");
    ok(cudaMalloc(&weights, w.size() * 4), "cudaMalloc weights");
    ok(cudaMemcpy(weights, w.data(), w.size() * 4, cudaMemcpyHostToDevice), "upload weights");
    args.gains = gains;
    args.weights = static_cast<const float*>(weights);
    // Gains 'sum' (compensator deficit): every call at an attention site, its row ratios kept.
    args.site.kind = SiteKind::kAttention;
    args.ratios_bytes = cuda::emulate_ratios_bytes(spec, P, n, args.site);
    if (args.ratios_bytes != 0) {
      ok(cudaMalloc(&ratios, args.ratios_bytes), "cudaMalloc ratios");
      args.ratios = ratios;
    }
  }
  args.state_bytes = cuda::emulate_state_bytes(spec, P, n);
  if (args.state_bytes != 0) {
    ok(cudaMalloc(&state, args.state_bytes), "cudaMalloc state");
    ok(cuda::emulate_reset_state(state, args.state_bytes, stream), "emulate_reset_state");
    args.state = state;
  }
  ok(cuda::emulate_can_implement(args), "emulate_can_implement");

  // The kernel's traffic: inputs read, output written, averages read and written.
  const bool comp = spec.compensator.mode != CompensatorMode::kOff;
  const std::size_t averages = spec.compensator.mode == CompensatorMode::kDual ? 2 : 1;
  const std::size_t state_es = spec.compensator.state_dtype == DType::kBFloat16 ? 2 : 4;
  const double traffic = static_cast<double>(P) * n * es + static_cast<double>(n) * es +
                         (comp ? 2.0 * P * n * state_es * averages : 0.0);
  const auto copy_bytes = static_cast<std::size_t>(traffic / 2);
  void* copy_src = nullptr;
  void* copy_dst = nullptr;
  ok(cudaMalloc(&copy_src, copy_bytes), "cudaMalloc copy source");
  ok(cudaMalloc(&copy_dst, copy_bytes), "cudaMalloc copy destination");
  ok(cudaMemsetAsync(copy_src, 1, copy_bytes, stream), "cudaMemsetAsync");

  const int warmup = 10;
  const double copy_ms = median_ms(warmup, iterations, stream, [&] {
    ok(cudaMemcpyAsync(copy_dst, copy_src, copy_bytes, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync");
  });
  const double emu_ms = median_ms(warmup, iterations, stream, [&] { ok(cuda::emulate_allreduce(args, stream), "emulate_allreduce"); });
  const double copy_again_ms = median_ms(warmup, iterations, stream, [&] {
    ok(cudaMemcpyAsync(copy_dst, copy_src, copy_bytes, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync");
  });
  AllReduceReport report;
  ok(cuda::emulate_read_report(workspace, stream, &report), "emulate_read_report");

  const double copy_best = std::min(copy_ms, copy_again_ms);  // the copy's speed, timed before and after
  const double emu_gbs = traffic / (emu_ms * 1e-3) / 1e9;
  const double copy_gbs = 2.0 * static_cast<double>(copy_bytes) / (copy_best * 1e-3) / 1e9;
  cudaDeviceProp prop{};
  int device = 0;
  ok(cudaGetDevice(&device), "cudaGetDevice");
  ok(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  std::printf("device: %s\n", prop.name);
  std::printf("emulation: P=%d n=%zu %s, %d-bit, group %d, %s, compensator %s (%s residual, %s state, units %s, "
              "profile %s, clip %g), overflow-groups %s, rotation %s, %d iterations\n",
              P, n, dtype_name(spec.dtype), bits, spec.quant.group, quantizer_name(spec.quant.kind),
              compensator_mode_name(spec.compensator.mode), residual_mode_name(spec.compensator.residual),
              dtype_name(spec.compensator.state_dtype), compensator_units_name(spec.compensator.units),
              compensator_profile_name(spec.compensator.profile), static_cast<double>(spec.compensator.clip),
              overflow_groups_name(spec.quant.overflow), rotation_name(spec.quant.rotation), iterations);
  std::printf("emulation median %.4f ms, traffic %.3f GB: %.1f GB/s (poisoned groups %zu)\n", emu_ms, traffic / 1e9,
              emu_gbs, report.poisoned_groups);
  std::printf("d2d copy median %.4f ms before, %.4f ms after, %.3f GB copied: %.1f GB/s (read + write)\n", copy_ms,
              copy_again_ms, copy_bytes / 1e9, copy_gbs);
  std::printf("ratio %.3f of the copy's bandwidth (goal >= 0.60)\n", emu_gbs / copy_gbs);
  cudaFree(parts);
  cudaFree(out);
  cudaFree(workspace);
  cudaFree(state);
  cudaFree(copy_src);
  cudaFree(copy_dst);
  cudaFree(gains);
  cudaFree(weights);
  cudaFree(ratios);
  cudaStreamDestroy(stream);
  return 0;
}
