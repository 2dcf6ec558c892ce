#include "echo/proofs/check.h"

#include <cmath>
#include <utility>

#include <Eigen/Core>

namespace echo::proofs {

const char* verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::kPass: return "PASS";
    case Verdict::kFail: return "FAIL";
    case Verdict::kSkip: return "SKIP";
    case Verdict::kInfo: return "INFO";
    case Verdict::kWarn: return "WARN";
  }
  return "?";
}

namespace {
CheckResult make(std::string name, std::string statement, double measured, const char* relation,
                 double allowed, bool pass, std::string note) {
  CheckResult r;
  r.name = std::move(name);
  r.statement = std::move(statement);
  r.measured = measured;
  r.relation = relation;
  r.allowed = allowed;
  // A NaN measurement never passes.
  r.verdict = pass && !std::isnan(measured) ? Verdict::kPass : Verdict::kFail;
  r.note = std::move(note);
  return r;
}
}  // namespace

CheckResult at_most(std::string name, std::string statement, double measured, double allowed,
                    std::string note) {
  return make(std::move(name), std::move(statement), measured, "<=", allowed, measured <= allowed,
              std::move(note));
}

CheckResult at_least(std::string name, std::string statement, double measured, double allowed,
                     std::string note) {
  return make(std::move(name), std::move(statement), measured, ">=", allowed, measured >= allowed,
              std::move(note));
}

CheckResult within(std::string name, std::string statement, double measured, double expected,
                   double tolerance, std::string note) {
  CheckResult r = make(std::move(name), std::move(statement), measured, "in", expected,
                       std::fabs(measured - expected) <= tolerance, std::move(note));
  r.tolerance = tolerance;
  return r;
}

CheckResult exactly(std::string name, std::string statement, double measured, double expected,
                    std::string note) {
  return make(std::move(name), std::move(statement), measured, "==", expected, measured == expected,
              std::move(note));
}

CheckResult skipped(std::string name, std::string statement, std::string why) {
  CheckResult r;
  r.name = std::move(name);
  r.statement = std::move(statement);
  r.measured = std::nan("");
  r.relation = "-";
  r.allowed = std::nan("");
  r.verdict = Verdict::kSkip;
  r.note = std::move(why);
  return r;
}

CheckResult info(std::string name, std::string statement, double measured, std::string note) {
  CheckResult r;
  r.name = std::move(name);
  r.statement = std::move(statement);
  r.measured = measured;
  r.relation = "-";
  r.allowed = std::nan("");
  r.verdict = Verdict::kInfo;
  r.note = std::move(note);
  return r;
}

CheckResult premise_at_most(std::string name, std::string statement, double measured, double allowed,
                            std::string note, const std::string& warning) {
  CheckResult r = at_most(std::move(name), std::move(statement), measured, allowed, std::move(note));
  if (r.verdict == Verdict::kFail) {
    r.verdict = Verdict::kWarn;
    r.note = warning + (r.note.empty() ? "" : "; " + r.note);
  }
  return r;
}

std::vector<CheckResult> run_all_checks(const ProveOptions& options) {
  // The checks multiply small dense matrices; Eigen's OpenMP fan-out costs more than it gains
  // there and spins on shared cores (100x slower on a loaded 2-core machine).
  Eigen::setNbThreads(1);
  std::vector<CheckResult> all;
  for (auto group : {constant_checks, source_checks, noise_checks, linear_checks,
                     propagation_checks, tail_and_remainder_checks, backward_checks}) {
    std::vector<CheckResult> part = group();
    all.insert(all.end(), part.begin(), part.end());
  }
  std::vector<CheckResult> part = trace_checks(options);
  all.insert(all.end(), part.begin(), part.end());
  return all;
}

}  // namespace echo::proofs
