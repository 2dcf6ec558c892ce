#include "echo/proofs/report.h"
#include "echo/text_output.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace echo::proofs {
namespace {

std::string number(double v) {
  if (std::isnan(v)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

std::map<std::string, std::vector<double>>& series_registry() {
  static std::map<std::string, std::vector<double>> registry;
  return registry;
}

std::size_t count_failures(const std::vector<CheckResult>& results) {
  std::size_t n = 0;
  for (const CheckResult& r : results) n += r.verdict == Verdict::kFail ? 1 : 0;
  return n;
}

void print_table(std::ostream& out, const std::vector<CheckResult>& results) {
  std::size_t wn = 5, ws = 9;
  for (const CheckResult& r : results) {
    wn = std::max(wn, r.name.size());
    ws = std::max(ws, r.statement.size());
  }
  char line[1024];
  std::snprintf(line, sizeof line, "%-*s  %-*s  %13s  %-2s %-22s %s\n", static_cast<int>(wn), "check",
                static_cast<int>(ws), "statement", "measured", "", "allowed", "verdict");
  out << line;
  for (const CheckResult& r : results) {
    std::string allowed = number(r.allowed);
    if (r.relation == "in") allowed += " +- " + number(r.tolerance);
    std::snprintf(line, sizeof line, "%-*s  %-*s  %13s  %-2s %-22s %s", static_cast<int>(wn),
                  r.name.c_str(), static_cast<int>(ws), r.statement.c_str(), number(r.measured).c_str(),
                  r.relation == "-" ? "" : r.relation.c_str(), allowed.c_str(), verdict_name(r.verdict));
    out << line;
    if (!r.note.empty()) out << "  (" << r.note << ")";
    out << "\n";
  }
  std::size_t counts[5] = {0, 0, 0, 0, 0};
  for (const CheckResult& r : results) ++counts[static_cast<int>(r.verdict)];
  out << counts[0] << " passed, " << counts[1] << " failed, " << counts[2] << " skipped, "
      << counts[3] << " informational, " << counts[4] << " warnings\n";
}

Status write_json(const std::string& path, const std::vector<CheckResult>& results,
                  const std::map<std::string, std::vector<double>>& series) {
  std::ostringstream f;
  {
    f << "{\n  \"format\": \"echo-prove\",\n  \"version\": 1,\n  \"checks\": [\n";
    for (std::size_t i = 0; i < results.size(); ++i) {
      const CheckResult& r = results[i];
      f << "    {\"name\": " << json_string(r.name) << ", \"statement\": " << json_string(r.statement)
        << ", \"measured\": " << json_number(r.measured) << ", \"relation\": " << json_string(r.relation)
        << ", \"allowed\": " << json_number(r.allowed) << ", \"tolerance\": " << json_number(r.tolerance)
        << ", \"verdict\": " << json_string(verdict_name(r.verdict)) << ", \"note\": " << json_string(r.note)
        << "}" << (i + 1 < results.size() ? "," : "") << "\n";
    }
    f << "  ],\n  \"series\": {";
    std::size_t k = 0;
    for (const auto& [name, values] : series) {
      f << (k++ ? ",\n" : "\n") << "    " << json_string(name) << ": [";
      for (std::size_t i = 0; i < values.size(); ++i) f << (i ? ", " : "") << json_number(values[i]);
      f << "]";
    }
    f << "\n  }\n}\n";
  }
  return write_text_file_atomically(path, f.str());
}

}  // namespace echo::proofs
