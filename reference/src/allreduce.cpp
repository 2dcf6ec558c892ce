// The owner all-reduce, its ring variant and the exact path over P simulated ranks
// (docs/numerics.md, sections 3-6). Each rank's work is simulated with its own buffers, so the
// rank-identity of the outputs is a property of the algorithm, not of a shared array.
#include "echo/allreduce.h"
#include "echo/alteration.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "echo/numerics/backward_scale.h"
#include "echo/numerics/compensator_step.h"
#include "echo/rotation.h"
#include "quantize_detail.h"

namespace echo {
namespace {

using Buffer = std::vector<float>;

// One quantize -> dequantize of a segment, as a receiver sees it (poisoned groups surface in the
// gather, which quantizes the sum they make non-finite).
// Rotation is outside it: the quantized path runs on rotated values (Workspace::quantized_send).
struct Encoded {
  std::vector<std::uint8_t> codes;
  std::vector<GroupParams> params;
  std::vector<OutlierEntry> outliers;
};

std::size_t encode(const QuantSpec& spec, const float* values, std::size_t len, Encoded& enc,
                   Alteration alteration) {
  enc.codes.resize(len);
  enc.params.resize(spec.num_groups(len));
  enc.outliers.resize(spec.num_groups(len) * static_cast<std::size_t>(spec.outliers));
  return detail::quantize(spec, values, len, enc.codes.data(), enc.params.data(), enc.outliers.data(),
                          alteration == Alteration::kScaleRoundedToNearest);
}

void decode(const QuantSpec& spec, const Encoded& enc, std::size_t len, float* out) {
  dequantize(spec, enc.codes.data(), enc.params.data(), len, out, enc.outliers.data());
}

void transport(const QuantSpec& spec, const float* values, std::size_t len, float* out, Encoded& enc,
               Alteration alteration) {
  encode(spec, values, len, enc, alteration);
  decode(spec, enc, len, out);
}

void scale_by_power_of_two(const float* in, std::size_t count, int k, float* out) {
  const float f = numerics::pow2(k);
#pragma omp parallel for simd schedule(static) if (count >= (1u << 16))
  for (std::size_t i = 0; i < count; ++i) out[i] = in[i] * f;
}

float max_abs(const float* x, std::size_t count) {
  float m = 0.0f;
  int bad = 0;
#pragma omp parallel for simd reduction(max : m) reduction(| : bad) if (count >= (1u << 16))
  for (std::size_t i = 0; i < count; ++i) {
    const float a = std::fabs(x[i]);
    bad |= !numerics::is_finite(a);
    m = a > m ? a : m;
  }
  return bad ? std::numeric_limits<float>::infinity() : m;
}

// Sizes every buffer of `buffers` to count elements, keeping capacity between calls.
void size_buffers(std::vector<Buffer>& buffers, int ranks, std::size_t count) {
  buffers.resize(static_cast<std::size_t>(ranks));
  for (Buffer& b : buffers) b.resize(count);
}

// The simulated ranks' buffers. One workspace per calling thread is kept between calls: a
// replay calls with the same size site after site, and re-allocating these arrays each time
// costs more (page faults) than the arithmetic.
struct Workspace {
  std::vector<Buffer> x_prime;   // x' per rank, gradient units
  std::vector<Buffer> scaled;    // x' * 2^k per rank (used when k != 0)
  std::vector<Buffer> residual;  // local-mode residual per rank
  std::vector<Buffer> rounded;   // exact path, forward bf16: x' rounded to bf16 per rank
  std::vector<Buffer> y;         // each rank's reduced result
  std::vector<Buffer> rotated;   // rotation: x' (or x' * 2^k) rotated group by group, per rank
  Buffer acc;                    // owner sums (send units)
  Buffer u;                      // global-mode residual of one rank
  bool use_scaled = false;
  bool use_rotated = false;
  const float* send(int rank) const {
    return use_scaled ? scaled[rank].data() : x_prime[rank].data();
  }
  // What the quantized path sends: send(rank), rotated when the spec rotates.
  const float* quantized_send(int rank) const {
    return use_rotated ? rotated[rank].data() : send(rank);
  }
};

// Owner (or ring) reduce of segment j into acc; fills local residuals of the senders.
void reduce_segment(const AllReduceSpec& spec, int ranks, int j, std::size_t begin,
                    std::size_t len, float unscale, Workspace& ws, float* acc, Alteration alteration) {
  Encoded enc;
  Buffer received(len);
  Buffer unrotated;
  const bool local = spec.compensator.residual == ResidualMode::kLocal &&
                     spec.compensator.mode != CompensatorMode::kOff;
  if (spec.algorithm == Algorithm::kRing) {
    // The partial sum starts at rank j+1 and ends at the owner j, requantized at every hop.
    const int first = (j + 1) % ranks;
    std::copy_n(ws.quantized_send(first) + begin, len, acc);
    for (int hop = 1; hop < ranks; ++hop) {
      const int r = (first + hop) % ranks;
      transport(spec.quant, acc, len, received.data(), enc, alteration);
      const float* own = ws.quantized_send(r) + begin;
      for (std::size_t e = 0; e < len; ++e) acc[e] = received[e] + own[e];
    }
    return;
  }
  // Push: every rank i != j sends its quantized segment; the owner sums in rank order.
  const bool reverse = alteration == Alteration::kRanksSummedInReverse;
  for (int step = 0; step < ranks; ++step) {
    const int i = reverse ? ranks - 1 - step : step;
    const float* value = ws.quantized_send(i) + begin;
    if (i != j) {
      transport(spec.quant, value, len, received.data(), enc, alteration);
      value = received.data();
      if (local) {
        // The residual is in the compensator's (unrotated) units: the push de-rotated.
        const float* v = received.data();
        if (ws.use_rotated) {
          unrotated.assign(received.begin(), received.end());
          unrotate_groups(spec.quant, unrotated.data(), len);
          v = unrotated.data();
        }
        float* u = ws.residual[i].data() + begin;
        const float* xp = ws.x_prime[i].data() + begin;
        for (std::size_t e = 0; e < len; ++e) u[e] = numerics::local_residual(xp[e], v[e] * unscale);
      }
    }
    if (step == 0) {
      std::copy_n(value, len, acc);
    } else {
      for (std::size_t e = 0; e < len; ++e) acc[e] = acc[e] + value[e];
    }
  }
}

// acc = in_0 + in_1 + ... + in_{P-1} in fp32, left to right (the documented summation order);
// reverse: the deliberate mistake of Alteration::kRanksSummedInReverse.
void sum_in_rank_order(const float* const* in, int ranks, std::size_t count, float* acc,
                       bool reverse = false) {
  if (reverse) {
    for (std::size_t e = 0; e < count; ++e) {
      float a = in[ranks - 1][e];
      for (int r = ranks - 2; r >= 0; --r) a = a + in[r][e];
      acc[e] = a;
    }
    return;
  }
#pragma omp parallel for schedule(static) if (count >= (1u << 16))
  for (std::size_t e = 0; e < count; ++e) {
    float a = in[0][e];
    for (int r = 1; r < ranks; ++r) a = a + in[r][e];
    acc[e] = a;
  }
}

// Groups of the message holding a non-finite value on any rank (the exact path's report).
std::size_t count_nonfinite_groups(const float* const* in, int ranks, std::size_t count,
                                   const QuantSpec& spec) {
  const std::size_t g = static_cast<std::size_t>(spec.group);
  std::size_t groups = 0;
  for (std::size_t begin = 0; begin < count; begin += g) {
    const std::size_t end = std::min(count, begin + g);
    bool bad = false;
    for (int r = 0; r < ranks && !bad; ++r) {
      for (std::size_t e = begin; e < end && !bad; ++e) bad = !std::isfinite(in[r][e]);
    }
    groups += bad ? 1 : 0;
  }
  return groups;
}

Status validate_state(const CompensatorState& state, std::size_t count, int rank,
                      const CompensatorSpec& spec) {
  if (!state.m1.empty() && state.m1.size() != count) {
    return Status(StatusCode::kInvalidArgument,
                  "compensator state of rank " + std::to_string(rank) + " holds " +
                      std::to_string(state.m1.size()) + " elements but the message has " +
                      std::to_string(count) + " (reset the state between passes of different size)");
  }
  if (spec.mode == CompensatorMode::kDual && !state.m2.empty() && state.m2.size() != count) {
    return Status(StatusCode::kInvalidArgument, "compensator state m2 size mismatch");
  }
  return Status::Ok();
}

}  // namespace

const char* algorithm_name(Algorithm algorithm) {
  return algorithm == Algorithm::kRing ? "ring" : "owner";
}

const char* direction_name(Direction direction) {
  return direction == Direction::kBackward ? "backward" : "forward";
}

Segmentation::Segmentation(std::size_t count_, int group_, int ranks_)
    : count(count_), group(static_cast<std::size_t>(group_)), ranks(ranks_) {
  num_groups = (count + group - 1) / group;
  groups_per_segment = (num_groups + ranks - 1) / ranks;
}

std::size_t Segmentation::begin(int segment) const {
  return std::min(static_cast<std::size_t>(segment) * groups_per_segment * group, count);
}

std::size_t Segmentation::end(int segment) const {
  return std::min(static_cast<std::size_t>(segment + 1) * groups_per_segment * group, count);
}

Status AllReduceSpec::validate(int ranks) const {
  if (ranks < 1 || ranks > kMaxRanks) {
    return Status(StatusCode::kInvalidArgument,
                  "ranks must be in [1, 8], got " + std::to_string(ranks));
  }
  if (Status s = quant.validate(); !s.ok()) return s;
  if (Status s = compensator.validate(); !s.ok()) return s;
  if (algorithm == Algorithm::kRing && compensator.residual == ResidualMode::kLocal &&
      compensator.mode != CompensatorMode::kOff) {
    return Status(StatusCode::kInvalidArgument, "the ring algorithm supports the global residual only");
  }
  return Status::Ok();
}

int backward_scale_exponent(float max_abs_value) { return numerics::backward_exponent(max_abs_value); }

void exact_allreduce(DType dtype, int ranks, std::size_t count, const float* const* inputs,
                     float* out) {
  sum_in_rank_order(inputs, ranks, count, out);
  round_to_dtype(out, count, dtype);
}

const char* alteration_name(Alteration alteration) {
  switch (alteration) {
    case Alteration::kNone: return "none";
    case Alteration::kScaleRoundedToNearest: return "scale-rounded-to-nearest";
    case Alteration::kRanksSummedInReverse: return "ranks-summed-in-reverse";
  }
  return "unknown";
}

Status allreduce(const AllReduceSpec& spec, int ranks, std::size_t count,
                 const float* const* inputs, float* const* outputs, CompensatorState* states,
                 float* const* compensated, AllReduceReport* report) {
  return allreduce_altered(Alteration::kNone, spec, ranks, count, inputs, outputs, states,
                           compensated, report);
}

Status allreduce_altered(Alteration alteration, const AllReduceSpec& spec, int ranks, std::size_t count,
                         const float* const* inputs, float* const* outputs, CompensatorState* states,
                         float* const* compensated, AllReduceReport* report) {
  if (Status s = spec.validate(ranks); !s.ok()) return s;
  if (count == 0) return Status(StatusCode::kInvalidArgument, "element count must be >= 1");
  if (inputs == nullptr || outputs == nullptr) {
    return Status(StatusCode::kInvalidArgument, "inputs and outputs must not be null");
  }
  const CompensatorSpec& comp = spec.compensator;
  const bool compensate = comp.mode != CompensatorMode::kOff;
  if (compensate && states == nullptr) {
    return Status(StatusCode::kInvalidArgument, "the compensator needs one state per rank");
  }
  if (compensate) {
    for (int r = 0; r < ranks; ++r) {
      if (Status s = validate_state(states[r], count, r, comp); !s.ok()) return s;
    }
  }

  AllReduceReport local_report;
  thread_local Workspace ws;
  ws.use_scaled = false;
  size_buffers(ws.x_prime, ranks, count);
  for (int r = 0; r < ranks; ++r) {
    Buffer& xp = ws.x_prime[r];
    std::copy_n(inputs[r], count, xp.data());
    round_to_dtype(xp.data(), count, spec.dtype);
    if (compensate) compensator_apply(comp, states[r], xp.data(), count, xp.data());
    if (compensated != nullptr && compensated[r] != nullptr) {
      std::copy_n(xp.data(), count, compensated[r]);
    }
  }

  // Backward: one shared power-of-two exponent from the group's max |x'| (Sec. 5.4).
  int k = 0;
  if (spec.direction == Direction::kBackward) {
    float m = 0.0f;
    for (int r = 0; r < ranks; ++r) m = std::max(m, max_abs(ws.x_prime[r].data(), count));
    k = backward_scale_exponent(m);
    if (k != 0) {
      ws.use_scaled = true;
      size_buffers(ws.scaled, ranks, count);
      for (int r = 0; r < ranks; ++r) {
        scale_by_power_of_two(ws.x_prime[r].data(), count, k, ws.scaled[r].data());
      }
    }
  }
  local_report.scale_exponent = k;
  const float unscale = numerics::pow2(-k);
  const bool exact = count <= spec.exact_max_count;
  // Rotation (quantized path only): every rank rotates the values it sends, the owner its own too.
  ws.use_rotated = !exact && spec.quant.rotation != Rotation::kNone;
  if (ws.use_rotated) {
    size_buffers(ws.rotated, ranks, count);
    for (int r = 0; r < ranks; ++r) {
      std::copy_n(ws.send(r), count, ws.rotated[r].data());
      rotate_groups(spec.quant, ws.rotated[r].data(), count);
    }
  }

  const bool local = compensate && comp.residual == ResidualMode::kLocal;
  const Segmentation seg(count, spec.quant.group, ranks);
  if (local) {
    size_buffers(ws.residual, ranks, count);
    for (Buffer& b : ws.residual) std::fill(b.begin(), b.end(), 0.0f);
  }

  // y: the reduced result in the send units, per rank; acc: owner sums (send units).
  size_buffers(ws.y, ranks, count);
  std::vector<Buffer>& y = ws.y;
  ws.acc.resize(count);
  Buffer& acc = ws.acc;
  const bool exact_rounded = exact && exact_path_rounds_x_prime(spec);
  if (exact) {
    local_report.exact_path = true;
    std::vector<const float*> send(ranks);
    for (int r = 0; r < ranks; ++r) send[r] = ws.send(r);
    if (exact_rounded) {
      // Every rank's x' in bf16; in the local mode each rank's residual starts as its own rounding
      // error, on every element.
      size_buffers(ws.rounded, ranks, count);
      for (int r = 0; r < ranks; ++r) {
        float* sr = ws.rounded[r].data();
        std::copy_n(send[r], count, sr);
        round_to_dtype(sr, count, spec.dtype);
        send[r] = sr;
        if (local) {
          float* ur = ws.residual[r].data();
          const float* xp = ws.x_prime[r].data();
          for (std::size_t e = 0; e < count; ++e) ur[e] = numerics::local_residual(xp[e], sr[e]);
        }
      }
    }
    sum_in_rank_order(send.data(), ranks, count, acc.data(),
                      alteration == Alteration::kRanksSummedInReverse);
    for (int r = 0; r < ranks; ++r) std::copy(acc.begin(), acc.end(), y[r].begin());
    local_report.poisoned_groups = count_nonfinite_groups(send.data(), ranks, count, spec.quant);
  } else {
    Encoded enc;
    for (int j = 0; j < ranks; ++j) {
      const std::size_t begin = seg.begin(j);
      const std::size_t len = seg.end(j) - begin;
      if (len == 0) continue;
      reduce_segment(spec, ranks, j, begin, len, unscale, ws, acc.data() + begin, alteration);
      // Gather: the owner quantizes once; every rank dequantizes the same codes (and de-rotates).
      local_report.poisoned_groups += encode(spec.quant, acc.data() + begin, len, enc, alteration);
      for (int r = 0; r < ranks; ++r) {
        decode(spec.quant, enc, len, y[r].data() + begin);
        unrotate_groups(spec.quant, y[r].data() + begin, len);
      }
      // The local residual's owner sum in unrotated units.
      if (ws.use_rotated && local) unrotate_groups(spec.quant, acc.data() + begin, len);
    }
  }

  // Output: back to gradient units, rounded to the dtype, on every rank.
  for (int r = 0; r < ranks; ++r) {
    float* yr = y[r].data();
    if (k != 0) scale_by_power_of_two(yr, count, -k, yr);
    round_to_dtype(yr, count, spec.dtype);
  }

  if (compensate) {
    ws.u.resize(count);
    Buffer& u = ws.u;
    const float p = static_cast<float>(ranks);
    for (int r = 0; r < ranks; ++r) {
      const float* xp = ws.x_prime[r].data();
      const float* yr = y[r].data();
      if (local) {
        // Owner's own segment: the gather error; pushed segments were filled during reduce. On the
        // exact path with rounded x' the owner's own rounding error comes first.
        float* ur = ws.residual[r].data();
        const std::size_t begin = seg.begin(r);
        const std::size_t end = seg.end(r);
        if (exact_rounded) {
          for (std::size_t e = begin; e < end; ++e) {
            ur[e] = numerics::local_residual_sum(ur[e], numerics::local_residual(acc[e] * unscale, yr[e]));
          }
        } else {
          for (std::size_t e = begin; e < end; ++e) ur[e] = numerics::local_residual(acc[e] * unscale, yr[e]);
        }
        compensator_update(comp, states[r], ur, count);
      } else {
        for (std::size_t e = 0; e < count; ++e) u[e] = numerics::global_residual(xp[e], yr[e], p);
        compensator_update(comp, states[r], u.data(), count);
      }
    }
  }

  for (int r = 0; r < ranks; ++r) std::copy(y[r].begin(), y[r].end(), outputs[r]);
  if (report != nullptr) *report = local_report;
  return Status::Ok();
}

}  // namespace echo
