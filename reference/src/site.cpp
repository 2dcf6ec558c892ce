// SiteInfo from a post-norm's weights, and its check (echo/site.h).
#include "echo/site.h"

#include <cmath>

#include "echo/numerics/stream_units.h"

namespace echo {

SiteInfo post_norm_site(const std::vector<float>& weights) {
  SiteInfo site;
  site.has_post_norm = true;
  site.row_length = weights.size();
  const float q = numerics::row_sum_of_squares(weights.data(), weights.size());
  site.weight_rms = numerics::row_rms(q, static_cast<float>(weights.size()));
  site.weights = weights;
  return site;
}

Status validate_site(const SiteInfo& site, std::size_t count, const CompensatorSpec& compensator) {
  if (!site.has_post_norm) return Status::Ok();
  if (site.row_length == 0 || count % site.row_length != 0) {
    return Status(StatusCode::kInvalidArgument,
                  "the site's post-norm has " + std::to_string(site.row_length) +
                      " elements per row, which does not divide the message's " + std::to_string(count) +
                      " elements (compensator units 'stream' need whole token rows)");
  }
  if (!(site.weight_rms > 0.0f) || !std::isfinite(site.weight_rms)) {
    return Status(StatusCode::kInvalidArgument,
                  "the site's post-norm weight RMS must be finite and > 0, got " + std::to_string(site.weight_rms));
  }
  const bool reads_weights =
      compensator.profile != CompensatorProfile::kFlat || compensator.mode == CompensatorMode::kDeficit;
  if (reads_weights) {
    const std::string reader = compensator.mode == CompensatorMode::kDeficit
                                   ? std::string("compensator 'deficit'")
                                   : std::string("compensator profile '") +
                                         compensator_profile_name(compensator.profile) + "'";
    if (site.weights.size() != site.row_length) {
      return Status(StatusCode::kInvalidArgument,
                    reader + " needs the site's " + std::to_string(site.row_length) +
                        " post-norm weights (SiteInfo::weights), and the site holds " +
                        std::to_string(site.weights.size()));
    }
    for (std::size_t j = 0; j < site.row_length; ++j) {
      if (!std::isfinite(site.weights[j])) {
        return Status(StatusCode::kInvalidArgument,
                      "the site's post-norm weight " + std::to_string(j) + " is not finite");
      }
    }
  }
  if (compensator.gains == CompensatorGains::kSum && site.kind != SiteKind::kAttention &&
      site.kind != SiteKind::kMlp) {
    return Status(StatusCode::kInvalidArgument,
                  "compensator gains 'sum' need the site's kind (SiteInfo::kind: attention or MLP output; a "
                  "trace's /site_kind), and the site's is unknown");
  }
  return Status::Ok();
}

bool needs_site(const AllReduceSpec& spec) {
  return spec.compensator.units == CompensatorUnits::kStream && spec.compensator.mode != CompensatorMode::kOff &&
         spec.direction == Direction::kForward;
}

}  // namespace echo
