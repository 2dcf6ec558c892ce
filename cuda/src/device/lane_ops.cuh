// Thread-level steps shared by the stages: the compensator's apply and update on a lane's
// elements, the backward exponent, and group statistics across the lanes of one group.
#pragma once

#include "kernel_args.h"
#include "device/flags.cuh"
#include "device/lane_io.cuh"
#include "echo/numerics/backward_scale.h"
#include "echo/numerics/compensator_step.h"
#include "echo/numerics/deficit_loop.h"

namespace echo::cuda::device {

// The compensator steps below serve the paper's modes, single and dual, and where their kDeficit
// argument is true mode 'deficit' too (docs/numerics.md 6.2, its steps without a post-norm): the
// one-GPU emulation's kernels that run that mode compile them so. The peer-to-peer kernels compile
// them without it: can_implement refuses mode 'deficit' in either direction, so no call of theirs
// holds it.

// The correction c of numerics 6 from a lane element's averages; with kDeficit, mode 'deficit''s
// fp32(eta * A) (numerics 6.2, without a post-norm), the same product as single's.
template <bool kDeficit = false>
__device__ __forceinline__ float correction(const CompensatorArgs& c, float m1, float m2) {
  if constexpr (kDeficit) {
    if (c.mode == CompensatorMode::kDeficit) return numerics::deficit_correction(c.eta, m1);
  }
  return c.mode == CompensatorMode::kSingle ? numerics::single_correction(c.eta, m1)
                                            : numerics::dual_correction(c.eta, c.a, c.oa, m1, m2);
}

template <bool kDeficit = false>
__device__ __forceinline__ float compensated_value(const CompensatorArgs& c, float m1, float m2, float x) {
  return numerics::compensate(x, correction<kDeficit>(c, m1, m2));
}

// c and x' = x + c (docs/numerics.md 6). `fresh`: the state was just reset, c = 0 and x' = x
// exactly (x + 0 would turn -0 into +0), as the reference does for an empty state. A NaN in x' is
// left as the hardware makes it: it matters only where x' is stored, which canonicalizes it.
template <int E, bool kDeficit = false>
__device__ __forceinline__ void apply_compensation(const CompensatorArgs& c, bool fresh,
                                                   const float (&m1)[E], const float (&m2)[E],
                                                   float (&x)[E]) {
  if (c.mode == CompensatorMode::kOff || fresh) return;
#pragma unroll
  for (int k = 0; k < E; ++k) x[k] = compensated_value<kDeficit>(c, m1[k], m2[k], x[k]);
}

// m_j = beta_j * m_j + (1 - beta_j) * u (numerics::ema_step, under the kernels' name); the lane's
// NaN averages canonical (they are stored next, rounded to bf16 for bf16 state as
// numerics::round_state does).
__device__ __forceinline__ float ema(float beta, float m, float one_minus_beta, float u) {
  return numerics::ema_step(beta, m, one_minus_beta, u);
}

// Mode 'deficit' without a post-norm (numerics 6.2): A = fp32(A + fp32(u - fp32(eta * A))), the
// correction recomputed from the A the apply read.
__device__ __forceinline__ float deficit_update(float eta, float deficit, float u) {
  return numerics::deficit_step(deficit, numerics::undelivered(u, numerics::deficit_correction(eta, deficit)));
}

// Mode 'deficit' at a post-norm site (numerics 6.2): A = fp32(A + fp32(d * G_j)) per element, d the
// undelivered part and G_j the feature's gain; NaN averages canonical, as update_state leaves them.
template <int E>
__device__ __forceinline__ void update_deficit_at_site(const float (&d)[E], const float (&g)[E], float (&m1)[E]) {
#pragma unroll
  for (int k = 0; k < E; ++k) m1[k] = numerics::deficit_step(m1[k], d[k], g[k]);
  canonicalize_lane<E>(m1);
}

// The averages' update from the residual u: ema_step (single: m1 alone; dual), and with kDeficit
// mode 'deficit''s step without a post-norm (m1 alone).
template <int E, bool kDeficit = false>
__device__ __forceinline__ void update_state(const CompensatorArgs& c, const float (&u)[E],
                                             float (&m1)[E], float (&m2)[E]) {
  if constexpr (kDeficit) {
    if (c.mode == CompensatorMode::kDeficit) {
#pragma unroll
      for (int k = 0; k < E; ++k) m1[k] = deficit_update(c.eta, m1[k], u[k]);
      canonicalize_lane<E>(m1);
      return;
    }
  }
  const bool single = c.mode == CompensatorMode::kSingle;
  const float b1 = single ? c.beta : c.beta1;
  const float ob1 = single ? c.ob : c.ob1;
#pragma unroll
  for (int k = 0; k < E; ++k) {
    m1[k] = ema(b1, m1[k], ob1, u[k]);
    if (!single) m2[k] = ema(c.beta2, m2[k], c.ob2, u[k]);
  }
  canonicalize_lane<E>(m1);
  if (!single) canonicalize_lane<E>(m2);
}

// Loads a lane's state (left alone when the compensator is off), fp32 or bf16 as stored.
template <int E>
__device__ __forceinline__ void load_state(const CompensatorArgs& c, std::size_t e0, int valid,
                                           float (&m1)[E], float (&m2)[E]) {
  if (c.mode == CompensatorMode::kOff) return;
  if (c.bf16_state) {
    load_bf16<E>(reinterpret_cast<const std::uint16_t*>(c.m1) + e0, valid, m1);
    if (c.mode == CompensatorMode::kDual) load_bf16<E>(reinterpret_cast<const std::uint16_t*>(c.m2) + e0, valid, m2);
    return;
  }
  load_f32<E>(c.m1 + e0, valid, m1);
  if (c.mode == CompensatorMode::kDual) load_f32<E>(c.m2 + e0, valid, m2);
}

// Stores a lane's updated state; bf16 state is rounded here, as the reference rounds each update.
template <int E>
__device__ __forceinline__ void store_state(const CompensatorArgs& c, std::size_t e0, int valid,
                                            const float (&m1)[E], const float (&m2)[E]) {
  if (c.bf16_state) {
    store_bf16<E>(reinterpret_cast<std::uint16_t*>(c.m1) + e0, valid, m1);
    if (c.mode == CompensatorMode::kDual) store_bf16<E>(reinterpret_cast<std::uint16_t*>(c.m2) + e0, valid, m2);
    return;
  }
  store_f32<E>(c.m1 + e0, valid, m1);
  if (c.mode == CompensatorMode::kDual) store_f32<E>(c.m2 + e0, valid, m2);
}

// Backward shared exponent: k with M * 2^k in [2^14, 2^15), 0 for M = 0 or non-finite.
using numerics::backward_exponent;

struct GroupStats {
  float mn;
  float mx;
  bool finite;
};

// Min, max and finiteness of one group spread over `lanes` consecutive lanes (a power of two);
// every lane of the warp takes part in the shuffles, lanes without elements contribute nothing.
// min/max propagate NaN, so a group is finite exactly when its min and max are (a NaN makes both
// NaN, +Inf the max, -Inf the min). The sign of a zero min or max never matters to the group map
// (docs/numerics.md 2: lo and hi enter only through differences, |lo| and comparisons with 0).
template <int E>
__device__ __forceinline__ GroupStats group_stats(const float (&v)[E], int valid, int lanes) {
  float mn = __int_as_float(0x7F800000);
  float mx = -__int_as_float(0x7F800000);
  if (valid == E) {
#pragma unroll
    for (int k = 0; k < E; ++k) {
      mn = fmin_nan(mn, v[k]);
      mx = fmax_nan(mx, v[k]);
    }
  } else {
#pragma unroll
    for (int k = 0; k < E; ++k) {
      if (k < valid) {
        mn = fmin_nan(mn, v[k]);
        mx = fmax_nan(mx, v[k]);
      }
    }
  }
  for (int off = 1; off < lanes; off <<= 1) {
    mn = fmin_nan(mn, __shfl_xor_sync(0xFFFFFFFFu, mn, off));
    mx = fmax_nan(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, off));
  }
  return {mn, mx, is_finite(mn) && is_finite(mx)};
}

