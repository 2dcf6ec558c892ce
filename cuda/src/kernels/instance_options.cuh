// The transport options a kernel instance compiles (docs/numerics.md 2.4, 2.6), for the owner
// kernel's instances (owner/variant.cuh) and the one-GPU emulation's (emulate/allreduce.cuh): none
// (instances that compile none of the options' code, for calls with overflow-groups poison),
// overflow-groups wide alone (instances in the same structure, for wide calls without the
// rotation: the default spec's), or both (the instances of every call with the rotation). The
// emulation's rotation instances also serve compensator units 'stream' (docs/numerics.md 6.1,
// kOptionStream), which the owner kernel does not implement.
#pragma once

namespace echo::cuda {

constexpr int kNoOptions = 0;
constexpr int kOptionWide = 1;
constexpr int kOptionRotation = 2;
constexpr int kAllOptions = kOptionWide | kOptionRotation;
constexpr int kOptionStream = 4;

}  // namespace echo::cuda
