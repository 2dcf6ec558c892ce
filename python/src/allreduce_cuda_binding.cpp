// The one-GPU emulation kernel (echo/cuda/emulate.h) over DLPack CUDA arrays: [P, n] contributions
// in, [n] out, the compensator state an opaque uint8 device array per pass direction, the report
// left on the device in a uint8 workspace. Everything is enqueued on the caller's stream.
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include <cuda_runtime_api.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include "allreduce_binding.h"
#include "arrays.h"
#include "echo/cuda/emulate.h"

namespace echotk {
namespace {

constexpr int kCuda = nb::device::cuda::value;

std::int64_t as_extent(std::size_t v) { return static_cast<std::int64_t>(v); }

// Every array on the GPU of `parts`, and that GPU the current device (the kernels run there).
void check_same_gpu(const AnyArray& parts, std::initializer_list<std::pair<const char*, const AnyArray*>> others) {
  const int device = parts.device_id();
  for (const auto& [name, a] : others) {
    if (a->device_id() != device) {
      throw nb::value_error((std::string(name) + " is on cuda:" + std::to_string(a->device_id()) +
                             " but parts is on cuda:" + std::to_string(device)).c_str());
    }
  }
  int current = 0;
  if (cudaGetDevice(&current) != cudaSuccess) {
    (void)cudaGetLastError();
    throw std::runtime_error("cudaGetDevice failed: no usable CUDA device");
  }
  if (current != device) {
    throw nb::value_error(("parts is on cuda:" + std::to_string(device) + " but the current device is cuda:" +
                           std::to_string(current) + " (use torch.cuda.device(...))").c_str());
  }
}

std::size_t state_bytes_for(const SpecHandle& h, std::size_t n) {
  return echo::cuda::emulate_state_bytes(h.spec, h.ranks, n);
}

// The call's site where its spec needs one (required_site), else a site without a post-norm.
echo::SiteInfo call_site(const echo::AllReduceSpec& spec, std::int64_t site_row, double site_weight_rms,
                         std::int64_t site_kind = -1) {
  if (!echo::needs_site(spec)) return echo::SiteInfo{};
  return *required_site(spec, site_row, site_weight_rms, site_kind);
}

// Bytes of the gains scratch of one call (echo::cuda::emulate_gains_bytes; 0 where none is needed).
std::size_t gains_bytes_for(const SpecHandle& h, const std::string& direction, std::size_t n, std::int64_t site_row,
                            double site_weight_rms) {
  echo::AllReduceSpec spec = h.spec;
  spec.direction = parse_direction(direction);
  return echo::cuda::emulate_gains_bytes(spec, h.ranks, n, call_site(spec, site_row, site_weight_rms));
}

// Bytes of the row ratios gains 'sum' keep between the calls of a pass (echo::cuda::emulate_ratios_bytes).
std::size_t ratios_bytes_for(const SpecHandle& h, const std::string& direction, std::size_t n, std::int64_t site_row,
                             double site_weight_rms) {
  echo::AllReduceSpec spec = h.spec;
  spec.direction = parse_direction(direction);
  return echo::cuda::emulate_ratios_bytes(spec, h.ranks, n, call_site(spec, site_row, site_weight_rms));
}

// One Echo all-reduce of P emulated ranks on the GPU: parts [P, n] -> out [n]. state: uint8
// [emulate_state_bytes] (empty when the compensator is off), reset first when `fresh`. workspace:
// uint8 [WORKSPACE_BYTES], receives the report. compensated: fp32 [P, n] receives x', or empty.
// site_row, site_weight_rms, site_kind: the call's site (site_of); gains: uint8 [gains_bytes]
// scratch; ratios: uint8 [ratios_bytes], the row ratios of gains 'sum' kept between calls (or None).
void allreduce_cuda(const SpecHandle& h, const std::string& direction, AnyArray parts, AnyArray out,
                    AnyArray state, bool fresh, AnyArray workspace, AnyArray compensated, std::int64_t site_row,
                    double site_weight_rms, AnyArray gains, std::optional<AnyArray> site_weights,
                    std::uintptr_t stream_handle, std::int64_t site_kind, std::optional<AnyArray> ratios) {
  // Wide groups and the rotation run in the emulation; emulate_can_implement and emulate_allreduce
  // refuse outliers sent exactly (can_implement_transport; kUnsupported, raised as RuntimeError).
  echo::cuda::EmulateArguments args;
  args.spec = h.spec;
  args.spec.direction = parse_direction(direction);
  args.ranks = h.ranks;
  const int P = h.ranks;
  check_values(parts, "parts", args.spec.dtype, {P, -1}, kCuda);
  const auto n = static_cast<std::size_t>(parts.shape(1));
  if (n == 0) throw nb::value_error("parts has no elements (shape [P, 0]); n must be >= 1");
  check_values(out, "out", args.spec.dtype, {as_extent(n)}, kCuda);
  const std::size_t state_bytes = state_bytes_for(h, n);
  check_uint8(state, "state", as_extent(state_bytes), kCuda);
  check_uint8(workspace, "workspace", as_extent(echo::cuda::emulate_workspace_bytes()), kCuda);
  const bool with_compensated = compensated.size() != 0;
  if (with_compensated) check_float32(compensated, "compensated", {P, as_extent(n)}, kCuda);
  args.site = call_site(args.spec, site_row, site_weight_rms, site_kind);
  const std::size_t gains_bytes = echo::cuda::emulate_gains_bytes(args.spec, P, n, args.site);
  check_uint8(gains, "gains", as_extent(gains_bytes), kCuda);
  check_same_gpu(parts, {{"out", &out}, {"state", &state}, {"workspace", &workspace}, {"compensated", &compensated},
                         {"gains", &gains}});
  args.gains = gains_bytes != 0 ? gains.data() : nullptr;
  args.gains_bytes = gains_bytes;
  const std::size_t ratios_bytes = echo::cuda::emulate_ratios_bytes(args.spec, P, n, args.site);
  if (ratios_bytes != 0) {
    if (!ratios) {
      throw nb::value_error("compensator_gains='sum' at a post-norm site needs the row ratios kept between calls: "
                            "pass ratios (uint8 [emulate_ratios_bytes]), as echotk.AllReduce does");
    }
    check_uint8(*ratios, "ratios", as_extent(ratios_bytes), kCuda);
    check_same_gpu(parts, {{"ratios", &*ratios}});
    args.ratios = ratios->data();
    args.ratios_bytes = ratios_bytes;
  }
  // Compensator profile 'sqrt' and compensator 'deficit' read the post-norm's weights on the device
  // (emulate_can_implement names them when they are missing).
  const bool reads_weights = args.spec.compensator.profile == echo::CompensatorProfile::kSqrt ||
                             args.spec.compensator.mode == echo::CompensatorMode::kDeficit;
  if (site_weights && args.site.has_post_norm && reads_weights) {
    check_float32(*site_weights, "site_weights", {site_row}, kCuda);
    check_same_gpu(parts, {{"site_weights", &*site_weights}});
    args.weights = static_cast<const float*>(site_weights->data());
  }

  args.count = n;
  args.parts = parts.data();
  args.out = out.data();
  args.state = state_bytes != 0 ? state.data() : nullptr;
  args.state_bytes = state_bytes;
  args.workspace = workspace.data();
  args.compensated = with_compensated ? static_cast<float*>(compensated.data()) : nullptr;
  const auto stream = reinterpret_cast<cudaStream_t>(stream_handle);

  echo::Status status;
  {
    nb::gil_scoped_release release;
    // The device-memory queries of can_implement are not stream work: skip them while a CUDA
    // graph captures the stream (emulate_allreduce repeats every other check).
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) {
      (void)cudaGetLastError();
      capture = cudaStreamCaptureStatusNone;
    }
    if (capture == cudaStreamCaptureStatusNone) status = echo::cuda::emulate_can_implement(args);
    if (status.ok() && fresh && state_bytes != 0) {
      status = echo::cuda::emulate_reset_state(args.state, state_bytes, stream);
    }
    if (status.ok()) status = echo::cuda::emulate_allreduce(args, stream);
  }
  raise_if_error(status);
}

// (poisoned groups, scale exponent, exact path) from a workspace copied to the host.
std::tuple<std::uint64_t, int, bool> report_from_workspace(AnyArray workspace) {
  check_uint8(workspace, "workspace", as_extent(echo::cuda::emulate_workspace_bytes()), nb::device::cpu::value);
  echo::cuda::EmulateDeviceReport r{};
  std::memcpy(&r, workspace.data(), sizeof r);
  return {r.poisoned_groups, r.scale_exponent, r.exact_path != 0};
}

// Rank by rank, the state's averages into host fp32 arrays m1 (and m2 in the dual mode) [P, n];
// waits for `stream`. A reset state reads as zeros.
void download_state_cuda(const SpecHandle& h, AnyArray state, std::size_t n, AnyArray m1, AnyArray m2,
                         std::uintptr_t stream_handle) {
  const std::size_t state_bytes = state_bytes_for(h, n);
  if (state_bytes == 0) throw nb::value_error("the compensator is off: there is no state");
  check_uint8(state, "state", as_extent(state_bytes), kCuda);
  const bool dual = h.spec.compensator.mode == echo::CompensatorMode::kDual;
  check_float32(m1, "m1", {h.ranks, as_extent(n)});
  if (dual) check_float32(m2, "m2", {h.ranks, as_extent(n)});
  const auto stream = reinterpret_cast<cudaStream_t>(stream_handle);
  echo::Status status;
  {
    nb::gil_scoped_release release;
    for (int r = 0; r < h.ranks && status.ok(); ++r) {
      const std::size_t row = static_cast<std::size_t>(r) * n;
      status = echo::cuda::emulate_download_state(state.data(), h.spec, h.ranks, n, r,
                                                  static_cast<float*>(m1.data()) + row,
                                                  dual ? static_cast<float*>(m2.data()) + row : nullptr, stream);
    }
  }
  raise_if_error(status);
}

}  // namespace

