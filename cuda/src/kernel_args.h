// Arguments shared by the host launchers and the kernels: the workspace layout (identical on every
// rank, so a peer's buffer is its base address plus the same offset) and one call's parameters.
#pragma once

#include <cstddef>
#include <cstdint>

#include "echo/allreduce.h"
#include "flag_types.h"

namespace echo::cuda {

inline constexpr int kBlockThreads = 256;
inline constexpr int kWarpsPerBlock = kBlockThreads / 32;
inline constexpr int kMaxTilesPerRound = 4096;
inline constexpr int kStagePush = 1;
inline constexpr int kStageReduce = 2;
inline constexpr int kStageTail = 4;
inline constexpr int kExactChunk = 1024;  // elements per block job of the exact path (g divides it)

// Whether the exact path's terms are 16-bit values, four per line (docs/numerics.md 4): the input
// itself (forward, no compensator, 16-bit dtype) or x' rounded to bf16 (forward bf16 with the
// compensator); otherwise fp32 terms, two per line. The kernel and the NCCL transport's exchange
// of the lines both follow it.
constexpr bool exact_terms_16bit(DType dtype, bool backward, bool compensated) {
  const Direction direction = backward ? Direction::kBackward : Direction::kForward;
  return compensated ? exact_path_rounds_x_prime(dtype, direction) : dtype != DType::kFloat32 && !backward;
}

// Byte offsets inside each rank's workspace allocation.
struct WorkspaceLayout {
  std::size_t slot_bytes;        // one source's codes + parameters for one round of a segment
  std::size_t exact_capacity;    // elements per exact-path round
  std::size_t recv_offset;       // [P][slot_bytes]: push payload from source rank r
  std::size_t gather_offset;     // [P][slot_bytes]: gathered payload from owner r
  std::size_t exact_offset;      // [2 parities][P][exact_capacity / 2] 16-byte lines
  std::size_t push_flags_offset;    // [P][kMaxTilesPerRound] u64, written by source r
  std::size_t gather_flags_offset;  // [P][kMaxTilesPerRound] u64, written by owner r
  std::size_t scale_words_offset;   // [P] u64: (epoch << 32) | max|x'| bits of rank r
  std::size_t control_offset;       // Control (this rank only)
  std::size_t total_bytes;
};

// Per-rank counters that only this rank's kernels touch.
struct Control {
  unsigned long long seq;     // epoch of the last finished launch
  unsigned long long next_job;  // job queue of the owner kernel: blocks take jobs in order
  unsigned int done_blocks;   // last-block-done counter of the main kernels
  unsigned int max_done_blocks;
  unsigned int max_bits;      // running max |x'| as float bits (non-negative floats order as uints)
  int abort;                  // set when a wait of this rank failed
  // Poisoned groups of this rank's segment, one counter per call parity: the last launch of a
  // call publishes its count and zeroes the next call's, so no host memset is needed per call.
  unsigned long long poisoned[2];
  unsigned long long report_poisoned;  // of the last finished call
  int scale_exponent;
  int exact_path;
};

struct CompensatorArgs {
  CompensatorMode mode;
  ResidualMode residual;
  float eta, a, oa, beta1, ob1, beta2, ob2, beta, ob;
  float* m1;   // null when off; holds bf16 values (2 bytes each) when bf16_state
  float* m2;   // dual only
  bool bf16_state;  // averages stored in bf16, each update rounded (docs/numerics.md 6)
  int* fresh;  // device word: 1 right after a reset (apply is skipped, as for an empty state)
  void* stash; // global mode: copy of the input for the update on the side stream
};

// Compensator configurations a kernel's code can be compiled for (docs/performance.md, "Kernels
// compiled per configuration"): kConfigAny reads the call's mode, residual and state type at run
// time; any other value is the dual compensator with the residual (kConfigLocal set: local) and the
// state type (kConfigBf16State set: bf16) fixed at compile time, so that the branches on them fold
// away. The values are the call's either way: only the dispatch (compensator_config) looks at them.
inline constexpr int kConfigAny = 0;
inline constexpr int kConfigDual = 1;
inline constexpr int kConfigLocal = 2;
inline constexpr int kConfigBf16State = 4;
inline constexpr int kConfigDualLocalBf16 = kConfigDual | kConfigLocal | kConfigBf16State;

// The configuration of a call's compensator: kConfigAny unless it is the dual one.
constexpr int compensator_config(const CompensatorArgs& c) {
  if (c.mode != CompensatorMode::kDual) return kConfigAny;
  return kConfigDual | (c.residual == ResidualMode::kLocal ? kConfigLocal : 0) | (c.bf16_state ? kConfigBf16State : 0);
}

// The compensator arguments as code compiled for CONFIG sees them.
template <int CONFIG>
constexpr CompensatorArgs configured(CompensatorArgs c) {
  if constexpr (CONFIG != kConfigAny) {
    c.mode = CompensatorMode::kDual;
    c.residual = (CONFIG & kConfigLocal) != 0 ? ResidualMode::kLocal : ResidualMode::kGlobal;
    c.bf16_state = (CONFIG & kConfigBf16State) != 0;
  }
  return c;
}

struct CallArgs {
  int rank;
  int ranks;
  DType dtype;
  int bits;
  int group;
  QuantizerKind kind;
  std::size_t count;
  const void* in;
  void* out;
  float* compensated;  // optional x' (fp32, gradient units)
  CompensatorArgs comp;
  bool backward;
  int round;  // index of this launch inside the call (epoch of the call = epoch - round)
  // Stages this launch runs (kStagePush | kStageReduce | kStageTail). The peer-to-peer transport
  // runs all three in one launch, ordered by flags (two launches, push + reduce then the tail, for
  // the call shapes of owner_allreduce_splits_tail); the NCCL transport runs one stage per launch
  // on local buffers, with NCCL collectives between launches and no flags.
  int stages;
  // Launches between the one whose reduce posts the gather flags and the one whose tail waits for
  // them: 0 when one kernel runs every stage, 1 when the tail runs in a kernel of its own
  // (owner_split_tail); the tail waits for the flag value of that earlier launch's epoch.
  int gather_launch_back;
  bool nccl;

