// Dual error-feedback compensator (paper Sec. 5, Algorithm 1), per rank, one state per pass direction.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "echo/dtype.h"
#include "echo/status.h"

namespace echo {

// kDeficit: a closed loop on the stream's deficit (docs/numerics.md 6.2): m1 holds it, m2 is unused;
//           units 'stream', residual 'local', gains 'sum' and profile 'flat' only.
enum class CompensatorMode : std::uint8_t { kOff = 0, kSingle = 1, kDual = 2, kDeficit = 3 };
// kGlobal: u_i = x'_i - y / P (the paper's residual).
// kLocal: u_i = the rounding errors rank i injected itself (push errors on the segments it sent,
//         and as owner the gather error of its own segment); sum_i u_i = -delta as in kGlobal.
enum class ResidualMode : std::uint8_t { kGlobal = 0, kLocal = 1 };
// kSite: the state is carried from site to site in the sites' own units (the paper's).
// kStream: in residual-stream units through each site's post-norm (docs/numerics.md 6.1); a call
//          then needs its site's SiteInfo (echo/site.h).
enum class CompensatorUnits : std::uint8_t { kSite = 0, kStream = 1 };
// Per-feature shape of the stream gains at a post-norm site (docs/numerics.md 6.1, step 6):
// kFlat: one gain per row (the norm's RMS gain); kSqrt: each feature's gains also times the square
//        root of that feature's weight over the weights' RMS (floored), which needs the site's weights.
enum class CompensatorProfile : std::uint8_t { kFlat = 0, kSqrt = 1 };
// Which row RMS the stream gains of a post-norm site are made of (docs/numerics.md 6.1, step 8):
// kOwn: the rank's own partial row's, before its push (update and apply alike);
// kSum: the update at the delivered sum's row RMS r, and the apply at the rank's own RMS times the
//       ratio r / rho that the rank formed at the last site of the same kind; a call then needs its
//       site's kind (SiteInfo::kind).
enum class CompensatorGains : std::uint8_t { kOwn = 0, kSum = 1 };

const char* compensator_mode_name(CompensatorMode mode);  // "off", "single", "dual", "deficit"
std::optional<CompensatorMode> parse_compensator_mode(std::string_view name);
const char* residual_mode_name(ResidualMode mode);  // "global", "local"
std::optional<ResidualMode> parse_residual_mode(std::string_view name);
const char* compensator_units_name(CompensatorUnits units);  // "site", "stream"
std::optional<CompensatorUnits> parse_compensator_units(std::string_view name);
const char* compensator_profile_name(CompensatorProfile profile);  // "flat", "sqrt"
std::optional<CompensatorProfile> parse_compensator_profile(std::string_view name);
const char* compensator_gains_name(CompensatorGains gains);  // "own", "sum"
std::optional<CompensatorGains> parse_compensator_gains(std::string_view name);

struct CompensatorSpec {
  CompensatorMode mode = CompensatorMode::kDual;
  ResidualMode residual = ResidualMode::kGlobal;
  float eta = 0.75f;   // gain
  float a = 0.35f;     // blend of the slow average
  float beta1 = 0.7f;  // slow decay
  float beta2 = 0.3f;  // fast decay
  float beta = 0.4f;   // decay of the single average (kSingle)
  // Type the averages are stored in: kFloat32, or kBFloat16 (each updated average rounded to
  // bf16, half the state's memory traffic; docs/numerics.md 6). The arithmetic is fp32 either way.
  DType state_dtype = DType::kFloat32;
  // Units of the carried state (docs/numerics.md 6.1).
  CompensatorUnits units = CompensatorUnits::kSite;
  // Units 'stream' only (docs/numerics.md 6.1, steps 6 and 7): the gains' per-feature profile, and
  // the clip: > 0 clamps each rank's correction per element to clip times the RMS of its own row.
  CompensatorProfile profile = CompensatorProfile::kFlat;
  float clip = 0.0f;
  // Units 'stream' only (docs/numerics.md 6.1, step 8): the row RMS the gains are made of.
  CompensatorGains gains = CompensatorGains::kOwn;

  // eta, a in [0, 1]; decays in [0, 1); state_dtype float32 or bfloat16; clip finite and >= 0;
  // a profile other than flat, a clip, or gains other than 'own' only with units 'stream'; mode
  // 'deficit' only with units 'stream', residual 'local', gains 'sum' and profile 'flat'.
  Status validate() const;
};

// Site kinds with a state of their own under gains 'sum' (SiteKind: 0 attention, 1 MLP).
constexpr int kSiteKinds = 2;

// One rank's averages for one pass direction (mode 'deficit': m1 is its deficit); m2 is unused in
// modes kSingle and kDeficit. Empty means "reset":
// the next call sizes it to the message and starts from zero.
struct CompensatorState {
  std::vector<float> m1;
  std::vector<float> m2;
  // Gains 'sum' (docs/numerics.md 6.1, step 8): per site kind, each token row's ratio
  // fp32(r / rho) formed at the last forward call at a post-norm site of that kind; empty: none yet.
  std::array<std::vector<float>, kSiteKinds> row_ratios;
  void reset() {
    m1.clear();
    m2.clear();
    for (std::vector<float>& ratios : row_ratios) ratios.clear();
  }
};

// x_prime[i] = x[i] + c[i] with c = eta * (a * m1 + (1 - a) * m2) (dual) or eta * m1 (single,
// deficit).
// An empty state gives c = 0. x and x_prime may alias. A NaN in x_prime is the canonical one.
void compensator_apply(const CompensatorSpec& spec, const CompensatorState& state, const float* x,
                       std::size_t count, float* x_prime);

// m_j = beta_j * m_j + (1 - beta_j) * u (single, dual), or m1 = m1 + (u - eta * m1) (deficit
// without a post-norm, numerics 6.2), sizing an empty state to count first.
void compensator_update(const CompensatorSpec& spec, CompensatorState& state, const float* residual,
                        std::size_t count);

}  // namespace echo
