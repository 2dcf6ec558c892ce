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

// What happens to a finite group whose scale overflows fp16 (range beyond about 65504 * L).
enum class OverflowGroups : std::uint8_t {
  kPoison = 0,  // the group is poisoned: NaN out (docs/numerics.md 2.1)
  kWide = 1,    // the default: a bf16 scale flagged in the group's scale field (docs/numerics.md 2.4)
};
const char* overflow_groups_name(OverflowGroups mode);  // "poison", "wide"
std::optional<OverflowGroups> parse_overflow_groups(std::string_view name);

// A transform of every full group before quantization, inverted after dequantization.
enum class Rotation : std::uint8_t {
  kNone = 0,
  kHadamard = 1,  // randomized Hadamard transform (docs/numerics.md 2.6)
};
const char* rotation_name(Rotation rotation);  // "none", "hadamard"
std::optional<Rotation> parse_rotation(std::string_view name);

inline constexpr int kMaxOutliers = 2;

// One outlier sent exactly (docs/numerics.md 2.5): its index in the group and its bf16 bits. An
// unused slot has index 0xFFFF.
struct OutlierEntry {
  std::uint16_t index = 0xFFFF;
  std::uint16_t value = 0;
};

inline constexpr int kMinBits = 2;
inline constexpr int kMaxBits = 8;
inline constexpr int kMinGroup = 16;
inline constexpr int kMaxGroup = 1024;
inline constexpr int kDefaultGroup = 128;

struct QuantSpec {
  int bits = 4;
  int group = kDefaultGroup;
  QuantizerKind kind = QuantizerKind::kZeroAware;
  // Per group, this many largest-magnitude values travel as bf16 with their index (0, 1 or 2).
  int outliers = 0;
  OverflowGroups overflow = OverflowGroups::kWide;
  Rotation rotation = Rotation::kNone;

  // bits in [2, 8], group a power of two in [16, 1024], outliers in [0, 2].
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
  // Bytes of outlier entries per group on the wire: 4 per outlier (bf16 value, uint16 index).
  std::size_t outlier_bytes() const { return static_cast<std::size_t>(outliers) * 4; }
  // Bits per element on the wire for full groups: codes, parameters and outlier entries.
  double wire_bits_per_element() const {
    return 8.0 * static_cast<double>(packed_group_bytes() + param_bytes() + outlier_bytes()) / group;
  }
  // Whether every group travels as codes and parameters alone, untransformed: no outliers, no
  // rotation. (Wide groups, the default, change a group only where poison would give NaN.)
  bool is_plain() const { return outliers == 0 && rotation == Rotation::kNone; }
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
// params[num_groups] the parameters, outliers[num_groups * spec.outliers] the outlier entries
// (may be null when spec.outliers is 0). Returns the number of poisoned groups. The rotation is no
// part of it: it applies to whole messages (echo/rotation.h).
std::size_t quantize(const QuantSpec& spec, const float* values, std::size_t count,
                     std::uint8_t* codes, GroupParams* params, OutlierEntry* outliers = nullptr);

// out[i] = scale * (code[i] - zero_point) of element i's group, in fp32 without contraction (a
// wide group: docs/numerics.md 2.4); then every outlier entry's value at its index.
void dequantize(const QuantSpec& spec, const std::uint8_t* codes, const GroupParams* params,
                std::size_t count, float* out, const OutlierEntry* outliers = nullptr);

// quantize followed by dequantize; returns the number of poisoned groups.
std::size_t quantize_dequantize(const QuantSpec& spec, const float* values, std::size_t count,
                                float* out);

}  // namespace echo
