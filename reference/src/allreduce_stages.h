// Internal: the stages of one reference all-reduce call, one function per section of
// docs/numerics.md, over the simulated ranks' buffers (AllReduceWorkspace::Buffers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "echo/allreduce.h"
#include "echo/alteration.h"
#include "echo/numerics/stream_units.h"
#include "echo/site.h"

namespace echo {

using Buffer = std::vector<float>;

// Where a conformance alteration (echo/alteration.h) departs from the contract: the few points it
// changes, read by the stages there and nowhere else.
struct AlterationPolicy {
  bool scale_rounded_to_nearest = false;  // every quantization (numerics 2.2 step 2)
  bool ranks_summed_in_reverse = false;   // the owner's and the exact path's sums (numerics 4)
  bool deficit_correction_not_subtracted = false;  // compensator 'deficit''s update (numerics 6.2)

  static AlterationPolicy of(Alteration alteration);
  // The rank added at step `step` of a sum over ranks: rank order, or its reverse.
  int rank_at(int step, int ranks) const { return ranks_summed_in_reverse ? ranks - 1 - step : step; }
};

// One quantized copy of a segment: codes, parameters and outlier entries.
struct Encoded {
  std::vector<std::uint8_t> codes;
  std::vector<GroupParams> params;
  std::vector<OutlierEntry> outliers;
};

// What every stage of one call reads.
struct CallPlan {
  // `site`: the call's site where its gains apply (compensator units 'stream', forward), else nullptr.
  CallPlan(const AllReduceSpec& spec, int ranks, std::size_t count, Alteration alteration, const SiteInfo* site);
  const AllReduceSpec& spec;
  int ranks;
  std::size_t count;
  Segmentation segments;
  AlterationPolicy policy;
  bool compensate;     // the compensator is on
  bool local;          // ... with the local residual
  bool exact;          // the exact path (count <= exact_max_count)
  bool exact_rounded;  // ... summing x' rounded to the dtype (forward bf16)
  bool rotate;         // the quantized path on rotated groups
  bool stream;         // per-row stream gains (numerics 6.1): units 'stream' at a post-norm site
  std::size_t row_length;  // ... the site's elements per row
  float weight_rms;        // ... and its post-norm's weight RMS
  const float* weights;    // ... and its weights, where the profile is 'sqrt' (else nullptr)
  float clip;              // ... and the clip (0: none)
  bool sum_gains;          // ... with gains 'sum' (numerics 6.1 step 8)
  int kind;                // ... and the site's kind (0 attention, 1 MLP), whose row ratios it keeps
  bool deficit;                  // ... in mode 'deficit' (numerics 6.2)
  const float* deficit_weights;  // ... which reads the site's weights (else nullptr)
};

}  // namespace echo

// The simulated ranks' buffers: each rank's work has buffers of its own, so the rank-identity of
// the outputs is a property of the algorithm, not of a shared array.
struct echo::AllReduceWorkspace::Buffers {
  std::vector<Buffer> x_prime;   // x' per rank, gradient units
  std::vector<Buffer> scaled;    // x' * 2^k per rank (backward calls with k != 0)
  std::vector<Buffer> rotated;   // what the quantized path sends, rotated group by group, per rank
  std::vector<Buffer> rounded;   // exact path, forward bf16: x' rounded to bf16 per rank
  std::vector<Buffer> residual;  // local-mode residual per rank
  std::vector<Buffer> y;         // each rank's reduced result
  std::vector<std::vector<numerics::StreamGains>> gains;  // stream units: per rank, per row
  std::vector<Buffer> clip_bounds;  // stream units with a clip: per rank, per row
  std::vector<Buffer> own_rms;      // stream units with gains 'sum': per rank, per row, rho
  Buffer sum_rms;                   // ... and the delivered row's RMS r of the rank being updated
  Buffer profile;                   // stream units with profile 'sqrt': f_j per feature
  std::vector<Buffer> estimates;    // mode 'deficit' at a post-norm site: per rank, per row, e
  std::vector<Buffer> corrections;  // ... per rank, the correction c each element was given
  Buffer floored_weights;           // ... wf_j per feature
  Buffer acc;                    // owner sums (send units)
  Buffer received;               // one pushed copy as its owner dequantizes it
  Buffer unrotated;              // that copy de-rotated (local residual)
  Buffer u;                      // global-mode residual of one rank
  Encoded encoded;               // the codes of one transfer
  int k = 0;                     // this call's backward exponent: x' * 2^k is sent
  bool use_rotated = false;      // this call's quantized path sends `rotated`
  // What rank r sends: x' (times 2^k backward); on the quantized path, rotated where the spec says.
  const float* send(int rank) const { return k != 0 ? scaled[rank].data() : x_prime[rank].data(); }
  const float* quantized_send(int rank) const { return use_rotated ? rotated[rank].data() : send(rank); }
};

namespace echo::stages {

using Buffers = AllReduceWorkspace::Buffers;

// acc = in_0 + in_1 + ... + in_{P-1} in fp32, left to right in the policy's rank order (numerics 4).
void sum_in_order(const float* const* in, int ranks, std::size_t count, const AlterationPolicy& policy,
                  float* acc);
// Sizes the results and, in the local mode, zeroes every rank's residual.
void prepare(const CallPlan& c, Buffers& b);

// 6, apply: x' = dtype(x) + c per rank, copied to `compensated` where given; with stream gains
// (6.1) each rank's row gains first, from dtype(x), and c = c0 * R.
void apply(const CallPlan& c, const float* const* inputs, const CompensatorState* states,
           float* const* compensated, Buffers& b);
// 5, backward scale: the shared exponent k of max |x'| and x' * 2^k per rank; k = 0 forward.
int backward_scale(const CallPlan& c, Buffers& b);
// 2.6, rotate: what the quantized path sends, rotated group by group (every rank, the owner too).
void rotate(const CallPlan& c, Buffers& b);
// 4.1, push: rank i's segment [begin, begin + len) as its owner dequantizes it; in the local mode
// also rank i's residual there (its push error, unrotated, in gradient units).
const float* push(const CallPlan& c, int i, std::size_t begin, std::size_t len, Buffers& b);
// 4.2, reduce: owner j's fp32 sum of every rank's copy of segment j in rank order (its own
// unquantized); the ring variant requantizes at every hop.
void reduce(const CallPlan& c, int j, std::size_t begin, std::size_t len, Buffers& b);
void reduce_ring(const CallPlan& c, int j, std::size_t begin, std::size_t len, Buffers& b);
// 4.3, gather: the owner quantizes its sum once, every rank dequantizes the same codes and
// de-rotates them. Returns the poisoned groups.
std::size_t gather(const CallPlan& c, std::size_t begin, std::size_t len, Buffers& b);
// 4, exact path: every rank's fp32 sum of all terms in rank order. Returns the groups holding a
// non-finite term.
std::size_t reduce_exact(const CallPlan& c, Buffers& b);
// 4.4, output: back to gradient units and rounded to the dtype, on every rank.
void deliver(const CallPlan& c, Buffers& b);
// 6, update: each rank's residual (global or local; times G per row with stream gains) into its
// averages; with gains 'sum' G is formed here from the delivered rows, and the rows' ratios are kept.
void update(const CallPlan& c, CompensatorState* states, Buffers& b);

}  // namespace echo::stages
