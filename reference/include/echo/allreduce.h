// Bit-exact CPU reference of the Echo all-reduce over P simulated ranks (docs/numerics.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "echo/compensator.h"
#include "echo/dtype.h"
#include "echo/quantizer.h"
#include "echo/status.h"

namespace echo {

inline constexpr int kMaxRanks = 8;

enum class Algorithm : std::uint8_t {
  kOwner = 0,  // push (all-to-all) -> owner fp32 sum -> gather: at most two quantizations
  kRing = 1,   // ring reduce-scatter requantizing at every hop, then gather (paper Table 1)
};
enum class Direction : std::uint8_t { kForward = 0, kBackward = 1 };

const char* algorithm_name(Algorithm algorithm);  // "owner", "ring"
const char* direction_name(Direction direction);  // "forward", "backward"

// Split of count elements into P segments along group boundaries. Segment j holds groups
// [j * groups_per_segment, (j + 1) * groups_per_segment) clipped to the message; trailing segments
// may be short or empty, and the message's last group may be partial.
struct Segmentation {
  Segmentation(std::size_t count, int group, int ranks);
  std::size_t count;
  std::size_t group;
  int ranks;
  std::size_t num_groups;
  std::size_t groups_per_segment;
  std::size_t begin(int segment) const;
  std::size_t end(int segment) const;
};

struct AllReduceSpec {
  QuantSpec quant;
  DType dtype = DType::kBFloat16;
  Algorithm algorithm = Algorithm::kOwner;
  Direction direction = Direction::kForward;
  // Messages of at most this many elements take the exact path: every rank sums all P inputs in
  // fp32 in rank order and rounds once to dtype (the small-message policy of the CUDA path); in
  // forward bf16 calls the inputs are x' rounded to bf16 (exact_path_rounds_x_prime).
  std::size_t exact_max_count = 0;
  CompensatorSpec compensator;

  Status validate(int ranks) const;
};

struct AllReduceReport {
  std::size_t poisoned_groups = 0;  // groups whose output is NaN (non-finite input, overflow)
  int scale_exponent = 0;           // backward mode: the shared power-of-two exponent k
  bool exact_path = false;          // true when the small-message exact path ran
};

// The simulated ranks' buffers of a call. A caller that calls again and again (a replay, a model's
// sites) keeps one: re-allocating these arrays for every call costs more (page faults) than the
// arithmetic. One workspace serves one call at a time.
class AllReduceWorkspace {
 public:
  AllReduceWorkspace();
  ~AllReduceWorkspace();
  AllReduceWorkspace(AllReduceWorkspace&&) noexcept;
  AllReduceWorkspace& operator=(AllReduceWorkspace&&) noexcept;

  struct Buffers;  // reference/src/allreduce_stages.h
  Buffers& buffers() { return *buffers_; }

 private:
  std::unique_ptr<Buffers> buffers_;
};

// One compensated all-reduce at one site.
//   inputs[r][count]   rank r's contribution; rounded to dtype before use.
//   outputs[r][count]  rank r's result, dtype values held in float; may alias inputs[r].
//   states             nullptr, or `ranks` states of this pass direction (needed unless the
//                      compensator is off); updated in place.
//   compensated        nullptr, or `ranks` buffers receiving x' = x + c (fp32).
//   workspace          nullptr (buffers for this call alone), or the caller's, kept between calls.
// All ranks' outputs are bitwise identical. Returns kInvalidArgument for bad parameters.
Status allreduce(const AllReduceSpec& spec, int ranks, std::size_t count,
                 const float* const* inputs, float* const* outputs, CompensatorState* states,
                 float* const* compensated, AllReduceReport* report, AllReduceWorkspace* workspace = nullptr);

// The exact sum reduced in fp32 in rank order and rounded to dtype (the "16-bit" all-reduce).
void exact_allreduce(DType dtype, int ranks, std::size_t count, const float* const* inputs,
                     float* out);

// Whether the exact path sums x' rounded to the dtype (forward bf16 calls) rather than x' itself
// (docs/numerics.md 4). Without the compensator x' is a dtype value, so the rounding changes
// nothing; with it, each rank's rounding error enters its local residual. bf16 has fp32's exponent
// range, so the rounding cannot overflow below the last bf16 step under FLT_MAX; fp16 could, and
// fp16, fp32 and backward calls sum x' itself. The CUDA kernels follow the same rule (constexpr,
// so device code calls it too).
constexpr bool exact_path_rounds_x_prime(DType dtype, Direction direction) {
  return dtype == DType::kBFloat16 && direction == Direction::kForward;
}
inline bool exact_path_rounds_x_prime(const AllReduceSpec& spec) {
  return exact_path_rounds_x_prime(spec.dtype, spec.direction);
}

// Backward-mode shared exponent: the k with max_abs * 2^k in [2^14, 2^15), 0 when max_abs is 0
// or not finite.
int backward_scale_exponent(float max_abs);

}  // namespace echo