void register_allreduce_cuda(nb::module_& m) {
  m.def("allreduce_cuda", &allreduce_cuda, nb::arg("spec"), nb::arg("direction"), nb::arg("parts"),
        nb::arg("out"), nb::arg("state"), nb::arg("fresh"), nb::arg("workspace"), nb::arg("compensated"),
        nb::arg("site_row"), nb::arg("site_weight_rms"), nb::arg("gains"), nb::arg("site_weights").none(),
        nb::arg("stream"), nb::arg("site_kind") = -1, nb::arg("ratios").none() = nb::none(),
        "echo::cuda::emulate_allreduce of parts [P, n] into out [n] on `stream` (a cudaStream_t as an "
        "integer); state: uint8 [state_bytes], reset first when fresh; workspace: uint8 "
        "[WORKSPACE_BYTES], receives the report; compensated: fp32 [P, n] receives x', or empty; "
        "site_row, site_weight_rms: the call's site (-1: none given; 0: no post-norm); gains: uint8 "
        "[emulate_gains_bytes] scratch; site_weights: the post-norm's weights [site_row] fp32 on the GPU "
        "(compensator profile 'sqrt', compensator 'deficit'), or None; site_kind: 0 attention, 1 MLP, -1 unknown; ratios: uint8 "
        "[emulate_ratios_bytes], the row ratios compensator gains 'sum' keep between a pass's calls, or None.");
  m.def("emulate_ratios_bytes", &ratios_bytes_for, nb::arg("spec"), nb::arg("direction"), nb::arg("n"),
        nb::arg("site_row"), nb::arg("site_weight_rms"),
        "Bytes of the row ratios a pass keeps (compensator gains 'sum' at a post-norm site; else 0).");
  m.def("emulate_gains_bytes", &gains_bytes_for, nb::arg("spec"), nb::arg("direction"), nb::arg("n"),
        nb::arg("site_row"), nb::arg("site_weight_rms"),
        "Bytes of one call's gains scratch (compensator units 'stream' at a post-norm site; else 0).");
  m.def("emulate_state_bytes", &state_bytes_for, nb::arg("spec"), nb::arg("n"),
        "Bytes of one pass direction's GPU compensator state for n elements per rank (0: compensator off).");
  m.def("report_from_workspace", &report_from_workspace, nb::arg("workspace"),
        "(poisoned groups, scale exponent, exact path) from a call's workspace copied to the host.");
  m.def("download_state_cuda", &download_state_cuda, nb::arg("spec"), nb::arg("state"), nb::arg("n"),
        nb::arg("m1"), nb::arg("m2"), nb::arg("stream"),
        "A GPU state's averages into host fp32 arrays m1, m2 [P, n] (m2 in the dual mode); waits for stream.");
  m.attr("WORKSPACE_BYTES") = static_cast<int>(echo::cuda::emulate_workspace_bytes());
}

}  // namespace echotk
