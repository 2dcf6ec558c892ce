// Group-wise b-bit quantizers with fp16 parameters (paper Sec. 4.3; exact arithmetic in
// docs/numerics.md). Every quantizer dequantizes as x^ = scale * (code - zero_point) with both
// parameters used exactly as stored in fp16.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "echo/status.h"

namespace echo {

enum class QuantizerKind : std::uint8_t {
  kZeroAware = 0,  // asymmetric; integer zero-point when zero is in or near the group (default)
  kNaive = 1,      // asymmetric anchored at the group minimum; zero-point not rounded
  kSymmetric = 2,  // one scale, codes symmetric about an implicit zero-point 2^(b-1)
};

const char* quantizer_name(QuantizerKind kind);  // "zero-aware", "naive", "symmetric"
std::optional<QuantizerKind> parse_quantizer(std::string_view name);

inline constexpr int kMinBits = 2;
inline constexpr int kMaxBits = 8;
inline constexpr int kMinGroup = 16;
inline constexpr int kMaxGroup = 1024;
inline constexpr int kDefaultGroup = 128;

struct QuantSpec {
  int bits = 4;
  int group = kDefaultGroup;
  QuantizerKind kind = QuantizerKind::kZeroAware;

  // bits in [2, 8], group a power of two in [16, 1024].
  Status validate() const;
  // Largest code, 2^bits - 1.
  int max_code() const { return (1 << bits) - 1; }
  std::size_t num_groups(std::size_t count) const {
    return (count + static_cast<std::size_t>(group) - 1) / static_cast<std::size_t>(group);
  }
  // Bytes of packed codes for one full group, group * bits / 8.
  std::size_t packed_group_bytes() const { return static_cast<std::size_t>(group) * bits / 8; }
  // Bytes of fp16 parameters per group on the wire: 2 (symmetric) or 4 (asymmetric).
  std::size_t param_bytes() const { return kind == QuantizerKind::kSymmetric ? 2 : 4; }
};

// fp16 bit patterns of one group's parameters. A NaN scale (kCanonicalNaNHalf) marks a poisoned
// group (non-finite input or a scale beyond fp16 range): every element then dequantizes to NaN.
struct GroupParams {
  std::uint16_t scale = 0;
  std::uint16_t zero_point = 0;
};

// Parameters for a group whose finite values span [min_value, max_value] (the rule:
// echo/numerics/group_params.h, make_group_map).
GroupParams choose_group_params(const QuantSpec& spec, float min_value, float max_value);

// Quantizes count values as ceil(count / group) consecutive groups (the last may be partial and
// is quantized over its own elements only). codes[count] receives one unpacked code per element,
// params[num_groups] the parameters. Returns the number of poisoned groups.
std::size_t quantize(const QuantSpec& spec, const float* values, std::size_t count,
                     std::uint8_t* codes, GroupParams* params);

// out[i] = scale * (code[i] - zero_point) of element i's group, in fp32 without contraction.
void dequantize(const QuantSpec& spec, const std::uint8_t* codes, const GroupParams* params,
                std::size_t count, float* out);

// quantize followed by dequantize; returns the number of poisoned groups.
std::size_t quantize_dequantize(const QuantSpec& spec, const float* values, std::size_t count,
                                float* out);

}  // namespace echo
