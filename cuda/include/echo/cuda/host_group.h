// P simulated ranks of the CUDA all-reduce driven from host arrays, for `echotk replay --backend
// cuda` and the bit-exact tests. Compiles without CUDA headers in the includer.
#pragma once

#include <cstddef>
#include <memory>

#include "echo/allreduce.h"
#include "echo/cuda/tuning.h"
#include "echo/status.h"

namespace echo::cuda {

// Number of CUDA devices; 0 when there is no GPU or no driver (never fails loudly).
int device_count();

// P ranks on the GPUs present; ranks share GPUs round-robin when there are fewer GPUs.
class HostGroup {
 public:
  // exact_capacity: elements per round of the exact path (CommOptions::exact_capacity), 0 for the
  // library default; split_tail_min_count: CommOptions::split_tail_min_count.
  static Status create(int ranks, const AllReduceSpec& spec, std::unique_ptr<HostGroup>* out,
                       std::size_t exact_capacity = 0, std::size_t split_tail_min_count = kDefaultSplitTailMinCount);
  virtual ~HostGroup();
  // Host float arrays per rank in and out (values already representable in spec.dtype), same
  // contract as echo::allreduce in reference/include/echo/allreduce.h; compensated may be null.
  virtual Status allreduce(std::size_t count, const float* const* inputs, float* const* outputs,
                           float* const* compensated, AllReduceReport* report) = 0;
  virtual void reset_compensator() = 0;  // start of a pass
};

}  // namespace echo::cuda
