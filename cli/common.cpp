#include <filesystem>
#include <iostream>

#include "commands.h"

namespace echo::cli {

void fail(const std::string& command, int exit_code, const std::string& message) {
  std::cerr << "echotk " << command << ": error: " << message << std::endl;
  throw CLI::RuntimeError(exit_code);
}

int exit_code_for(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNonFiniteInput:
    case StatusCode::kIoError:
    case StatusCode::kFormatError:
      return kExitBadInput;
    default:
      return kExitFailure;
  }
}

void check(const std::string& command, const Status& status) {
  if (!status.ok()) fail(command, exit_code_for(status), status.message());
}

void refuse_output_over_input(const std::string& command, const std::string& input, const std::string& output,
                              const std::string& output_flag) {
  std::error_code ec;
  if (!output.empty() && std::filesystem::exists(output, ec) && std::filesystem::equivalent(input, output, ec)) {
    fail(command, kExitBadInput, output_flag + " " + output + " is the input file " + input);
  }
}

}  // namespace echo::cli
