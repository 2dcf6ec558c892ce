// Group-wise quantizers: the loops over groups and elements. The rules (group parameters, one
// element's code and value) are echo/numerics/group_params.h, shared with the CUDA kernels;
// docs/numerics.md, section 2, spells them out.
#include "echo/quantizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "echo/dtype.h"
#include "echo/numerics/group_params.h"
#include "echo/numerics/outliers.h"
#include "quantize_detail.h"

namespace echo {
namespace {

// Groups at least this long are worth spreading over OpenMP threads.
constexpr std::size_t kParallelMinGroups = 256;

struct GroupRange {
  float min_value;
  float max_value;
  bool finite;
};

GroupRange scan_group(const float* x, std::size_t len) {
  float mn = std::numeric_limits<float>::infinity();
  float mx = -std::numeric_limits<float>::infinity();
  int bad = 0;
#pragma omp simd reduction(min : mn) reduction(max : mx) reduction(| : bad)
  for (std::size_t i = 0; i < len; ++i) {
    const float v = x[i];
    bad |= !numerics::is_finite(v);
    mn = v < mn ? v : mn;
    mx = v > mx ? v : mx;
  }
  return {mn, mx, bad == 0};
}

// The group's range without its outliers (docs/numerics.md 2.5): the picks of a finite group and
// the min and max of the other elements (both 0 when every element is an outlier).
GroupRange scan_without_outliers(const float* x, std::size_t len, int k, numerics::OutlierPicks* picks) {
  *picks = numerics::no_outlier_picks();
  for (std::size_t i = 0; i < len; ++i) {
    numerics::offer_outlier(*picks, k, numerics::abs_of(x[i]), static_cast<int>(i));
  }
  float mn = std::numeric_limits<float>::infinity();
  float mx = -std::numeric_limits<float>::infinity();
  bool any = false;
  for (std::size_t i = 0; i < len; ++i) {
    if (numerics::is_outlier(*picks, static_cast<int>(i))) continue;
    any = true;
    mn = x[i] < mn ? x[i] : mn;
    mx = x[i] > mx ? x[i] : mx;
  }
  if (!any) return {0.0f, 0.0f, true};
  return {mn, mx, true};
}

void fill_outlier_entries(const numerics::OutlierPicks& picks, const float* x, int k, bool poisoned,
                          OutlierEntry* out) {
  for (int j = 0; j < k; ++j) {
    OutlierEntry e;
    if (j < picks.count && !poisoned) {
      e.index = static_cast<std::uint16_t>(picks.index[j]);
      e.value = numerics::outlier_value_bits(x[picks.index[j]]);
    }
    out[j] = e;
  }
}

void encode_group(const numerics::GroupMap& map, const float* x, std::size_t len, std::uint8_t* q) {
  if (map.poisoned) {
    std::memset(q, 0, len);
    return;
  }
  const numerics::GroupMap m = map;  // a local copy: the byte stores cannot alias it
  const float magic = numerics::encode_magic(m);
  if (m.wide) {
    for (std::size_t i = 0; i < len; ++i) {
      q[i] = static_cast<std::uint8_t>(numerics::code_of_bits(numerics::encode_bits_wide(m, magic, x[i])));
    }
    return;
  }
#pragma omp simd
  for (std::size_t i = 0; i < len; ++i) {
    q[i] = static_cast<std::uint8_t>(numerics::code_of_bits(numerics::encode_bits(m, magic, x[i])));
  }
}

void decode_group(const GroupParams& params, const std::uint8_t* q, std::size_t len, float* out) {
  const float z = numerics::half_bits_to_float(params.zero_point);
  if (numerics::is_wide_scale_field(params.scale)) {
    const float ws = numerics::wide_scale_of_field(params.scale);
    for (std::size_t i = 0; i < len; ++i) out[i] = numerics::dequantize_wide_value(ws, z, static_cast<float>(q[i]));
    return;
  }
  const float s = numerics::half_bits_to_float(params.scale);
#pragma omp simd
  for (std::size_t i = 0; i < len; ++i) out[i] = numerics::dequantize_value(s, z, static_cast<float>(q[i]));
}

numerics::GroupMap group_map(const QuantSpec& spec, float mn, float mx, bool finite,
                             bool scale_to_nearest = false) {
  return numerics::make_group_map(
      {spec.bits, spec.kind, scale_to_nearest, spec.overflow == OverflowGroups::kWide}, mn, mx, finite);
}

GroupParams params_of(const numerics::GroupMap& map) { return {map.scale, map.zero_point}; }

// The outlier entries of one group written over its decoded values (a poisoned group keeps NaN).
void place_outliers(const GroupParams& params, const OutlierEntry* entries, int k, std::size_t len,
                    float* out) {
  if (params.scale == numerics::kCanonicalNaNHalf) return;
  for (int j = 0; j < k; ++j) {
    if (entries[j].index < len) out[entries[j].index] = numerics::outlier_value(entries[j].value);
  }
}

// One group: range (without outliers), map, codes and outlier entries. Returns whether poisoned.
bool quantize_group(const QuantSpec& spec, const float* x, std::size_t len, std::uint8_t* q,
                    GroupParams* params, OutlierEntry* entries, bool scale_to_nearest) {
  GroupRange range = scan_group(x, len);
  numerics::OutlierPicks picks = numerics::no_outlier_picks();
  if (spec.outliers > 0 && range.finite) range = scan_without_outliers(x, len, spec.outliers, &picks);
  const numerics::GroupMap map =
      group_map(spec, range.min_value, range.max_value, range.finite, scale_to_nearest);
  encode_group(map, x, len, q);
  *params = params_of(map);
  if (spec.outliers > 0) fill_outlier_entries(picks, x, spec.outliers, map.poisoned, entries);
  return map.poisoned;
}


}  // namespace

const char* quantizer_name(QuantizerKind kind) {
  switch (kind) {
    case QuantizerKind::kZeroAware: return "zero-aware";
    case QuantizerKind::kNaive: return "naive";
    case QuantizerKind::kSymmetric: return "symmetric";
  }
  return "unknown";
}

std::optional<QuantizerKind> parse_quantizer(std::string_view name) {
  if (name == "zero-aware") return QuantizerKind::kZeroAware;
  if (name == "naive") return QuantizerKind::kNaive;
  if (name == "symmetric") return QuantizerKind::kSymmetric;
  return std::nullopt;
}

const char* overflow_groups_name(OverflowGroups mode) {
  return mode == OverflowGroups::kWide ? "wide" : "poison";
}

std::optional<OverflowGroups> parse_overflow_groups(std::string_view name) {
  if (name == "poison") return OverflowGroups::kPoison;
  if (name == "wide") return OverflowGroups::kWide;
  return std::nullopt;
}

const char* rotation_name(Rotation rotation) {
  return rotation == Rotation::kHadamard ? "hadamard" : "none";
}

std::optional<Rotation> parse_rotation(std::string_view name) {
  if (name == "none") return Rotation::kNone;
  if (name == "hadamard") return Rotation::kHadamard;
  return std::nullopt;
}

Status QuantSpec::validate() const {
  if (bits < kMinBits || bits > kMaxBits) {
    return Status(StatusCode::kInvalidArgument,
                  "bits must be in [2, 8], got " + std::to_string(bits));
  }
  if (group < kMinGroup || group > kMaxGroup || (group & (group - 1)) != 0) {
    return Status(StatusCode::kInvalidArgument,
                  "group size must be a power of two in [16, 1024], got " + std::to_string(group));
  }
  if (!parse_quantizer(quantizer_name(kind))) {
    return Status(StatusCode::kInvalidArgument, "unknown quantizer");
  }
  if (outliers < 0 || outliers > kMaxOutliers) {
    return Status(StatusCode::kInvalidArgument,
                  "outliers per group must be in [0, 2], got " + std::to_string(outliers));
  }
  if (overflow != OverflowGroups::kPoison && overflow != OverflowGroups::kWide) {
    return Status(StatusCode::kInvalidArgument, "unknown overflow-groups mode");
  }
  if (rotation != Rotation::kNone && rotation != Rotation::kHadamard) {
    return Status(StatusCode::kInvalidArgument, "unknown rotation");
  }
  return Status::Ok();
}

GroupParams choose_group_params(const QuantSpec& spec, float min_value, float max_value) {
  const bool finite = std::isfinite(min_value) && std::isfinite(max_value);
  return params_of(group_map(spec, min_value, max_value, finite));
}

std::size_t quantize(const QuantSpec& spec, const float* values, std::size_t count,
                     std::uint8_t* codes, GroupParams* params, OutlierEntry* outliers) {
  return detail::quantize(spec, values, count, codes, params, outliers, false);
}

std::size_t detail::quantize(const QuantSpec& spec, const float* values, std::size_t count,
                             std::uint8_t* codes, GroupParams* params, OutlierEntry* outliers,
                             bool round_scale_to_nearest) {
  const std::size_t g = static_cast<std::size_t>(spec.group);
  const std::size_t groups = spec.num_groups(count);
  const std::size_t k = static_cast<std::size_t>(spec.outliers);
  std::size_t poisoned = 0;
#pragma omp parallel for schedule(static) reduction(+ : poisoned) if (groups >= kParallelMinGroups)
  for (std::size_t i = 0; i < groups; ++i) {
    const std::size_t begin = i * g;
    const std::size_t len = std::min(g, count - begin);
    poisoned += quantize_group(spec, values + begin, len, codes + begin, &params[i],
                               outliers != nullptr ? outliers + i * k : nullptr, round_scale_to_nearest)
                    ? 1
                    : 0;
  }
  return poisoned;
}

void dequantize(const QuantSpec& spec, const std::uint8_t* codes, const GroupParams* params,
                std::size_t count, float* out, const OutlierEntry* outliers) {
  const std::size_t g = static_cast<std::size_t>(spec.group);
  const std::size_t groups = spec.num_groups(count);
  const std::size_t k = static_cast<std::size_t>(spec.outliers);
#pragma omp parallel for schedule(static) if (groups >= kParallelMinGroups)
  for (std::size_t i = 0; i < groups; ++i) {
    const std::size_t begin = i * g;
    const std::size_t len = std::min(g, count - begin);
    decode_group(params[i], codes + begin, len, out + begin);
    if (k > 0 && outliers != nullptr) {
      place_outliers(params[i], outliers + i * k, spec.outliers, len, out + begin);
    }
  }
}

std::size_t quantize_dequantize(const QuantSpec& spec, const float* values, std::size_t count,
                                float* out) {
  const std::size_t g = static_cast<std::size_t>(spec.group);
  const std::size_t groups = spec.num_groups(count);
  std::size_t poisoned = 0;
#pragma omp parallel for schedule(static) reduction(+ : poisoned) if (groups >= kParallelMinGroups)
  for (std::size_t i = 0; i < groups; ++i) {
    std::uint8_t q[kMaxGroup];
    GroupParams params;
    OutlierEntry entries[kMaxOutliers];
    const std::size_t begin = i * g;
    const std::size_t len = std::min(g, count - begin);
    const bool bad = quantize_group(spec, values + begin, len, q, &params, entries, false);
    decode_group(params, q, len, out + begin);
    if (spec.outliers > 0) place_outliers(params, entries, spec.outliers, len, out + begin);
    poisoned += bad ? 1 : 0;
  }
  return poisoned;
}

}  // namespace echo
