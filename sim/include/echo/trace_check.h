// Opening a trace that is not trusted. HDF5 (1.10 as the distributions ship it) can crash or loop
// on a malformed file, inside the library, where no check of ours before it can rule that out; so
// the whole read of the file runs first in a child process, and only a clean result lets the
// caller open it in its own process.
#pragma once

#include <string>

#include "echo/status.h"

namespace echo {

struct TraceCheckLimits {
  double open_seconds = 10.0;                  // the child's time to open the file and check its header
  double min_read_bytes_per_second = 10.0e6;   // then this many bytes of declared data a second at least
};

// Forks a child that opens `path` with TraceReader and reads every dataset (read_all) under a time
// limit (open_seconds + declared bytes / min_read_bytes_per_second) and an address-space limit
// (1 GiB more than it starts with for the header, trace_memory_budget() more for the data), and
// returns its Status. The child runs no OpenMP region (a pool the parent started would not exist
// in it). A child killed by a
// signal, ended otherwise, or past its time becomes kFormatError naming the file. The file is
// read twice in all; docs/trace-format.md gives the cost.
Status check_trace_in_child(const std::string& path, const TraceCheckLimits& limits = {});

}  // namespace echo