// fp16 scale and zero-point of a group as floats, from its parameter word on the wire.
struct DecodeParams {
  float s;
  float z;
};

// A group's parameter word as stored (fp16 scale in the low half, zero-point in the high half; the
// symmetric quantizer stores the scale alone). Loaded ahead of its use, decoded by params_of_word.
__device__ __forceinline__ unsigned load_param_word(const unsigned char* params, std::size_t lg,
                                                    bool symmetric) {
  if (symmetric) return __ldcg(reinterpret_cast<const unsigned short*>(params) + lg);
  return __ldcg(reinterpret_cast<const unsigned*>(params) + lg);
}

// The library writes finite fp16 scales (below 0x7C00), the poison scale 0x7E00 (zero-point 0) and,
// under overflow-groups wide (WIDE_FIELDS), a wide group's flagged bf16 scale (bit 15 set,
// docs/numerics.md 2.4). A scale with an all-ones exponent comes back as s = NaN (every value of the
// group is NaN); a wide one as its doubled scale (numerics::wide_decode_scale), with which the
// common decode gives the wide values; the finite fp16 scales convert in hardware.
template <bool WIDE_FIELDS = false>
__device__ __forceinline__ DecodeParams params_of_word(unsigned w, bool symmetric, int bits) {
  const std::uint16_t s_bits = static_cast<std::uint16_t>(w & 0xFFFFu);
  const bool wide = WIDE_FIELDS && numerics::is_wide_scale_field(s_bits);
  const bool special = !wide && (s_bits & numerics::kHalfExponentMask) == numerics::kHalfExponentMask;
  if (special) return {poisoned_value(), 0.0f};
  const float s = wide ? numerics::wide_decode_scale(numerics::wide_scale_of_field(s_bits)) : half_bits_to_float(s_bits);
  if (symmetric) return {s, static_cast<float>(1 << (bits - 1))};
  return {s, half_bits_to_float(static_cast<std::uint16_t>(w >> 16))};
}

