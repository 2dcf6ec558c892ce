// The verification columns of one row at one size.
#pragma once

#include <optional>

namespace echo::bench {

struct Verification {
  std::optional<unsigned long long> wrong;  // elements of all ranks unlike the CPU reference; empty: n/a
  int differ = 0;                           // ranks whose output differs from rank 0's
  double rel_error = 0;                     // rank 0's result against the exact fp64 sum
};

}  // namespace echo::bench
