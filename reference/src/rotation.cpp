// Group-wise loops over the Hadamard rotation of echo/numerics/hadamard.h.
#include "echo/rotation.h"

#include "echo/numerics/hadamard.h"

namespace echo {
namespace {

template <bool kForward>
void apply_to_full_groups(const QuantSpec& spec, float* values, std::size_t count) {
  if (spec.rotation != Rotation::kHadamard) return;
  const std::size_t g = static_cast<std::size_t>(spec.group);
  const std::size_t full = count / g;
#pragma omp parallel for schedule(static) if (full >= 256)
  for (std::size_t i = 0; i < full; ++i) {
    float* x = values + i * g;
    if (kForward) {
      numerics::rotate_group(x, spec.group);
    } else {
      numerics::unrotate_group(x, spec.group);
    }
  }
}

}  // namespace

void rotate_groups(const QuantSpec& spec, float* values, std::size_t count) {
  apply_to_full_groups<true>(spec, values, count);
}

void unrotate_groups(const QuantSpec& spec, float* values, std::size_t count) {
  apply_to_full_groups<false>(spec, values, count);
}

}  // namespace echo
