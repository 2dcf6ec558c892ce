// Host side of the one-GPU emulation (echo/cuda/emulate.h): argument checks, the state's size and
// reset, the call's sequence on the stream, and the report and state read-back.
#include "echo/cuda/emulate.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "check.h"
#include "echo/cuda/can_implement.h"
#include "echo/site.h"
#include "communicator_impl.h"
#include "emulate_args.h"

namespace echo::cuda {
namespace {

Status invalid(const std::string& what) {
  return Status(StatusCode::kInvalidArgument, "emulate_allreduce: " + what);
}

std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

bool aligned_to(const void* p, std::size_t bytes) { return address(p) % bytes == 0; }

// Whether [a, a + an) and [b, b + bn) share a byte (null buffers share none).
bool overlaps(const void* a, std::size_t an, const void* b, std::size_t bn) {
  if (a == nullptr || b == nullptr) return false;
  return address(a) < address(b) + bn && address(b) < address(a) + an;
}

// A device buffer the call reads or writes, for the overlap and memory checks.
struct Buffer {
  const char* name;
  const void* ptr;
  std::size_t bytes;
};

// Every check that needs no CUDA call; on success `buffers` lists the call's buffers.
Status check_arguments(const EmulateArguments& a, std::vector<Buffer>* buffers) {
  if (Status s = emulate_can_implement_spec(a.spec, a.ranks); !s.ok()) {
    return Status(s.code(), "emulate_allreduce: " + s.message());
  }
  if (a.count == 0) return invalid("count must be >= 1");
  const bool deficit = a.spec.compensator.mode == CompensatorMode::kDeficit;
  const bool reads_weights = a.spec.compensator.profile == CompensatorProfile::kSqrt || deficit;
  if (needs_site(a.spec)) {
    // The kernels read the weights of profile 'sqrt' and mode 'deficit' on the device: host weights
    // are checked where given (validate_site asks for them only for those two).
    CompensatorSpec host_check = a.spec.compensator;
    if (a.site.weights.empty()) {
      host_check.profile = CompensatorProfile::kFlat;
      if (deficit) host_check.mode = CompensatorMode::kSingle;
    }
    if (Status s = validate_site(a.site, a.count, host_check); !s.ok()) return invalid(s.message());
    if (reads_weights && a.site.has_post_norm && a.weights == nullptr) {
      const std::string reader = deficit ? "compensator 'deficit'" : "compensator profile 'sqrt'";
      return invalid(reader + " at a site with a post-norm needs the norm's weights on the device "
                     "(EmulateArguments::weights, " + std::to_string(a.site.row_length) + " fp32)");
    }
  }
  const std::size_t es = dtype_size(a.spec.dtype);
  const auto ranks = static_cast<std::size_t>(a.ranks);
  // Every byte offset the kernels form (P rows of fp32 x' at most) fits in size_t.
  if (a.count > std::numeric_limits<std::size_t>::max() / 64 / ranks) {
    return invalid("count " + std::to_string(a.count) + " is too large");
  }
  if (a.parts == nullptr) return invalid("parts is null");
  if (a.out == nullptr) return invalid("out is null");
  if (a.workspace == nullptr) return invalid("workspace is null (emulate_workspace_bytes() bytes of device memory)");
  const char* dt = dtype_name(a.spec.dtype);
  if (!aligned_to(a.parts, es)) return invalid(std::string("parts is not aligned to its element type ") + dt);
  if (!aligned_to(a.out, es)) return invalid(std::string("out is not aligned to its element type ") + dt);
  if (!aligned_to(a.workspace, 16)) return invalid("workspace is not 16-byte aligned");
  if (!aligned_to(a.compensated, 4)) return invalid("compensated is not 4-byte aligned");
  const bool comp = a.spec.compensator.mode != CompensatorMode::kOff;
  const std::size_t need = emulate_state_bytes(a.spec, a.ranks, a.count);
  if (comp) {
    if (a.state == nullptr) return invalid("the compensator needs a state (emulate_state_bytes, emulate_reset_state)");
    if (!aligned_to(a.state, 16)) return invalid("state is not 16-byte aligned");
    if (a.state_bytes < need) {
      return invalid("state holds " + std::to_string(a.state_bytes) + " bytes, the call needs " + std::to_string(need) +
                     " (emulate_state_bytes for " + std::to_string(a.ranks) + " ranks of " + std::to_string(a.count) +
                     " elements)");
    }
  }
  const std::size_t gains = emulate_gains_bytes(a.spec, a.ranks, a.count, a.site);
  if (gains != 0) {
    if (a.gains == nullptr) {
      return invalid("compensator units 'stream' at a site with a post-norm need gains (emulate_gains_bytes: " +
                     std::to_string(gains) + " bytes of device memory)");
    }
    if (!aligned_to(a.gains, 8)) return invalid("gains is not 8-byte aligned");
    if (reads_weights && !aligned_to(a.weights, 4)) return invalid("weights is not 4-byte aligned");
    if (a.gains_bytes < gains) {
      return invalid("gains holds " + std::to_string(a.gains_bytes) + " bytes, the call needs " + std::to_string(gains) +
                     " (emulate_gains_bytes)");
    }
  }
  const std::size_t ratios = emulate_ratios_bytes(a.spec, a.ranks, a.count, a.site);
  if (ratios != 0) {
    if (a.ratios == nullptr) {
      return invalid("compensator gains 'sum' at a site with a post-norm need the row ratios kept between calls "
                     "(EmulateArguments::ratios, emulate_ratios_bytes: " + std::to_string(ratios) + " bytes)");
    }
    if (!aligned_to(a.ratios, 4)) return invalid("ratios is not 4-byte aligned");
    if (a.ratios_bytes < ratios) {
      return invalid("ratios holds " + std::to_string(a.ratios_bytes) + " bytes, the call needs " +
                     std::to_string(ratios) + " (emulate_ratios_bytes)");
    }
  }
  const std::size_t row_bytes = a.count * es;
  buffers->clear();
  buffers->push_back({"parts", a.parts, row_bytes * ranks});
  buffers->push_back({"out", a.out, row_bytes});
  buffers->push_back({"workspace", a.workspace, kEmulateWorkspaceBytes});
  if (comp) buffers->push_back({"state", a.state, need});
  if (a.compensated != nullptr) buffers->push_back({"compensated", a.compensated, a.count * 4 * ranks});
  if (gains != 0) buffers->push_back({"gains", a.gains, gains});
  if (gains != 0 && reads_weights) buffers->push_back({"weights", a.weights, a.site.row_length * sizeof(float)});
  if (ratios != 0) buffers->push_back({"ratios", a.ratios, ratios});
  for (std::size_t i = 0; i < buffers->size(); ++i) {
    for (std::size_t j = i + 1; j < buffers->size(); ++j) {
      const Buffer& x = (*buffers)[i];
      const Buffer& y = (*buffers)[j];
      // In place: out may be rank 0's row of parts (each element is read before it is written).
      if (x.ptr == a.parts && y.ptr == a.out && a.out == a.parts) continue;
      if (overlaps(x.ptr, x.bytes, y.ptr, y.bytes)) {
        return invalid(std::string(x.name) + " and " + y.name + " overlap");
      }
    }
  }
  return Status::Ok();
}

// Whether a buffer is device memory the current device can use (cudaPointerGetAttributes).
Status check_device_memory(const Buffer& b, int device) {
  cudaPointerAttributes attr{};
  const cudaError_t e = cudaPointerGetAttributes(&attr, b.ptr);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return invalid(std::string(b.name) + " is not CUDA memory (" + cudaGetErrorString(e) + ")");
  }
  if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) {
    return invalid(std::string(b.name) + " is not device memory");
  }
  if (attr.type == cudaMemoryTypeDevice && attr.device != device) {
    return invalid(std::string(b.name) + " lives on device " + std::to_string(attr.device) +
                   ", the current device is " + std::to_string(device));
  }
  return Status::Ok();
}

}  // namespace

