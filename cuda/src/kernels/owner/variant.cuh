// The policy of an owner kernel variant: which stages an instance runs, how its lanes load (ahead
// in registers, through shared memory, or where they are used), how many peers' copies the reduce
// loads at once, and which loops have a lean copy. Every stage reads these flags; nothing else
// tells the variants apart.
#pragma once

#include "kernel_args.h"
#include "kernels/instance_options.cuh"

namespace echo::cuda {
namespace owner_detail {

// Stages a kernel instance runs. Most variants run all of them in one kernel (kFusedStages); the
// split ones (owner_split_tail) run push and reduce in one kernel and the tail in a second, launched
// after it on the same stream, so that each gets its own register allocation (docs/performance.md,
// "Split tail from 2^27 elements").
constexpr int kFusedStages = kStagePush | kStageReduce | kStageTail;
constexpr int kPushReduceStages = kStagePush | kStageReduce;
constexpr int kTailStages = kStageTail;

// Peers' copies the reduce loads at once (sum_copies): four in the uncompensated 16-element
// variants, one in the rest; a split variant's push + reduce kernel has an instance with four for
// P > 2 (owner_split_tail).
constexpr int default_peer_batch(int e, bool comp) { return !comp && e == 16 ? 4 : 1; }

// Resident blocks per multiprocessor a variant is compiled for (its register budget).
constexpr int owner_min_blocks(int e, bool comp) { return (e == 32 && comp) ? 1 : (e == 8 ? 3 : 2); }

// D: the message dtype; BITS: bits per code; E: elements per lane of push and reduce; COMP: the
// compensator is on (its state lives in registers through a tile; off, those registers are free);
// STAGES: the stages of the kernel instance; PEER_BATCH: the reduce's batch of peers' copies;
// OPTIONS: the transport options the instance compiles (kNoOptions, kOptionWide, kAllOptions).
// kAllOptions is a fused kernel that also runs the split launches of calls with the rotation;
// kOptionWide instances (the default spec's, with its wide groups) mirror the kNoOptions ones,
// which compile none of the options' code (calls with overflow-groups poison).
template <DType D, int BITS, int E, bool COMP, int STAGES = kFusedStages, int PEER_BATCH = default_peer_batch(E, COMP),
          int OPTIONS = kNoOptions>
struct OwnerVariant {
  static constexpr DType kDType = D;
  static constexpr int kBits = BITS;
  static constexpr int kLaneElements = E;
  static constexpr bool kCompensated = COMP;
  static constexpr int kStages = STAGES;
  static constexpr bool kFused = STAGES == kFusedStages;
  static constexpr bool kTailOnly = STAGES == kTailStages;
  static constexpr bool kOptions = OPTIONS != kNoOptions;
  static constexpr bool kRotationOption = (OPTIONS & kOptionRotation) != 0;
  // Register budget: the uncompensated 16-element variants load the next iteration's input ahead
  // in registers and four peers' codes at once; the others (state registers or 32 elements per
  // lane) would spill. The compensated variants on 8- and 16-element lanes copy the next
  // iteration's input and state into shared memory instead (staged_loads.cuh): 8-element lanes
  // either state type, 16-element ones bf16 state only (32 would need too much of it); so do the
  // uncompensated 4-bit 32-element lanes with their input (the 8-bit ones ran slower with it:
  // docs/performance.md, "Staged loads in shared memory"). The rest load where they use.
  static constexpr bool kPrefetch = !COMP && E == 16;
  static constexpr int kPeerBatch = PEER_BATCH;
  static constexpr bool kStaged = (COMP && E <= 16) || (!COMP && E == 32 && BITS == 4);
  static constexpr int kStagedStateBytes = COMP ? (E == 8 ? 4 : 2) : 0;
  // Lean tiles (OwnerStages::lean_tile) run a copy of the push and reduce loops with every
  // per-lane condition known (docs/performance.md, "Lean tiles"). The compensated variants that do
  // not stage (32-element lanes, groups above 512) keep the general loop only.
  static constexpr bool kLeanVariant = kStaged || !COMP;
  // The compensated 8-element variants also compile their lean loops for kConfigDualLocalBf16
  // (OwnerStages::dual_local_bf16).
  static constexpr bool kDualLocalBf16Copies = COMP && E == 8;
};

}  // namespace owner_detail
}  // namespace echo::cuda
