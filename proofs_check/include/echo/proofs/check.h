// One falsifiable check of a claim of the paper: the claim as a formula, the measured value, the
// allowed value, and the verdict. Exact checks (identities in exact arithmetic, compared bit for
// bit) are kept apart from approximate ones, whose tolerance is a named constant with a derivation.
#pragma once

#include <string>
#include <vector>

namespace echo::proofs {

// kWarn: a premise of the theorems that the checked model does not meet (their bounds do not apply
// to it); not a failure of the implementation or of a claim.
enum class Verdict { kPass, kFail, kSkip, kInfo, kWarn };
const char* verdict_name(Verdict verdict);  // "PASS", "FAIL", "SKIP", "INFO", "WARN"

struct CheckResult {
  std::string name;       // e.g. "thm1.adversary.constant"
  std::string statement;  // the paper's claim as a formula
  double measured = 0.0;
  std::string relation;   // "<=", ">=", "==", "in"
  double allowed = 0.0;   // bound, or the expected value for "==" / "in"
  double tolerance = 0.0; // half-width for "in"
  Verdict verdict = Verdict::kInfo;
  std::string note;       // setting, confidence, derivation pointer
};

CheckResult at_most(std::string name, std::string statement, double measured, double allowed,
                    std::string note = {});
CheckResult at_least(std::string name, std::string statement, double measured, double allowed,
                     std::string note = {});
// |measured - expected| <= tolerance.
CheckResult within(std::string name, std::string statement, double measured, double expected,
                   double tolerance, std::string note = {});
// Bitwise equality of two doubles (exact checks).
CheckResult exactly(std::string name, std::string statement, double measured, double expected,
                    std::string note = {});
CheckResult skipped(std::string name, std::string statement, std::string why);
CheckResult info(std::string name, std::string statement, double measured, std::string note = {});
// A premise: PASS when measured <= allowed, else WARN with `warning` in the note.
CheckResult premise_at_most(std::string name, std::string statement, double measured, double allowed,
                            std::string note, const std::string& warning);

struct ProveOptions {
  // Traces for the source-level checks; empty: the bundled example and data/smollm2/*.h5.
  std::vector<std::string> traces;
  std::string source_dir = ".";  // repository root, for the default trace paths
};

// Every group of checks, in the order of the paper.
std::vector<CheckResult> constant_checks();
std::vector<CheckResult> source_checks();       // Lemma 1, Theorem 1, Eq. 21 (reference compensator)
std::vector<CheckResult> noise_checks();        // Remark 1 (Monte Carlo)
std::vector<CheckResult> linear_checks();       // Lemmas 2-4
std::vector<CheckResult> propagation_checks();  // Theorem 2, Remark 2, Corollary 1, Proposition 2
std::vector<CheckResult> backward_checks();     // Proposition 3
std::vector<CheckResult> tail_and_remainder_checks();        // Theorem 2 (ii), Proposition 1, Corollary 2
std::vector<CheckResult> trace_checks(const ProveOptions& options);

std::vector<CheckResult> run_all_checks(const ProveOptions& options);

}  // namespace echo::proofs
