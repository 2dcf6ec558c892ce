// Plain types of the flag protocol, shared by host code and kernels.
#pragma once

namespace echo::cuda::device {

// First failure of a call, in host-mapped memory so the host reads it without a device sync.
struct ErrorRecord {
  int code;  // 0 = none, 1 = timeout
  int rank;
  int stage;
  int peer;
  long long tile;
  unsigned long long epoch;
  unsigned long long seen;
};

struct WaitContext {
  int rank;
  unsigned long long timeout_ns;
  ErrorRecord* error;  // host-mapped
  int* abort;          // device word: set once any wait of this rank failed
};

}  // namespace echo::cuda::device
