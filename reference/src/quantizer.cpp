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

void encode_group(const numerics::GroupMap& map, const float* x, std::size_t len, std::uint8_t* q) {
  if (map.poisoned) {
    std::memset(q, 0, len);
    return;
  }
  const numerics::GroupMap m = map;  // a local copy: the byte stores cannot alias it
  const float magic = numerics::encode_magic(m);
#pragma omp simd
  for (std::size_t i = 0; i < len; ++i) {
    q[i] = static_cast<std::uint8_t>(numerics::code_of_bits(numerics::encode_bits(m, magic, x[i])));
  }
}

void decode_group(const GroupParams& params, const std::uint8_t* q, std::size_t len, float* out) {
  const float s = numerics::half_bits_to_float(params.scale);
  const float z = numerics::half_bits_to_float(params.zero_point);
#pragma omp simd
  for (std::size_t i = 0; i < len; ++i) out[i] = numerics::dequantize_value(s, z, static_cast<float>(q[i]));
}

numerics::GroupMap group_map(const QuantSpec& spec, float mn, float mx, bool finite,
                             bool scale_to_nearest = false) {
  return numerics::make_group_map({spec.bits, spec.kind, scale_to_nearest}, mn, mx, finite);
}

GroupParams params_of(const numerics::GroupMap& map) { return {map.scale, map.zero_point}; }

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
  return params_of(group_map(spec, min_value, max_value, finite));
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
    const numerics::GroupMap map =
        group_map(spec, range.min_value, range.max_value, range.finite, round_scale_to_nearest);
    encode_group(map, values + begin, len, codes + begin);
    params[k] = params_of(map);
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
    const numerics::GroupMap map = group_map(spec, range.min_value, range.max_value, range.finite);
    encode_group(map, values + begin, len, q);
    decode_group(params_of(map), q, len, out + begin);
    poisoned += map.poisoned ? 1 : 0;
  }
  return poisoned;
}

}  // namespace echo
