// The measured defaults of the CUDA path (no CUDA headers needed): the receive slot, the
// small-message switch-over to the exact path and the size from which the owner kernel runs its
// tail in a kernel of its own. Each value is a measurement on 2 x H200 (docs/performance.md names
// the section); the host API (echo/cuda/communicator.h) takes them as defaults.
#pragma once

#include <cstddef>

#include "echo/allreduce.h"

namespace echo::cuda {

// Receive slot of one source when CommOptions::slot_bytes is 0: 288 MiB / P, at least 72 MiB
// (144 MiB at P = 2, 72 MiB from P = 4). Each rank holds 2 P slots, so the workspace is 576 MiB
// at P = 2 and 4, and a 1 GiB bf16 message at 4 bits runs in one round at every P up to 4 (each
// round adds a pipeline fill and drain: at P = 2, 1 GiB, 1.54 -> 1.45 ms from two rounds to one,
// docs/performance.md, "Receive slots of 288 MiB / P").
inline constexpr std::size_t default_slot_bytes(int ranks) {
  const std::size_t floor = std::size_t{72} << 20;
  const std::size_t share = (std::size_t{288} << 20) / static_cast<std::size_t>(ranks < 1 ? 1 : ranks);
  return share > floor ? share : floor;
}

// The smallest receive slot CommOptions::slot_bytes may ask for: one block iteration of the widest
// lanes holds at most 8192 codes of 8 bits and 512 groups' parameters (about 12 KiB with
// alignment), and a slot must hold at least one (smaller slots only matter for tests of rounds).
inline constexpr std::size_t kMinSlotBytes = std::size_t{64} << 10;

// The small-message switch-over (docs/performance.md, "Exact path for small messages"): messages of
// at most this many elements take the exact path. Pass it as AllReduceSpec::exact_max_count (the
// CPU reference takes the same value, so both agree at every size). kDefaultExactMaxCount is the
// value measured at P = 2 on 2 x H200 (the exact path is faster than NCCL and than the quantized
// path up to 1 Mi elements of bf16).
inline constexpr std::size_t kDefaultExactMaxCount = std::size_t{1} << 20;
// Where the compensated exact path ships x' as fp32 (fp16, fp32 and backward calls: twice the bytes
// of a 16-bit term) and reads the state twice, the quantized path takes over earlier (measured at
// P = 2 on 2 x H200 when every compensated call shipped fp32, docs/performance.md, "Exact path for
// small messages"): in the global residual mode, whose quantized path adds the update kernel, above
// 512 Ki elements; in the local residual mode above 128 Ki. Forward bf16 calls ship x' rounded to
// bf16 (docs/numerics.md 4) and keep kDefaultExactMaxCount (default_exact_max_count(ranks, spec)).
inline constexpr std::size_t kDefaultExactMaxCountGlobalResidual = std::size_t{1} << 19;
inline constexpr std::size_t kDefaultExactMaxCountLocalResidual = std::size_t{1} << 17;

// The largest power of two at most `p2` / (P - 1): the exact path sends P - 1 copies of the
// message from every GPU, so larger groups keep the bytes sent per GPU of the P = 2 switch-over.
inline constexpr std::size_t scale_exact_max_count(std::size_t p2, int ranks) {
  std::size_t n = p2;
  while (ranks > 2 && n * static_cast<std::size_t>(ranks - 1) > p2) n /= 2;
  return n;
}

// The default for P ranks without a compensator (scaled from P = 2, not measured for P > 2).
inline constexpr std::size_t default_exact_max_count(int ranks) {
  return scale_exact_max_count(kDefaultExactMaxCount, ranks);
}

// The default for P ranks and a call's compensator when its exact path ships fp32 x' (off: the
// same as above).
inline constexpr std::size_t default_exact_max_count(int ranks, const CompensatorSpec& compensator) {
  if (compensator.mode == CompensatorMode::kOff) return default_exact_max_count(ranks);
  return scale_exact_max_count(compensator.residual == ResidualMode::kLocal ? kDefaultExactMaxCountLocalResidual
                                                                            : kDefaultExactMaxCountGlobalResidual,
                               ranks);
}

// The default for a call: compensated forward bf16 calls, whose exact path sums x' rounded to bf16
// and so ships 16-bit terms as the uncompensated ones do, take the uncompensated switch-over
// (faster than the quantized path at every size up to it, measured at P = 2 on 2 x H200,
// docs/performance.md, "Exact path for small messages"); the others as above.
inline std::size_t default_exact_max_count(int ranks, const AllReduceSpec& spec) {
  if (exact_path_rounds_x_prime(spec)) return default_exact_max_count(ranks);
  return default_exact_max_count(ranks, spec.compensator);
}

// Messages of at least this many elements run, where their kernel variant has a split form (the
// compensated 8-element lanes: dual or single compensator, local residual, groups up to 256),
// push + reduce in one kernel and the tail in a second launched after it, each with its own
// register allocation; their reduce then loads four peers' copies at once when P > 2. Smaller
// messages run one fused kernel. Bit-identical either way. The value is the P = 2 switch-over
// measured on 2 x H200 (docs/performance.md, "Split tail from 2^27 elements"): the second
// launch and the tails' lost overlap with the last pushes and reduces cost 2-9 us at 4-32 MiB of
// bf16 and 13-28 us at 64 MiB, nothing at 128 MiB; the split form gains 10-12 us at 256 MiB and
// 10-28 us at 1 GiB. Not measured at P > 2, where the batched reduce gains more.
inline constexpr std::size_t kDefaultSplitTailMinCount = std::size_t{1} << 27;

}  // namespace echo::cuda
