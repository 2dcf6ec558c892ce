// The owner kernel's dispatch (launch.h): one table of its instantiation units by dtype, bit width
// and instance set (kernels/owner_allreduce_<dtype>_b<bits>[_wide].cu, each instantiating
// owner_unit of kernels/owner/launch_variants.cuh), and the lane width of a call shape.
#include <algorithm>

#include "kernels/instance_options.cuh"
#include "launch.h"

namespace echo::cuda {
namespace {

struct UnitRow {
  DType dtype;
  int bits;
  int set;  // kNoOptions: poison calls and (its options instance) every call with the rotation;
            // kOptionWide: wide groups without the rotation (owner_runs_wide_only)
  OwnerUnit unit;
};

// In preload order: per dtype the 4-bit kernels, the 8-bit ones, then the wide ones.
const UnitRow (&units())[12] {
  static const UnitRow rows[12] = {
    {DType::kFloat32, 4, kNoOptions, owner_unit<DType::kFloat32, 4, kNoOptions>()},
    {DType::kFloat32, 8, kNoOptions, owner_unit<DType::kFloat32, 8, kNoOptions>()},
    {DType::kFloat32, 4, kOptionWide, owner_unit<DType::kFloat32, 4, kOptionWide>()},
    {DType::kFloat32, 8, kOptionWide, owner_unit<DType::kFloat32, 8, kOptionWide>()},
    {DType::kBFloat16, 4, kNoOptions, owner_unit<DType::kBFloat16, 4, kNoOptions>()},
    {DType::kBFloat16, 8, kNoOptions, owner_unit<DType::kBFloat16, 8, kNoOptions>()},
    {DType::kBFloat16, 4, kOptionWide, owner_unit<DType::kBFloat16, 4, kOptionWide>()},
    {DType::kBFloat16, 8, kOptionWide, owner_unit<DType::kBFloat16, 8, kOptionWide>()},
    {DType::kFloat16, 4, kNoOptions, owner_unit<DType::kFloat16, 4, kNoOptions>()},
    {DType::kFloat16, 8, kNoOptions, owner_unit<DType::kFloat16, 8, kNoOptions>()},
    {DType::kFloat16, 4, kOptionWide, owner_unit<DType::kFloat16, 4, kOptionWide>()},
    {DType::kFloat16, 8, kOptionWide, owner_unit<DType::kFloat16, 8, kOptionWide>()},
  };
  return rows;
}

// The unit of a dtype, bit width and instance set; null for a bit width without variants.
const OwnerUnit* find_unit(DType dtype, int bits, int set) {
  for (const UnitRow& row : units()) {
    if (row.dtype == dtype && row.bits == bits && row.set == set) return &row.unit;
  }
  return nullptr;
}

}  // namespace

cudaError_t owner_allreduce_preload() {
  cudaError_t e = cudaSuccess;
  for (const UnitRow& row : units()) {
    if (e == cudaSuccess) e = row.unit.preload();
  }
  return e;
}

int lane_elements(int bits, int group, Compensation comp) {
  // Without the compensator, 32 elements per lane halve the per-lane work of push and reduce
  // (addressing, group map, parameter decode, loop control) against 16, at two resident blocks per
  // multiprocessor either way (measured on 2 x H200, 1 GiB: push 359 -> 301 us, reduce 733 -> 624
  // us, Echo 4-bit 1.70 -> 1.53 ms; docs/performance.md, "Lanes and resident blocks per variant").
  // A group of 16 elements fits 16-element lanes only. The tail runs on 16-element lanes in every
  // variant (owner_allreduce.cuh).
  // With the compensator its state occupies registers as well. Local residual: 8 elements per
  // lane (groups up to 256) keep three blocks resident to hide the state's loads and the peer
  // stores (1 GiB call: 4.48 ms against 4.61 on 16-element lanes at two blocks). Global residual
  // (no state update in push and reduce): 16 elements per lane (5.89 against 6.31 ms on 8).
  // Groups above 256 (local) or 512 elements need 16 or 32 to fit in one warp.
  (void)bits;
  if (comp == Compensation::kOff) return group >= 32 ? 32 : 16;
  if (comp == Compensation::kLocal && group <= 256) return 8;
  return group / 16 > 32 ? 32 : 16;
}

// The fewest resident blocks of both instance sets' kernels, so that a grid sized by them fits
// either set; a bit width without variants has one (its launch is refused).
int owner_allreduce_blocks_per_sm(DType dtype, int bits, int group, Compensation comp) {
  const OwnerUnit* plain = find_unit(dtype, bits, kNoOptions);
  const OwnerUnit* wide = find_unit(dtype, bits, kOptionWide);
  if (plain == nullptr || wide == nullptr) return 1;
  return std::min(plain->blocks_per_sm(group, comp), wide->blocks_per_sm(group, comp));
}

cudaError_t owner_allreduce(const CallArgs& a, bool last_round, int grid, cudaStream_t stream) {
  const OwnerUnit* unit = find_unit(a.dtype, a.bits, owner_runs_wide_only(a) ? kOptionWide : kNoOptions);
  return unit == nullptr ? cudaErrorInvalidValue : unit->launch(a, last_round, grid, stream);
}

}  // namespace echo::cuda
