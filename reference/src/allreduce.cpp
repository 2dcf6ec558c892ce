// The owner all-reduce, its ring variant and the exact path over P simulated ranks
// (docs/numerics.md, sections 3-6): validation, and the call as its stages in order
// (allreduce_stages.h, one function per section).
#include "echo/allreduce.h"
#include "echo/alteration.h"
#include "echo/site.h"

#include <algorithm>
#include <string>
#include <vector>

#include "allreduce_stages.h"
#include "echo/numerics/backward_scale.h"

namespace echo {
namespace {

Status validate_state(const CompensatorState& state, std::size_t count, int rank,
                      const CompensatorSpec& spec) {
  if (!state.m1.empty() && state.m1.size() != count) {
    return Status(StatusCode::kInvalidArgument,
                  "compensator state of rank " + std::to_string(rank) + " holds " +
                      std::to_string(state.m1.size()) + " elements but the message has " +
                      std::to_string(count) + " (reset the state between passes of different size)");
  }
  if (spec.mode == CompensatorMode::kDual && !state.m2.empty() && state.m2.size() != count) {
    return Status(StatusCode::kInvalidArgument, "compensator state m2 size mismatch");
  }
  return Status::Ok();
}

// Gains 'sum' at a post-norm site: the state's row ratios, where held, have one value per row.
Status validate_row_ratios(const CompensatorState& state, std::size_t rows, int rank) {
  for (int kind = 0; kind < kSiteKinds; ++kind) {
    const std::size_t held = state.row_ratios[static_cast<std::size_t>(kind)].size();
    if (held != 0 && held != rows) {
      return Status(StatusCode::kInvalidArgument,
                    "compensator state of rank " + std::to_string(rank) + " holds " + std::to_string(held) +
                        " row ratios of site kind " + std::to_string(kind) + " but the message has " +
                        std::to_string(rows) + " rows (reset the state between passes of different size)");
    }
  }
  return Status::Ok();
}

Status validate_call(const AllReduceSpec& spec, int ranks, std::size_t count, const float* const* inputs,
                     float* const* outputs, const CompensatorState* states, const SiteInfo* site) {
  ECHO_TRY(spec.validate(ranks));
  if (count == 0) return Status(StatusCode::kInvalidArgument, "element count must be >= 1");
  if (needs_site(spec)) {
    if (site == nullptr) {
      return Status(StatusCode::kInvalidArgument,
                    "compensator units 'stream' need the call's site (whether it has a post-norm, and its "
                    "weights): call allreduce_at_site (echo/site.h)");
    }
    ECHO_TRY(validate_site(*site, count, spec.compensator));
  }
  if (inputs == nullptr || outputs == nullptr) {
    return Status(StatusCode::kInvalidArgument, "inputs and outputs must not be null");
  }
  if (spec.compensator.mode == CompensatorMode::kOff) return Status::Ok();
  if (states == nullptr) return Status(StatusCode::kInvalidArgument, "the compensator needs one state per rank");
  const bool sum_gains = needs_site(spec) && site->has_post_norm && spec.compensator.gains == CompensatorGains::kSum;
  for (int r = 0; r < ranks; ++r) {
    ECHO_TRY(validate_state(states[r], count, r, spec.compensator));
    if (sum_gains) ECHO_TRY(validate_row_ratios(states[r], count / site->row_length, r));
  }
  return Status::Ok();
}

}  // namespace

const char* algorithm_name(Algorithm algorithm) {
  return algorithm == Algorithm::kRing ? "ring" : "owner";
}

const char* direction_name(Direction direction) {
  return direction == Direction::kBackward ? "backward" : "forward";
}

Segmentation::Segmentation(std::size_t count_, int group_, int ranks_)
    : count(count_), group(static_cast<std::size_t>(group_)), ranks(ranks_) {
  num_groups = (count + group - 1) / group;
  groups_per_segment = (num_groups + ranks - 1) / ranks;
}

std::size_t Segmentation::begin(int segment) const {
  return std::min(static_cast<std::size_t>(segment) * groups_per_segment * group, count);
}

std::size_t Segmentation::end(int segment) const {
  return std::min(static_cast<std::size_t>(segment + 1) * groups_per_segment * group, count);
}

Status AllReduceSpec::validate(int ranks) const {
  if (ranks < 1 || ranks > kMaxRanks) {
    return Status(StatusCode::kInvalidArgument,
                  "ranks must be in [1, 8], got " + std::to_string(ranks));
  }
  ECHO_TRY(quant.validate());
  ECHO_TRY(compensator.validate());
  if (algorithm == Algorithm::kRing && compensator.residual == ResidualMode::kLocal &&
      compensator.mode != CompensatorMode::kOff) {
    return Status(StatusCode::kInvalidArgument, "the ring algorithm supports the global residual only");
  }
  return Status::Ok();
}

int backward_scale_exponent(float max_abs_value) { return numerics::backward_exponent(max_abs_value); }

void exact_allreduce(DType dtype, int ranks, std::size_t count, const float* const* inputs,
                     float* out) {
  stages::sum_in_order(inputs, ranks, count, AlterationPolicy{}, out);
  round_to_dtype(out, count, dtype);
}

const char* alteration_name(Alteration alteration) {
  switch (alteration) {
    case Alteration::kNone: return "none";
    case Alteration::kScaleRoundedToNearest: return "scale-rounded-to-nearest";
    case Alteration::kRanksSummedInReverse: return "ranks-summed-in-reverse";
    case Alteration::kDeficitCorrectionNotSubtracted: return "deficit-correction-not-subtracted";
  }
  return "unknown";
}

AllReduceWorkspace::AllReduceWorkspace() : buffers_(std::make_unique<Buffers>()) {}
AllReduceWorkspace::~AllReduceWorkspace() = default;
AllReduceWorkspace::AllReduceWorkspace(AllReduceWorkspace&&) noexcept = default;
AllReduceWorkspace& AllReduceWorkspace::operator=(AllReduceWorkspace&&) noexcept = default;

namespace {

// The call, every entry point's: the stages of numerics 3-6 in order.
Status run_call(Alteration alteration, const SiteInfo* site, const AllReduceSpec& spec, int ranks,
                std::size_t count, const float* const* inputs, float* const* outputs, CompensatorState* states,
                float* const* compensated, AllReduceReport* report, AllReduceWorkspace* workspace) {
  ECHO_TRY(validate_call(spec, ranks, count, inputs, outputs, states, site));
  AllReduceWorkspace call_workspace;
  AllReduceWorkspace::Buffers& b = (workspace != nullptr ? *workspace : call_workspace).buffers();
  const CallPlan c(spec, ranks, count, alteration, needs_site(spec) ? site : nullptr);

  AllReduceReport result;
  stages::apply(c, inputs, states, compensated, b);
  result.scale_exponent = stages::backward_scale(c, b);
  stages::rotate(c, b);
  stages::prepare(c, b);
  if (c.exact) {
    result.exact_path = true;
    result.poisoned_groups = stages::reduce_exact(c, b);
  } else {
    for (int j = 0; j < ranks; ++j) {
      const std::size_t begin = c.segments.begin(j);
      const std::size_t len = c.segments.end(j) - begin;
      if (len == 0) continue;
      if (spec.algorithm == Algorithm::kRing) {
        stages::reduce_ring(c, j, begin, len, b);
      } else {
        stages::reduce(c, j, begin, len, b);  // the pushes of segment j included
      }
      result.poisoned_groups += stages::gather(c, begin, len, b);
    }
  }
  stages::deliver(c, b);
  if (c.compensate) stages::update(c, states, b);

  for (int r = 0; r < ranks; ++r) std::copy(b.y[r].begin(), b.y[r].end(), outputs[r]);
  if (report != nullptr) *report = result;
  return Status::Ok();
}

}  // namespace

Status allreduce(const AllReduceSpec& spec, int ranks, std::size_t count, const float* const* inputs,
                 float* const* outputs, CompensatorState* states, float* const* compensated,
                 AllReduceReport* report, AllReduceWorkspace* workspace) {
  return run_call(Alteration::kNone, nullptr, spec, ranks, count, inputs, outputs, states, compensated, report,
                  workspace);
}

Status allreduce_altered(Alteration alteration, const AllReduceSpec& spec, int ranks, std::size_t count,
                         const float* const* inputs, float* const* outputs, CompensatorState* states,
                         float* const* compensated, AllReduceReport* report, AllReduceWorkspace* workspace,
                         const SiteInfo* site) {
  return run_call(alteration, site, spec, ranks, count, inputs, outputs, states, compensated, report,
                  workspace);
}

Status allreduce_at_site(const SiteInfo& site, const AllReduceSpec& spec, int ranks, std::size_t count,
                         const float* const* inputs, float* const* outputs, CompensatorState* states,
                         float* const* compensated, AllReduceReport* report, AllReduceWorkspace* workspace) {
  return run_call(Alteration::kNone, &site, spec, ranks, count, inputs, outputs, states, compensated, report,
                  workspace);
}

}  // namespace echo
