// Internal to the one-GPU emulation (echo/cuda/emulate.h): the state buffer's layout, shared by
// the host checks and the kernels, and the kernels' arguments.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "echo/cuda/emulate.h"
#include "echo/numerics/stream_units.h"
#include "kernel_args.h"

namespace echo::cuda {

// A state buffer: a 256-byte header (the reset mark, an int, at offset 0; with compensator gains
// 'sum' one int per site kind at kEmulateRatiosHeldOffset, 1 where EmulateArguments::ratios holds
// that kind's row ratios), then m1 of every rank (mode 'deficit': its deficit A), then m2 (dual
// mode). Rank rows are padded to 64 elements, so every 4-element lane of the kernels starts 16-byte
// (fp32) or 8-byte (bf16) aligned.
inline constexpr std::size_t kEmulateStateHeaderBytes = 256;
inline constexpr std::size_t kEmulateRatiosHeldOffset = 16;
inline constexpr std::size_t kEmulateRowAlign = 64;

// Elements per rank row of the state (and of gains 'sum''s residuals): count padded to 64.
inline std::size_t emulate_row_stride(std::size_t count) {
  return (count + kEmulateRowAlign - 1) / kEmulateRowAlign * kEmulateRowAlign;
}

struct EmulateStateLayout {
  std::size_t stride = 0;      // elements per rank row
  std::size_t elem_bytes = 0;  // 4 (fp32 state) or 2 (bf16)
  std::size_t m1_offset = 0;
  std::size_t m2_offset = 0;   // 0 when there is no m2
  std::size_t total_bytes = 0; // 0 when the compensator is off
};

inline EmulateStateLayout emulate_state_layout(const AllReduceSpec& spec, int ranks, std::size_t count) {
  EmulateStateLayout l;
  const CompensatorSpec& c = spec.compensator;
  if (c.mode == CompensatorMode::kOff || ranks < 1) return l;
  l.stride = emulate_row_stride(count);
  l.elem_bytes = c.state_dtype == DType::kBFloat16 ? 2 : 4;
  const std::size_t average_bytes = l.stride * l.elem_bytes * static_cast<std::size_t>(ranks);
  l.m1_offset = kEmulateStateHeaderBytes;
  l.m2_offset = c.mode == CompensatorMode::kDual ? l.m1_offset + average_bytes : 0;
  l.total_bytes = (c.mode == CompensatorMode::kDual ? l.m2_offset : l.m1_offset) + average_bytes;
  return l;
}

// One call as the kernels see it.
struct EmulateParams {
  int ranks;
  int bits;
  int group;
  int group_shift;                 // log2(group)
  QuantizerKind kind;
  std::size_t count;
  std::size_t groups_per_segment;  // Segmentation: segment j holds groups [j Gs, (j + 1) Gs)
  const void* parts;               // [ranks][count] of the dtype
  void* out;                       // [count]
  float* compensated;              // optional [ranks][count] fp32 x'
  CompensatorArgs comp;            // m1, m2 point at rank 0's row; fresh at the reset mark
  std::size_t state_stride;        // elements between rank rows of m1 and m2
  bool backward;
  bool exact_rounds;               // exact path: terms are x' rounded to bf16 (exact_path_rounds_x_prime)
  bool wide_groups;                // OverflowGroups::kWide (docs/numerics.md 2.4)
  bool rotate;                     // Rotation::kHadamard (docs/numerics.md 2.6)
  EmulateDeviceReport* report;
  // Compensator units 'stream' (docs/numerics.md 6.1) at a site with a post-norm: the gains of rank
  // r's row t at stream_gains[r * stream_rows + t], written by emulate_stream_gains before the main
  // kernel; null for every other call (the paper's units). Last, so that the other fields keep the
  // offsets the kernels without these units were compiled against.
  numerics::StreamGains* stream_gains;
  std::size_t stream_rows;         // rows per rank: count / row_length
  std::size_t row_length;          // elements per row (the post-norm's width)
  float weight_rms;                // w: RMS of the post-norm's effective weights
  // Steps 6 and 7 where the spec asks for them (else null), in the gains scratch after the gains
  // (EmulateGainsLayout): the clip's bound of rank r's row t at clip_bounds[r * stream_rows + t],
  // and profile 'sqrt''s factor f_j at profile_factors[j], formed from the device weights.
  float* clip_bounds;
  float* profile_factors;
  const float* weights;            // [row_length] the post-norm's weights (profile 'sqrt', mode 'deficit')
  float clip;
  // Gains 'sum' (step 8; else null): each rank's own row RMS at own_rms[r * stream_rows + t] (the
  // gains kernel's), the residuals the main kernel leaves for the update at sum_residuals[r *
  // state_stride + e], the row ratios of kind k at row_ratios[(k * ranks + r) * stream_rows + t] and
  // which kinds they hold (ratios_held[k], in the state's header); site_kind: the call's (0 or 1).
  float* own_rms;
  float* sum_residuals;
  float* row_ratios;
  int* ratios_held;
  int site_kind;
  // Mode 'deficit' (docs/numerics.md 6.2; else null), which runs with gains 'sum' and profile 'flat':
  // the floored weights wf_j at deficit_weights[j], in the gains scratch where profile 'sqrt' keeps
  // its factors (the gains kernel forms them from `weights`); stream_gains[r * stream_rows +
  // t].from_stream holds the row's estimate e in place of R, and sum_residuals the undelivered part
  // d = fp32(u - c) in place of u (c the correction applied, after the clip).
  float* deficit_weights;
};

// The gains scratch of a call in stream units at a post-norm site: the rows' gains of every rank,
// then (clip > 0) their clip bounds, then the site's per-feature terms (profile 'sqrt''s factors
// f_j, or mode 'deficit''s floored weights wf_j); offsets in bytes, 0 for a part the call does not
// use.
struct EmulateGainsLayout {
  std::size_t bounds_offset = 0;
  std::size_t factors_offset = 0;    // profile 'sqrt' or mode 'deficit': row_length floats
  std::size_t own_rms_offset = 0;    // gains 'sum': P * rows floats
  std::size_t residuals_offset = 0;  // gains 'sum': P * emulate_row_stride(count) floats, 16-byte aligned
  std::size_t total_bytes = 0;  // 0 when the call needs no scratch
};

inline EmulateGainsLayout emulate_gains_layout(const AllReduceSpec& spec, int ranks, std::size_t count,
                                               const SiteInfo& site) {
  EmulateGainsLayout l;
  if (!needs_site(spec) || !site.has_post_norm || site.row_length == 0 || ranks < 1) return l;
  const std::size_t rows = static_cast<std::size_t>(ranks) * (count / site.row_length);
  l.total_bytes = sizeof(numerics::StreamGains) * rows;
  if (spec.compensator.clip > 0.0f) {
    l.bounds_offset = l.total_bytes;
    l.total_bytes += sizeof(float) * rows;
  }
  if (spec.compensator.profile == CompensatorProfile::kSqrt || spec.compensator.mode == CompensatorMode::kDeficit) {
    l.factors_offset = l.total_bytes;
    l.total_bytes += sizeof(float) * site.row_length;
  }
  if (spec.compensator.gains == CompensatorGains::kSum) {
    l.own_rms_offset = l.total_bytes;
    l.total_bytes += sizeof(float) * rows;
    l.residuals_offset = (l.total_bytes + 15) / 16 * 16;
    l.total_bytes = l.residuals_offset + sizeof(float) * static_cast<std::size_t>(ranks) * emulate_row_stride(count);
  }
  return l;
}

// The row ratios of gains 'sum' at a post-norm site (EmulateArguments::ratios): kind-major, then rank,
// then row; 0 bytes for every other call.
inline std::size_t emulate_ratios_layout_bytes(const AllReduceSpec& spec, int ranks, std::size_t count,
                                               const SiteInfo& site) {
  if (!needs_site(spec) || !site.has_post_norm || site.row_length == 0 || ranks < 1 ||
      spec.compensator.gains != CompensatorGains::kSum) {
    return 0;
  }
  return sizeof(float) * kSiteKinds * static_cast<std::size_t>(ranks) * (count / site.row_length);
}

// Launchers of the emulation kernels (kernels/emulate/allreduce.cu), dtype and P dispatched there.
// Backward calls: max |x'| over every rank into report->max_abs_bits (zeroed before).
cudaError_t emulate_backward_max(DType dtype, const EmulateParams& p, cudaStream_t stream);
// Stream units: the gains of every rank's rows into p.stream_gains (numerics 6.1 steps 1-3), their
// clip bounds into p.clip_bounds (step 7) and the profile factors into p.profile_factors (step 6);
// in mode 'deficit' each row's estimate e in R's place and the floored weights into
// p.deficit_weights (numerics 6.2).
cudaError_t emulate_stream_gains(DType dtype, const EmulateParams& p, cudaStream_t stream);
// Gains 'sum', after the main kernel: each row's RMS r of the delivered output, every rank's update
// of its averages from p.sum_residuals at G = w / r (mode 'deficit': its deficit from the
// undelivered parts there at G_j = w_j / r, numerics 6.2), its row ratios r / rho of the call's
// kind, and that kind marked held (numerics 6.1 step 8).
cudaError_t emulate_sum_update(DType dtype, const EmulateParams& p, cudaStream_t stream);
// The quantized owner all-reduce, or (exact) the exact small-message path.
cudaError_t emulate_main(DType dtype, bool exact, const EmulateParams& p, cudaStream_t stream);
// emulate_main for one dtype (kernels/emulate/allreduce_<dtype>.cu).
template <DType D>
cudaError_t emulate_launch(bool exact, const EmulateParams& p, cudaStream_t stream);
extern template cudaError_t emulate_launch<DType::kFloat32>(bool, const EmulateParams&, cudaStream_t);
extern template cudaError_t emulate_launch<DType::kBFloat16>(bool, const EmulateParams&, cudaStream_t);
extern template cudaError_t emulate_launch<DType::kFloat16>(bool, const EmulateParams&, cudaStream_t);

}  // namespace echo::cuda
