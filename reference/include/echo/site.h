// What one all-reduce call knows of its site in the model (docs/numerics.md 6.1): what the
// compensator's stream units need. Calls of other modes ignore it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "echo/allreduce.h"
#include "echo/status.h"

namespace echo {

// What a site's output is (the trace's /site_kind); compensator gains 'sum' keep one row ratio per kind.
enum class SiteKind : std::int8_t { kUnknown = -1, kAttention = 0, kMlp = 1 };

struct SiteInfo {
  // The model normalizes the site's output (an RMSNorm) before adding it to the residual stream.
  // false: the gains are 1 (a pre-norm model's site), and the other fields are unused.
  bool has_post_norm = false;
  // Elements per token row: the norm's width. The message is count / row_length rows.
  std::size_t row_length = 0;
  // RMS of the norm's effective weights (Gemma's 1 + weight), as post_norm_weight_rms forms it.
  float weight_rms = 0.0f;
  // The norm's effective weights (row_length values, or empty where not known); read only by
  // compensator profile 'sqrt' (docs/numerics.md 6.1, step 6) and compensator 'deficit' (6.2),
  // which refuse a site without them.
  std::vector<float> weights;
  // The site's kind; read only by compensator gains 'sum' (docs/numerics.md 6.1, step 8), which
  // refuses a post-norm site of unknown kind.
  SiteKind kind = SiteKind::kUnknown;
};

// A site with a post-norm of these effective weights: row_length = weights.size(),
// weight_rms = numerics::row_rms(numerics::row_sum_of_squares(weights), row_length) and a copy of
// the weights.
SiteInfo post_norm_site(const std::vector<float>& weights);

// Whether `site` serves a call of `count` elements under `compensator`: a post-norm site needs
// row_length >= 1 dividing count and a finite weight_rms > 0, with profile 'sqrt' or compensator
// 'deficit' its weights, all finite, and with gains 'sum' a known kind (the message names what is wrong).
Status validate_site(const SiteInfo& site, std::size_t count, const CompensatorSpec& compensator);

// Whether a call of `spec` needs its site (allreduce_at_site): compensator units 'stream' on a
// forward call with the compensator on. Backward calls and other modes use unit gains.
bool needs_site(const AllReduceSpec& spec);

// echo::allreduce for a call that knows its site (docs/numerics.md 6.1): with compensator units
// 'stream' the correction and the residual pass through the site's per-row gains; any other spec
// ignores `site` and gives echo::allreduce's bits. echo::allreduce refuses a call that needs_site.
Status allreduce_at_site(const SiteInfo& site, const AllReduceSpec& spec, int ranks, std::size_t count,
                         const float* const* inputs, float* const* outputs, CompensatorState* states,
                         float* const* compensated, AllReduceReport* report,
                         AllReduceWorkspace* workspace = nullptr);

}  // namespace echo
