// Pieces of the high-probability and second-order checks that the unit tests drive directly.
#pragma once

#include <string>
#include <vector>

#include "echo/proofs/check.h"

namespace echo::proofs {

// "X <= bound with probability >= 1 - p", from independent draws of X: FAIL when the share of
// draws above the bound exceeds p by more than kExceedanceZ binomial standard errors. Measured:
// the draw of rank floor(M (p + z sqrt(p (1 - p) / M))) + 1 from the top over the bound, so the
// row reads as a ratio that may not exceed 1.
CheckResult exceeds_with_probability_at_most(std::string name, std::string statement,
                                             std::vector<double> draws, double bound, double p,
                                             std::string note = {});

}  // namespace echo::proofs