Status emulate_can_implement_spec(const AllReduceSpec& spec, int ranks) {
  ECHO_TRY(spec.validate(ranks));
  if (spec.algorithm != Algorithm::kOwner) {
    return Status(StatusCode::kUnsupported,
                  "the emulation implements the owner algorithm only, not " + std::string(algorithm_name(spec.algorithm)));
  }
  return can_implement_transport(spec.quant);
}

std::size_t emulate_state_bytes(const AllReduceSpec& spec, int ranks, std::size_t count) {
  return emulate_state_layout(spec, ranks, count).total_bytes;
}

std::size_t emulate_gains_bytes(const AllReduceSpec& spec, int ranks, std::size_t count, const SiteInfo& site) {
  return emulate_gains_layout(spec, ranks, count, site).total_bytes;
}

std::size_t emulate_ratios_bytes(const AllReduceSpec& spec, int ranks, std::size_t count, const SiteInfo& site) {
  return emulate_ratios_layout_bytes(spec, ranks, count, site);
}

Status emulate_reset_state(void* state, std::size_t state_bytes, cudaStream_t stream) {
  if (state == nullptr) return invalid("emulate_reset_state: state is null");
  if (state_bytes < kEmulateStateHeaderBytes) {
    return invalid("emulate_reset_state: a state holds at least " + std::to_string(kEmulateStateHeaderBytes) +
                   " bytes, got " + std::to_string(state_bytes));
  }
  // Zero averages and the reset mark set: the next call applies no correction (empty state).
  ECHO_CUDA_CHECK(cudaMemsetAsync(state, 0, state_bytes, stream));
  ECHO_CUDA_CHECK(cudaMemsetAsync(state, 0x01, 1, stream));
  return Status::Ok();
}

