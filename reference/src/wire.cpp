#include "echo/wire.h"

#include <cstring>

#include "echo/dtype.h"

namespace echo {

std::size_t wire_bytes(const QuantSpec& spec, std::size_t count) {
  const std::size_t groups = spec.num_groups(count);
  return groups * (spec.packed_group_bytes() + spec.param_bytes() + spec.outlier_bytes());
}

void pack_segment(const QuantSpec& spec, const std::uint8_t* codes, const GroupParams* params,
                  std::size_t count, std::uint8_t* wire, const OutlierEntry* outliers) {
  const std::size_t groups = spec.num_groups(count);
  const std::size_t code_bytes = groups * spec.packed_group_bytes();
  std::memset(wire, 0, code_bytes);
  const unsigned bits = static_cast<unsigned>(spec.bits);
  for (std::size_t e = 0; e < count; ++e) {
    const std::size_t bit = e * bits;
    const unsigned value = codes[e];
    // A code spans at most two bytes (bits <= 8).
    wire[bit / 8] |= static_cast<std::uint8_t>(value << (bit % 8));
    if (bit % 8 + bits > 8) wire[bit / 8 + 1] |= static_cast<std::uint8_t>(value >> (8 - bit % 8));
  }
  std::uint8_t* p = wire + code_bytes;
  for (std::size_t k = 0; k < groups; ++k) {
    p[0] = static_cast<std::uint8_t>(params[k].scale & 0xFF);
    p[1] = static_cast<std::uint8_t>(params[k].scale >> 8);
    p += 2;
    if (spec.kind != QuantizerKind::kSymmetric) {
      p[0] = static_cast<std::uint8_t>(params[k].zero_point & 0xFF);
      p[1] = static_cast<std::uint8_t>(params[k].zero_point >> 8);
      p += 2;
    }
  }
  const std::size_t entries = groups * static_cast<std::size_t>(spec.outliers);
  for (std::size_t e = 0; e < entries; ++e) {
    const OutlierEntry entry = outliers != nullptr ? outliers[e] : OutlierEntry{};
    p[0] = static_cast<std::uint8_t>(entry.value & 0xFF);
    p[1] = static_cast<std::uint8_t>(entry.value >> 8);
    p[2] = static_cast<std::uint8_t>(entry.index & 0xFF);
    p[3] = static_cast<std::uint8_t>(entry.index >> 8);
    p += 4;
  }
}

void unpack_segment(const QuantSpec& spec, const std::uint8_t* wire, std::size_t count,
                    std::uint8_t* codes, GroupParams* params, OutlierEntry* outliers) {
  const std::size_t groups = spec.num_groups(count);
  const unsigned bits = static_cast<unsigned>(spec.bits);
  const unsigned mask = (1u << bits) - 1u;
  for (std::size_t e = 0; e < count; ++e) {
    const std::size_t bit = e * bits;
    unsigned value = wire[bit / 8] >> (bit % 8);
    if (bit % 8 + bits > 8) value |= static_cast<unsigned>(wire[bit / 8 + 1]) << (8 - bit % 8);
    codes[e] = static_cast<std::uint8_t>(value & mask);
  }
  const std::uint8_t* p = wire + groups * spec.packed_group_bytes();
  const std::uint16_t implicit_zero =
      float_to_half_bits(static_cast<float>(1 << (spec.bits - 1)));
  for (std::size_t k = 0; k < groups; ++k) {
    params[k].scale = static_cast<std::uint16_t>(p[0] | (p[1] << 8));
    p += 2;
    if (spec.kind != QuantizerKind::kSymmetric) {
      params[k].zero_point = static_cast<std::uint16_t>(p[0] | (p[1] << 8));
      p += 2;
    } else {
      params[k].zero_point = implicit_zero;
    }
  }
  const std::size_t entries = groups * static_cast<std::size_t>(spec.outliers);
  for (std::size_t e = 0; e < entries && outliers != nullptr; ++e) {
    outliers[e].value = static_cast<std::uint16_t>(p[0] | (p[1] << 8));
    outliers[e].index = static_cast<std::uint16_t>(p[2] | (p[3] << 8));
    p += 4;
  }
}

}  // namespace echo
