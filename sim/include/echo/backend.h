// An all-reduce implementation a replay can drive: the CPU reference, or the CUDA library.
#pragma once

#include <cstddef>
#include <memory>

#include "echo/allreduce.h"
#include "echo/site.h"
#include "echo/status.h"

namespace echo {

class AllReduceBackend {
 public:
  virtual ~AllReduceBackend() = default;
  virtual const char* name() const = 0;
  // Resets the compensator state: a new pass begins.
  virtual void start_pass() = 0;
  // Same contract as echo::allreduce (reference/include/echo/allreduce.h) for the backend's
  // spec and rank count; `site` as echo::allreduce_at_site takes it (nullptr: the call does not
  // know its site).
  virtual Status run(std::size_t count, const float* const* inputs, float* const* outputs,
                     float* const* compensated, AllReduceReport* report, const SiteInfo* site) = 0;
};

// The bit-exact CPU reference with one compensator state per rank.
std::unique_ptr<AllReduceBackend> make_cpu_backend(const AllReduceSpec& spec, int ranks);

}  // namespace echo
