// Outliers sent exactly (docs/numerics.md 2.5): which elements of a group travel as bf16 values
// with their index instead of codes. The order is total (magnitude, then the lower index), so a
// kernel may merge partial selections in any order and pick the same elements.
#pragma once

#include <cstdint>

#include "echo/numerics/constants.h"
#include "echo/numerics/dtype_rounding.h"
#include "echo/numerics/host_device.h"

namespace echo::numerics {

inline constexpr int kMaxOutliersPerGroup = 2;
// Index of an unused outlier slot (a group of fewer elements than outliers per group).
inline constexpr std::uint16_t kNoOutlierIndex = 0xFFFF;

// The k <= kMaxOutliersPerGroup largest-magnitude elements seen so far, best first.
struct OutlierPicks {
  int index[kMaxOutliersPerGroup];
  float magnitude[kMaxOutliersPerGroup];
  int count;  // slots filled
};

ECHO_HOST_DEVICE_INLINE OutlierPicks no_outlier_picks() {
  OutlierPicks p;
  for (int j = 0; j < kMaxOutliersPerGroup; ++j) {
    p.index[j] = -1;
    p.magnitude[j] = 0.0f;
  }
  p.count = 0;
  return p;
}

// Whether element (ma, ia) ranks before (mb, ib): a larger |x|, or the lower index on equal |x|
// (+0 and -0 are equal). Magnitudes of a finite group, never NaN.
ECHO_HOST_DEVICE bool outlier_ranks_before(float ma, int ia, float mb, int ib) {
  return ma > mb || (ma == mb && ia < ib);
}

// Offers element i of magnitude m to the k best picks.
ECHO_HOST_DEVICE_INLINE void offer_outlier(OutlierPicks& p, int k, float m, int i) {
  int pos = p.count < k ? p.count : k;  // where it lands if it beats nobody
  while (pos > 0 && outlier_ranks_before(m, i, p.magnitude[pos - 1], p.index[pos - 1])) --pos;
  if (pos >= k) return;
  const int last = p.count < k ? p.count : k - 1;
  for (int j = last; j > pos; --j) {
    p.index[j] = p.index[j - 1];
    p.magnitude[j] = p.magnitude[j - 1];
  }
  p.index[pos] = i;
  p.magnitude[pos] = m;
  if (p.count < k) ++p.count;
}

// Whether element i is one of the picks.
ECHO_HOST_DEVICE bool is_outlier(const OutlierPicks& p, int i) {
  for (int j = 0; j < p.count; ++j) {
    if (p.index[j] == i) return true;
  }
  return false;
}

// The 16-bit value an outlier travels as: bf16, round to nearest even (fp32's exponent range).
ECHO_HOST_DEVICE std::uint16_t outlier_value_bits(float x) { return float_to_bf16_bits(x); }
ECHO_HOST_DEVICE float outlier_value(std::uint16_t bits) { return bf16_bits_to_float(bits); }

}  // namespace echo::numerics
