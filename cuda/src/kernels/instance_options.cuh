// The transport options a kernel instance compiles (docs/numerics.md 2.4, 2.6), for the owner
// kernel's instances (owner/variant.cuh) and the one-GPU emulation's (emulate_allreduce.cuh): none
// (the default spec's instances, which compile none of the options' code), overflow-groups wide
// alone (instances in the default ones' structure, for wide calls without the rotation), or both
// (the instances of every call with the rotation).
#pragma once

namespace echo::cuda {

constexpr int kNoOptions = 0;
constexpr int kOptionWide = 1;
constexpr int kOptionRotation = 2;
constexpr int kAllOptions = kOptionWide | kOptionRotation;

}  // namespace echo::cuda
