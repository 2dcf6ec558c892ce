// Every numeric constant of the contract (docs/numerics.md), under one name each.
#pragma once

#include <cstdint>

namespace echo::numerics {

// The one NaN of each type that the library writes (docs/numerics.md 1): the positive quiet NaN.
// IEEE 754 leaves the sign and payload of a NaN result to the implementation (x86 returns the
// first NaN operand, a GPU its own canonical NaN, and a compiler may swap the operands of a
// commutative operation), so every NaN is rewritten to these where a value is stored. The fp16 one
// is also the scale of a poisoned group.
inline constexpr std::uint32_t kCanonicalNaNFloat = 0x7FC00000u;
inline constexpr std::uint16_t kCanonicalNaNBFloat16 = 0x7FC0;
inline constexpr std::uint16_t kCanonicalNaNHalf = 0x7E00;

inline constexpr std::uint32_t kFloatAbsMask = 0x7FFFFFFFu;
inline constexpr std::uint32_t kFloatInfinityBits = 0x7F800000u;
// The largest finite binary32, FLT_MAX.
inline constexpr float kFloatMax = 3.402823466e38f;

// binary16: +Inf, and the smallest subnormal 2^-24 (the floor of a quantizer scale).
inline constexpr std::uint16_t kHalfInfinityBits = 0x7C00;
inline constexpr std::uint16_t kHalfExponentMask = 0x7C00;
inline constexpr std::uint16_t kHalfMinSubnormalBits = 0x0001;
inline constexpr std::uint16_t kBFloat16InfinityBits = 0x7F80;
// A scale field with this bit set holds a wide group's bf16 scale (docs/numerics.md 2.4).
inline constexpr std::uint16_t kWideScaleFlag = 0x8000;

// 1.5 * 2^23 (bits 0x4B400000): adding it rounds a float of magnitude below 2^22 to an integer,
// ties to even, and leaves that integer in the low mantissa bits (its low 22 bits are zero).
inline constexpr float kRintMagic = 12582912.0f;

// The scale floor of the asymmetric quantizers: s >= |lo| * 2^-11 keeps the zero-point
// -lo / s within fp16's 2048 exact integers (docs/numerics.md 2.2).
inline constexpr float kScaleFloorFactor = 0x1p-11f;

// Backward mode: the shared exponent k puts max |x'| * 2^k in [2^14, 2^15) (docs/numerics.md 5).
inline constexpr int kBackwardTargetExponent = 14;

}  // namespace echo::numerics
