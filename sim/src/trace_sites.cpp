// Each site's SiteInfo from a trace's post_norm record (echo/trace.h, docs/numerics.md 6.1).
#include <string>
#include <vector>

#include "echo/trace.h"

namespace echo {

std::vector<SiteInfo> trace_sites(const TraceInfo& info) {
  if (!info.post_norm) return {};
  std::vector<SiteInfo> sites(info.sites);  // "none": no post-norm, unit gains
  if (*info.post_norm == "rmsnorm" && info.hidden) {
    const auto hidden = static_cast<std::size_t>(*info.hidden);
    for (std::size_t k = 0; k < info.sites; ++k) {
      const float* row = info.post_norm_weights.data() + k * hidden;
      sites[k] = post_norm_site(std::vector<float>(row, row + hidden));
    }
  }
  if (info.site_kind.size() == info.sites) {
    for (std::size_t k = 0; k < info.sites; ++k) sites[k].kind = static_cast<SiteKind>(info.site_kind[k]);
  }
  return sites;
}

Status check_trace_sites(const TraceInfo& info, const std::string& path, const AllReduceSpec& spec) {
  if (!needs_site(spec)) return Status::Ok();
  if (!info.post_norm) {
    return Status(StatusCode::kInvalidArgument,
                  path + ": compensator units 'stream' need each site's post-norm, and the trace does not record "
                         "it (no attribute post_norm; docs/trace-format.md): capture it again, or replay with "
                         "--compensator-units site");
  }
  if (spec.compensator.gains == CompensatorGains::kSum && *info.post_norm == "rmsnorm" &&
      info.site_kind.size() != info.sites) {
    return Status(StatusCode::kInvalidArgument,
                  path + ": compensator gains 'sum' need each site's kind, and the trace does not record it "
                         "(no dataset /site_kind; docs/trace-format.md): capture it again, or replay with "
                         "--compensator-gains own");
  }
  return Status::Ok();
}

}  // namespace echo