// The map of a group spanning [mn, mx] (docs/numerics.md 2.2-2.4), numerics::make_group_map's: the
// fp16 map, or with WIDE (an instance compiling the wide groups) the wide map where
// numerics::takes_wide_map (wide_groups: the call asks for them). The second pass runs the same
// code as the first, a loop of at most two passes over numerics::group_map_pass: the fp16 and the
// wide map inlined one after the other cost the compensated owner kernels hundreds of bytes of
// spills (docs/performance.md, "Transport options in the peer-to-peer kernel").
template <bool WIDE>
__device__ __forceinline__ GroupMap lane_group_map(const QuantParams& qp, float mn, float mx, bool finite,
                                                   bool wide_groups) {
  if constexpr (!WIDE) {
    return make_fp16_group_map(qp, mn, mx, finite);
  } else {
    bool wide = false;
#pragma unroll 1
    for (;;) {
      const GroupMap map = numerics::group_map_pass(qp, mn, mx, finite, wide);
      if (wide || !numerics::takes_wide_map(map, finite, wide_groups)) return map;
      wide = true;
    }
  }
}

// fp32(t + magic) of a lane's values under a wide map (numerics::encode_bits_wide: a true division
// per element where the fp16 map multiplies by its reciprocal).
template <int E>
__device__ __forceinline__ void encode_lane_wide(const GroupMap& map, const float (&v)[E], unsigned (&bits)[E]) {
  const float magic = encode_magic(map);
#pragma unroll
  for (int k = 0; k < E; ++k) bits[k] = numerics::encode_bits_wide(map, magic, v[k]);
}

