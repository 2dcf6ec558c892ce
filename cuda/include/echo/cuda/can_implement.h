// What the CUDA all-reduce implements, decided in one place. Plain C++ built in every build (with
// or without CUDA), so the CLI, HostGroup, the communicator and language bindings refuse the same
// requests with the same message.
#pragma once

#include "echo/allreduce.h"
#include "echo/status.h"

namespace echo::cuda {

// Ok when the CUDA path can run `spec` over `ranks` ranks. An invalid spec (AllReduceSpec::validate:
// ranks, bits, group, compensator) is kInvalidArgument; a valid one the kernels do not implement is
// kUnsupported: they do 4 and 8 bits, the owner algorithm, poisoned or wide overflow groups and
// either rotation, but no outliers sent exactly (docs/numerics.md 2.4-2.6), no compensator units
// 'stream' on a call that needs its site (6.1) and no compensator 'deficit' (6.2) in either
// direction. echo/cuda/communicator.h adds the overload that checks CommOptions too.
Status can_implement(const AllReduceSpec& spec, int ranks);

// The transport part of can_implement, which the one-GPU emulation (echo/cuda/emulate.h) checks
// too: Ok unless q sends outliers exactly (docs/numerics.md 2.5), which is kUnsupported.
Status can_implement_transport(const QuantSpec& q);

}  // namespace echo::cuda
