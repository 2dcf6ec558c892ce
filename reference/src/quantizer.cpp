// Group-wise quantizers; every arithmetic step is spelled out in docs/numerics.md, section 2.
#include "echo/quantizer.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

#include "echo/dtype.h"
#include "group_map.h"

namespace echo {
namespace {

// Adding and subtracting 1.5 * 2^23 rounds a float with |t| < 2^22 to the nearest integer, ties
// to even, in the default rounding mode; it vectorizes where std::nearbyint may not.
constexpr float kRintMagic = 12582912.0f;
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
    bad |= !(std::fabs(v) <= FLT_MAX);
    mn = v < mn ? v : mn;
    mx = v > mx ? v : mx;
  }
  return {mn, mx, bad == 0};
}

float rint_small(float t) { return (t + kRintMagic) - kRintMagic; }

void encode_group(const detail::GroupMap& map, const float* x, std::size_t len, std::uint8_t* q) {
  if (map.poisoned) {
    std::memset(q, 0, len);
    return;
  }
  const float r = map.recip;
  const float z = map.zero_add;
  const float lo = map.clip_lo;
  const float hi = map.clip_hi;
  const float shift = map.code_shift;  // moves symmetric codes [-Ls, Ls] to [1, 2^b - 1]
#pragma omp simd
  for (std::size_t i = 0; i < len; ++i) {
    float t = x[i] * r;
    t = t + z;
    t = t < lo ? lo : t;
    t = t > hi ? hi : t;
    t = rint_small(t) + shift;  // exact: integers below 2^8
    q[i] = static_cast<std::uint8_t>(static_cast<int>(t));
  }
}

void decode_group(const GroupParams& params, const std::uint8_t* q, std::size_t len, float* out) {
  const float s = half_bits_to_float(params.scale);
  const float z = half_bits_to_float(params.zero_point);
#pragma omp simd
  for (std::size_t i = 0; i < len; ++i) {
    const float centered = static_cast<float>(q[i]) - z;
    out[i] = s * centered;
  }
}

}  // namespace

namespace detail {

GroupMap make_group_map(const QuantSpec& spec, float mn, float mx, bool finite,
                        bool round_scale_to_nearest) {
  GroupMap map;
  map.poisoned = true;
  map.params = {kHalfQuietNaN, 0};
  if (!finite) return map;

  const bool symmetric = spec.kind == QuantizerKind::kSymmetric;
  const int half_codes = 1 << (spec.bits - 1);
  float lo = mn;
  float hi = mx;
  bool snap = false;
  float sf;
  if (symmetric) {
    const float amax = std::max(std::fabs(mn), std::fabs(mx));
    sf = amax / static_cast<float>(half_codes - 1);
  } else {
    const float levels = static_cast<float>(spec.max_code());
    if (spec.kind == QuantizerKind::kZeroAware) {
      if (mn <= 0.0f && mx >= 0.0f) {
        snap = true;
      } else {
        const float distance_to_zero = mn > 0.0f ? mn : -mx;
        const float range = mx - mn;
        const float d = range == 0.0f ? std::numeric_limits<float>::infinity()
                                       : (distance_to_zero * levels) / range;
        if (d <= 1.0f) {
          snap = true;
          if (mn > 0.0f) lo = 0.0f; else hi = 0.0f;
        } else if (d < 2.0f) {
          const float w = d - 1.0f;
          if (mn > 0.0f) lo = mn * w; else hi = mx * w;
        }
      }
    }
    const float sr = (hi - lo) / levels;
    const float sz = std::fabs(lo) * 0x1p-11f;
    sf = std::max(sr, sz);
  }

  map.poisoned = false;
  if (sf == 0.0f) {
    // All-zero group: scale 0 makes every code decode to +0.
    map.params.scale = 0;
    map.params.zero_point = symmetric ? float_to_half_bits(static_cast<float>(half_codes)) : 0;
    map.recip = 0.0f;
  } else {
    // Round the scale up so the grid always covers the group; never below the smallest subnormal.
    std::uint16_t s_bits =
        round_scale_to_nearest ? float_to_half_bits(sf) : float_to_half_bits_round_up(sf);
    if (s_bits == 0) s_bits = 1;
    if (s_bits == 0x7C00) {
      map.poisoned = true;
      map.params = {kHalfQuietNaN, 0};
      return map;
    }
    const float s = half_bits_to_float(s_bits);
    map.params.scale = s_bits;
    map.recip = 1.0f / s;
    if (symmetric) {
      map.params.zero_point = float_to_half_bits(static_cast<float>(half_codes));
    } else {
      const float zr = -lo / s;
      float z = zr;
      if (snap) {
        z = rint_small(std::min(std::max(zr, 0.0f), static_cast<float>(spec.max_code())));
      }
      if (z == 0.0f) z = 0.0f;  // store -0 as +0
      map.params.zero_point = float_to_half_bits(z);
    }
  }
  if (symmetric) {
    map.zero_add = 0.0f;
    map.clip_lo = -static_cast<float>(half_codes - 1);
    map.clip_hi = static_cast<float>(half_codes - 1);
    map.code_shift = static_cast<float>(half_codes);
  } else {
    map.zero_add = half_bits_to_float(map.params.zero_point);
    map.clip_lo = 0.0f;
    map.clip_hi = static_cast<float>(spec.max_code());
    map.code_shift = 0.0f;
  }
  return map;
}

}  // namespace detail

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
  return Status::Ok();
}