  // Segmentation and the round's tiling, in groups.
  std::size_t groups_per_segment;
  std::size_t num_groups;
  std::size_t round_group_begin;  // first group of this round inside every segment
  std::size_t round_groups;       // groups of this round (full segments)
  std::size_t codes_bytes;        // bytes of the codes region of one slot
  int tile_groups;
  int num_tiles;
  int lag;       // steps between the push of a tile and its reduce
  int tail_lag;  // steps between the reduce of a tile and its tail

  // Exact path round.
  std::size_t exact_begin;
  std::size_t exact_count;

  WorkspaceLayout layout;
  char* peer_base[kMaxRanks];  // every rank's workspace as seen from this rank (own included)
  Control* control;
  device::WaitContext wait;
  // Optional per-job timeline (bench/tools/job_trace.cpp): null, or kJobTraceWords words per record
  // for job_trace_records records, indexed by round * jobs of a fused launch + job.
  unsigned long long* job_trace;
  std::size_t job_trace_records;

  // Transport options (docs/numerics.md 2.4, 2.6), run by the owner kernel's options instance
  // (kernels/owner/variant.cuh); last, so that the other fields keep their offsets.
  bool wide_groups;  // QuantSpec::overflow == kWide: finite groups past the fp16 scale take the wide map
  bool rotation;     // QuantSpec::rotation == kHadamard: the quantized path works on rotated groups
};

// Job tracing is compiled in only with the CMake option ECHO_CUDA_JOB_TRACE (it costs the kernels
// registers); without it the kernels ignore CallArgs::job_trace.
#ifdef ECHO_CUDA_JOB_TRACE
inline constexpr bool kJobTrace = true;
#else
inline constexpr bool kJobTrace = false;
#endif

// A job record: (stage << 56) | (block << 32) | the job's index in its launch (stage 1 push, 2
// reduce, 3 tail, 0 none at that step), (multiprocessor << 32) | flag-wait nanoseconds, and the
// global timer (ns) at the job's start and end.
inline constexpr int kJobTraceWords = 4;

}  // namespace echo::cuda