__device__ __forceinline__ void store_params(unsigned char* params, std::size_t lg, bool symmetric,
                                             const GroupMap& m) {
  if (symmetric) {
    reinterpret_cast<unsigned short*>(params)[lg] = m.scale;
  } else {
    reinterpret_cast<unsigned*>(params)[lg] =
        static_cast<unsigned>(m.scale) | (static_cast<unsigned>(m.zero_point) << 16);
  }
}

// The decode parameters of a group map, as params_of_word<WIDE> gives them from its stored word (a
// wide map's doubled scale with WIDE, an instance compiling the wide groups).
template <bool WIDE = false>
__device__ __forceinline__ DecodeParams decode_params_of(const GroupMap& m, bool symmetric, int bits) {
  if (m.poisoned) return {poisoned_value(), 0.0f};
  return {WIDE && m.wide ? numerics::wide_decode_scale(m.wide_scale) : half_bits_to_float(m.scale),
          symmetric ? static_cast<float>(1 << (bits - 1)) : half_bits_to_float(m.zero_point)};
}

// Shared power-of-two factors of a backward call: scale = 2^k, unscale = 2^-k.
struct Scaling {
  int k;
  float scale;
  float unscale;
};

__device__ __forceinline__ Scaling make_scaling(int k) { return {k, numerics::pow2(k), numerics::pow2(-k)}; }

// Block-level read of the group's shared exponent: every rank's max |x'| for this call.
__device__ inline bool block_read_scaling(const CallArgs& a, unsigned long long call_epoch,
                                          Scaling* out) {
  __shared__ int k_shared;
  __shared__ int ok_shared;
  if (threadIdx.x == 0) {
    const auto* words = reinterpret_cast<const unsigned long long*>(
        a.peer_base[a.rank] + a.layout.scale_words_offset);
    unsigned m_bits = 0;
    bool ok = true;
    for (int r = 0; r < a.ranks && ok; ++r) {
      // The word carries its epoch in the high half, so the value and its readiness arrive in one
      // 64-bit store.
      ok = wait_flag(a.wait, words + r, call_epoch << 32, Stage::kScale, r, -1);
      const unsigned bits = static_cast<unsigned>(load_acquire_sys(words + r) & 0xFFFFFFFFu);
      m_bits = bits > m_bits ? bits : m_bits;
    }
    ok_shared = ok ? 1 : 0;
    k_shared = backward_exponent(__uint_as_float(m_bits));
  }
  __syncthreads();
  *out = make_scaling(k_shared);
  const bool ok = ok_shared != 0;
  __syncthreads();
  return ok;
}

// Last block of a call's final launch: publish the call's report and clear the next call's counter.
__device__ __forceinline__ void finish_report(Control* c, unsigned long long epoch, int round, int exact) {
  const int parity = static_cast<int>((epoch - round) & 1u);
  c->report_poisoned = c->poisoned[parity];
  c->poisoned[(epoch + 1) & 1u] = 0;  // the next call starts at epoch + 1
  c->exact_path = exact;
}

// Epilogue of a main-kernel launch, run by every block: the last block out resets the job queue,
// advances the epoch (device-side, so graph replays see fresh epochs), records the backward
// exponent, and on the call's last launch publishes the report and, when asked, marks the
// compensator state as no longer fresh.
__device__ __forceinline__ void finish_launch(const CallArgs& a, unsigned long long epoch, int scale_k,
                                              bool last_round, int exact, bool clear_fresh) {
  __syncthreads();
  if (threadIdx.x != 0) return;
  __threadfence();  // this block's control writes before the done count
  const unsigned prev = atomicAdd(&a.control->done_blocks, 1u);
  if (prev != gridDim.x - 1) return;
  a.control->done_blocks = 0;
  a.control->next_job = 0;
  a.control->seq = epoch;
  if (a.round == 0) a.control->scale_exponent = scale_k;
  if (last_round) {
    finish_report(a.control, epoch, a.round, exact);
    if (clear_fresh) *a.comp.fresh = 0;
  }
}

}  // namespace echo::cuda::device
