// Status values returned by every library call: the library never exits or throws across its API.
#pragma once

#include <string>
#include <utility>

namespace echo {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // a parameter is out of its documented range
  kNonFiniteInput,   // input holds NaN/Inf where the caller asked for it to be refused
  kIoError,          // a file could not be opened, read or written
  kFormatError,      // a file opened but does not follow the documented format
  kDeviceError,      // a CUDA or NCCL call failed
  kTimeout,          // a wait on a peer flag did not complete in time
  kUnsupported,      // a valid request this build cannot serve (e.g. no GPU)
};

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

const char* status_code_name(StatusCode code);

}  // namespace echo

// Returns the status of `expr` from the enclosing function unless it is ok: the one way a Status
// is passed up (a CUDA or NCCL call's result becomes one through ECHO_CUDA_CHECK / ECHO_NCCL_CHECK).
#define ECHO_TRY(expr)                                   \
  do {                                                   \
    ::echo::Status echo_try_status_ = (expr);            \
    if (!echo_try_status_.ok()) return echo_try_status_; \
  } while (0)
