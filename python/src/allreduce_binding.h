// The reference all-reduce (echo::allreduce, echo::exact_allreduce) over DLPack arrays: [P, n]
// contributions in, [n] result out, compensator states in caller-owned fp32 arrays.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include <nanobind/nanobind.h>

#include "echo/allreduce.h"
#include "echo/site.h"

namespace echotk {

// Slots of the float64 report array each call fills (echotk/_allreduce.py names them).
enum ReportSlot : std::size_t {
  kPoisonedGroups = 0,
  kScaleExponent,
  kExactPath,
  kNonFiniteInputs,
  kInjectedNorm,    // ||y - sum_i x'_i||, delta of sim/replay
  kNetNorm,         // ||y - sum_i x_i||, rho of sim/replay
  kCorrectionNorm,  // ||sum_i (x'_i - x_i)||
  kSumNorm,         // ||sum_i x_i||
  kNumReportSlots,
};

// A validated all-reduce configuration for a fixed number of ranks.
struct SpecHandle {
  echo::AllReduceSpec spec;
  int ranks = 1;
};

void register_allreduce(nanobind::module_& m);
// SpecHandle, the spec table and make_spec (spec_binding.cpp).
void register_spec(nanobind::module_& m);

// Status -> Python exception: ValueError for bad arguments (kInvalidArgument), RuntimeError otherwise.
void raise_if_error(const echo::Status& status);
// "forward" | "backward"; ValueError otherwise.
echo::Direction parse_direction(const std::string& direction);
// The call's site (docs/numerics.md 6.1) from the ops' numbers: site_row < 0, not known; 0, a
// site without a post-norm; > 0, a post-norm of that many elements per row and weight RMS
// site_weight_rms (post_norm_weight_rms of its weights); site_kind 0 attention, 1 MLP, else unknown.
std::optional<echo::SiteInfo> site_of(std::int64_t site_row, double site_weight_rms, std::int64_t site_kind = -1);
// site_of, checked against the spec: ValueError when it needs each forward call's site
// (echo::needs_site) and none is given.
std::optional<echo::SiteInfo> required_site(const echo::AllReduceSpec& spec, std::int64_t site_row,
                                            double site_weight_rms, std::int64_t site_kind = -1);

// The one-GPU emulation kernel's entry points (allreduce_cuda_binding.cpp; CUDA builds only).
void register_allreduce_cuda(nanobind::module_& m);
// The communicator of echotk.distributed (communicator_binding.cpp; builds with echo_cuda only).
void register_communicator(nanobind::module_& m);

}  // namespace echotk
