// Wire format of one segment: packed b-bit codes followed by fp16 parameters (docs/wire-format.md).
#pragma once

#include <cstddef>
#include <cstdint>

#include "echo/quantizer.h"

namespace echo {

// Bytes one segment of count elements occupies on the wire: every group, the last one included,
// takes packed_group_bytes() of codes, then param_bytes() per group, then outlier_bytes() per group.
std::size_t wire_bytes(const QuantSpec& spec, std::size_t count);

// Packs codes LSB-first into a little-endian bit stream: for 4 bits, element 2k sits in the low
// nibble of byte k and element 2k+1 in the high nibble. Pads the last group with zero codes.
// Then appends scale (and zero-point unless symmetric) of each group as little-endian fp16, then
// (spec.outliers > 0) each group's outlier entries: bf16 value, then uint16 index, little-endian.
void pack_segment(const QuantSpec& spec, const std::uint8_t* codes, const GroupParams* params,
                  std::size_t count, std::uint8_t* wire, const OutlierEntry* outliers = nullptr);
void unpack_segment(const QuantSpec& spec, const std::uint8_t* wire, std::size_t count,
                    std::uint8_t* codes, GroupParams* params, OutlierEntry* outliers = nullptr);

}  // namespace echo
