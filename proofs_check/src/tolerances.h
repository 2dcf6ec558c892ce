// Tolerances shared by several checks, each with its derivation.
#pragma once

#include <cstddef>

namespace echo::proofs {

// The paper prints its constants to the digits shown (2.095, 1.280, 26.7, 5.0): a printed value
// is correct when the exact value rounds to it, i.e. lies within half a unit of the last digit.
inline constexpr double kHalfUnitThreeDecimals = 5e-4;
inline constexpr double kHalfUnitOneDecimal = 5e-2;

// Identities evaluated in float64 on both sides: each side is a sum of at most ~N^2 products of
// factors of norm <= a few, so each side carries a relative rounding error below
// N^2 * 2^-52 ~ 512^2 * 2.2e-16 ~ 6e-11; 1e-9 leaves a margin of 15.
inline constexpr double kFloat64IdentityRelTol = 1e-9;

// The theorems' pre-norm premise (each site's output joins the residual stream as it is): a model
// whose sites pass through a post-norm meets it when the norms' gains on the sites' errors agree
// across sites, since one compensator state is carried from site to site. Gains within a factor of
// 2 of each other (max over min of the per-site median) change each site's weight in the
// accumulated stream error S_t by less than the Eq. 21 bound's measured slack on SmolLM2's trace
// (0.078 of the bound, i.e. a factor above 10); a larger spread leaves the theorems silent.
inline constexpr double kMaxPreNormGainSpread = 2.0;

// Unit roundoff of binary32.
inline constexpr double kFp32Unit = 0x1.0p-24;
// fp32 roundings that touch one element of C_k per rank and site in the reference compensator
// (docs/numerics.md s. 6): 1 in x' = x + c, 4 forming c (a m1, oa m2, their sum, eta *), 2 in
// u = x' - y/P, 3 per average update (beta m, ob u, sum) for 2 averages, carried over earlier
// sites with total weight <= 1/(1 - beta1) < 3.4: 1 + 4 + (2 + 6) * 3.4 = 32.2 -> 33. Each is at
// most kFp32Unit times a quantity bounded by |x'| + |y|/P at that site, so the partial sum
// identities hold up to kRoundingsPerElement * kFp32Unit * sum_{k<=t} sum_i (||x'_ki|| + ||y_k||/P).
inline constexpr double kRoundingsPerElement = 33.0;

// Monte Carlo: one-sided z for a per-statistic false-alarm probability 3.2e-5; with at most 64
// statistics per check a Bonferroni bound keeps a spurious FAIL below 2e-3 per check (and the
// seeds are fixed, so a run is reproducible).
inline constexpr double kConfidenceZ = 4.0;

// High-probability bounds (Theorem 2 (ii), "X <= B with probability >= 1 - p"): of M independent
// draws, the number above B is Binomial(M, p') with p' <= p when the claim holds. The check
// allows M p + z sqrt(M p (1 - p)) of them; the normal approximation of the binomial tail is
// sound while M p (1 - p) >= 9 (M = 1000, p = 0.01 gives 9.9), and z = 4 (a one-sided 3.2e-5,
// Bonferroni over the <= 4 statistics, 2 levels x 2 depths) keeps a spurious FAIL below 1.3e-4.
inline constexpr double kExceedanceZ = kConfidenceZ;

// Second-order remainders r_n = F_n(z_n + E_n) - F_n(z_n) - J_n E_n are differences of vectors of
// norm ~ ||z_n||, so each carries an absolute float64 error of a few 2^-53 ||z_n|| against a size
// of ~ qbar^2 ||z_n||: at qbar = 1e-3 a relative error of 4 * 1.1e-16 / 1e-6 = 4.4e-10 per site.
// Corollary 2 compares two float64 evaluations of norms of the same draws (it holds for their
// empirical law, so no sampling allowance): errors of <= 4.4e-10 relative, summed over <= 2048
// sites with weights <= 1, stay below 9e-7; 1e-6 is the allowance.
inline constexpr double kRemainderRelTol = 1e-6;

}  // namespace echo::proofs