Status emulate_can_implement(const EmulateArguments& args) {
  std::vector<Buffer> buffers;
  ECHO_TRY(check_arguments(args, &buffers));
  int device = 0;
  ECHO_CUDA_CHECK(cudaGetDevice(&device));
  for (const Buffer& b : buffers) ECHO_TRY(check_device_memory(b, device));
  return Status::Ok();
}

Status emulate_allreduce(const EmulateArguments& args, cudaStream_t stream) {
  std::vector<Buffer> buffers;
  ECHO_TRY(check_arguments(args, &buffers));
  const AllReduceSpec& spec = args.spec;
  const Segmentation seg(args.count, spec.quant.group, args.ranks);
  EmulateParams p{};
  p.ranks = args.ranks;
  p.bits = spec.quant.bits;
  p.group = spec.quant.group;
  while ((1 << p.group_shift) < p.group) ++p.group_shift;
  p.kind = spec.quant.kind;
  p.count = args.count;
  p.groups_per_segment = seg.groups_per_segment;
  p.parts = args.parts;
  p.out = args.out;
  p.compensated = args.compensated;
  set_compensator_args(spec.compensator, &p.comp);
  const bool comp = spec.compensator.mode != CompensatorMode::kOff;
  if (comp) {
    const EmulateStateLayout layout = emulate_state_layout(spec, args.ranks, args.count);
    char* base = static_cast<char*>(args.state);
    p.comp.fresh = reinterpret_cast<int*>(base);
    p.comp.m1 = reinterpret_cast<float*>(base + layout.m1_offset);
    p.comp.m2 = layout.m2_offset != 0 ? reinterpret_cast<float*>(base + layout.m2_offset) : nullptr;
    p.state_stride = layout.stride;
  }
  p.backward = spec.direction == Direction::kBackward;
  p.exact_rounds = exact_path_rounds_x_prime(spec);
  p.wide_groups = spec.quant.overflow == OverflowGroups::kWide;
  p.rotate = spec.quant.rotation == Rotation::kHadamard;
  p.report = static_cast<EmulateDeviceReport*>(args.workspace);
  const EmulateGainsLayout gains = emulate_gains_layout(spec, args.ranks, args.count, args.site);
  if (gains.total_bytes != 0) {
    char* scratch = static_cast<char*>(args.gains);
    p.stream_gains = reinterpret_cast<numerics::StreamGains*>(scratch);
    p.row_length = args.site.row_length;
    p.stream_rows = args.count / args.site.row_length;
    p.weight_rms = args.site.weight_rms;
    p.clip = spec.compensator.clip;
    p.clip_bounds = gains.bounds_offset != 0 ? reinterpret_cast<float*>(scratch + gains.bounds_offset) : nullptr;
    // The per-feature terms: profile 'sqrt''s factors or mode 'deficit''s floored weights (the mode
    // runs with profile 'flat' only).
    float* per_feature = gains.factors_offset != 0 ? reinterpret_cast<float*>(scratch + gains.factors_offset) : nullptr;
    const bool deficit = spec.compensator.mode == CompensatorMode::kDeficit;
    p.profile_factors = deficit ? nullptr : per_feature;
    p.deficit_weights = deficit ? per_feature : nullptr;
    p.weights = per_feature != nullptr ? args.weights : nullptr;
    if (gains.own_rms_offset != 0) {
      p.own_rms = reinterpret_cast<float*>(scratch + gains.own_rms_offset);
      p.sum_residuals = reinterpret_cast<float*>(scratch + gains.residuals_offset);
      p.row_ratios = static_cast<float*>(args.ratios);
      p.ratios_held = reinterpret_cast<int*>(static_cast<char*>(args.state) + kEmulateRatiosHeldOffset);
      p.site_kind = static_cast<int>(args.site.kind);
    }
  }

  // The call's report starts from zero (poisoned count, backward max); the kernels fill it.
  ECHO_CUDA_CHECK(cudaMemsetAsync(args.workspace, 0, sizeof(EmulateDeviceReport), stream));
  if (p.backward) ECHO_CUDA_CHECK(emulate_backward_max(spec.dtype, p, stream));
  if (p.stream_gains != nullptr) ECHO_CUDA_CHECK(emulate_stream_gains(spec.dtype, p, stream));
  ECHO_CUDA_CHECK(emulate_main(spec.dtype, args.count <= spec.exact_max_count, p, stream));
  if (p.sum_residuals != nullptr) ECHO_CUDA_CHECK(emulate_sum_update(spec.dtype, p, stream));
  // The state now holds this call's averages: the next call applies them.
  if (comp) ECHO_CUDA_CHECK(cudaMemsetAsync(p.comp.fresh, 0, sizeof(int), stream));
  return Status::Ok();
}

