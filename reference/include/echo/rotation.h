// The randomized Hadamard rotation applied group by group to a run of values (docs/numerics.md
// 2.6); the rule on one group is echo/numerics/hadamard.h.
#pragma once

#include <cstddef>

#include "echo/quantizer.h"

namespace echo {

// Rotates every full group of values[count] in place (groups start at values[0]); a partial last
// group is left as it is. Does nothing unless spec.rotation is kHadamard.
void rotate_groups(const QuantSpec& spec, float* values, std::size_t count);
// The inverse of rotate_groups on the same groups.
void unrotate_groups(const QuantSpec& spec, float* values, std::size_t count);

}  // namespace echo