GroupParams choose_group_params(const QuantSpec& spec, float min_value, float max_value) {
  const bool finite = std::isfinite(min_value) && std::isfinite(max_value);
  return detail::make_group_map(spec, min_value, max_value, finite).params;
}

std::size_t quantize(const QuantSpec& spec, const float* values, std::size_t count,
                     std::uint8_t* codes, GroupParams* params) {
  return detail::quantize(spec, values, count, codes, params, false);
}

std::size_t detail::quantize(const QuantSpec& spec, const float* values, std::size_t count,
                             std::uint8_t* codes, GroupParams* params, bool round_scale_to_nearest) {
  const std::size_t g = static_cast<std::size_t>(spec.group);
  const std::size_t groups = spec.num_groups(count);
  std::size_t poisoned = 0;
#pragma omp parallel for schedule(static) reduction(+ : poisoned) if (groups >= kParallelMinGroups)
  for (std::size_t k = 0; k < groups; ++k) {
    const std::size_t begin = k * g;
    const std::size_t len = std::min(g, count - begin);
    const GroupRange range = scan_group(values + begin, len);
    const detail::GroupMap map = detail::make_group_map(spec, range.min_value, range.max_value,
                                                        range.finite, round_scale_to_nearest);
    encode_group(map, values + begin, len, codes + begin);
    params[k] = map.params;
    poisoned += map.poisoned ? 1 : 0;
  }
  return poisoned;
}

void dequantize(const QuantSpec& spec, const std::uint8_t* codes, const GroupParams* params,
                std::size_t count, float* out) {
  const std::size_t g = static_cast<std::size_t>(spec.group);
  const std::size_t groups = spec.num_groups(count);
#pragma omp parallel for schedule(static) if (groups >= kParallelMinGroups)
  for (std::size_t k = 0; k < groups; ++k) {
    const std::size_t begin = k * g;
    decode_group(params[k], codes + begin, std::min(g, count - begin), out + begin);
  }
}

std::size_t quantize_dequantize(const QuantSpec& spec, const float* values, std::size_t count,
                                float* out) {
  const std::size_t g = static_cast<std::size_t>(spec.group);
  const std::size_t groups = spec.num_groups(count);
  std::size_t poisoned = 0;
#pragma omp parallel for schedule(static) reduction(+ : poisoned) if (groups >= kParallelMinGroups)
  for (std::size_t k = 0; k < groups; ++k) {
    std::uint8_t q[kMaxGroup];
    const std::size_t begin = k * g;
    const std::size_t len = std::min(g, count - begin);
    const GroupRange range = scan_group(values + begin, len);
    const detail::GroupMap map =
        detail::make_group_map(spec, range.min_value, range.max_value, range.finite);
    encode_group(map, values + begin, len, q);
    decode_group(map.params, q, len, out + begin);
    poisoned += map.poisoned ? 1 : 0;
  }
  return poisoned;
}

}  // namespace echo