Status emulate_read_report(const void* workspace, cudaStream_t stream, AllReduceReport* report) {
  if (workspace == nullptr || report == nullptr) return invalid("emulate_read_report: null workspace or report");
  EmulateDeviceReport r{};
  ECHO_CUDA_CHECK(cudaMemcpyAsync(&r, workspace, sizeof r, cudaMemcpyDeviceToHost, stream));
  ECHO_CUDA_CHECK(cudaStreamSynchronize(stream));
  report->poisoned_groups = static_cast<std::size_t>(r.poisoned_groups);
  report->scale_exponent = r.scale_exponent;
  report->exact_path = r.exact_path != 0;
  return Status::Ok();
}

Status emulate_download_state(const void* state, const AllReduceSpec& spec, int ranks, std::size_t count, int rank,
                              float* m1, float* m2, cudaStream_t stream) {
  const EmulateStateLayout layout = emulate_state_layout(spec, ranks, count);
  if (layout.total_bytes == 0) return invalid("emulate_download_state: the compensator is off (no state)");
  if (state == nullptr || m1 == nullptr) return invalid("emulate_download_state: null state or m1");
  if (rank < 0 || rank >= ranks) {
    return invalid("emulate_download_state: rank " + std::to_string(rank) + " is outside [0, " + std::to_string(ranks) + ")");
  }
  const bool dual = layout.m2_offset != 0;
  if (dual && m2 == nullptr) return invalid("emulate_download_state: the dual compensator needs m2");
  ECHO_CUDA_CHECK(cudaStreamSynchronize(stream));
  const char* base = static_cast<const char*>(state);
  const std::size_t row = static_cast<std::size_t>(rank) * layout.stride * layout.elem_bytes;
  std::vector<std::uint16_t> half(layout.elem_bytes == 2 ? count : 0);
  for (int which = 0; which < (dual ? 2 : 1); ++which) {
    float* dst = which == 0 ? m1 : m2;
    const char* src = base + (which == 0 ? layout.m1_offset : layout.m2_offset) + row;
    if (layout.elem_bytes == 4) {
      ECHO_CUDA_CHECK(cudaMemcpy(dst, src, count * 4, cudaMemcpyDeviceToHost));
    } else {
      ECHO_CUDA_CHECK(cudaMemcpy(half.data(), src, count * 2, cudaMemcpyDeviceToHost));
      for (std::size_t i = 0; i < count; ++i) dst[i] = bfloat16_bits_to_float(half[i]);
    }
  }
  return Status::Ok();
}

}  // namespace echo::cuda
