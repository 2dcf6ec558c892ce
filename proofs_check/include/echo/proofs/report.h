// The prove table (text) and its JSON form for the notebooks.
#pragma once

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "echo/proofs/check.h"
#include "echo/status.h"

namespace echo::proofs {

void print_table(std::ostream& out, const std::vector<CheckResult>& results);
std::size_t count_failures(const std::vector<CheckResult>& results);
// {"checks": [...], "series": {name: [values]}}; series carry curves for plots (may be empty).
Status write_json(const std::string& path, const std::vector<CheckResult>& results,
                  const std::map<std::string, std::vector<double>>& series);

// Curves the checks computed (E_N vs N, ||S_t|| vs t, T_m), filled while they run.
std::map<std::string, std::vector<double>>& series_registry();

}  // namespace echo::proofs
