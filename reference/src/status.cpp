#include "echo/status.h"

namespace echo {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNonFiniteInput: return "non-finite input";
    case StatusCode::kIoError: return "I/O error";
    case StatusCode::kFormatError: return "format error";
    case StatusCode::kDeviceError: return "device error";
    case StatusCode::kTimeout: return "timeout";
    case StatusCode::kUnsupported: return "unsupported";
  }
  return "unknown";
}

}  // namespace echo
