#include <filesystem>
#include <iostream>

#include <unistd.h>

#include "commands.h"
#include "echo/trace_check.h"

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

void open_trace(const std::string& command, const std::string& path, TraceReader* reader) {
  check(command, check_trace_in_child(path));
  check(command, reader->open(path));
}

void refuse_output_over_input(const std::string& command, const std::string& input, const std::string& output,
                              const std::string& output_flag) {
  std::error_code ec;
  if (!output.empty() && std::filesystem::exists(output, ec) && std::filesystem::equivalent(input, output, ec)) {
    fail(command, kExitBadInput, output_flag + " " + output + " is the input file " + input);
  }
}

void check_output_target(const std::string& command, const std::string& output, const std::string& output_flag) {
  if (output.empty()) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string named = output_flag + " " + output;
  if (fs::exists(output, ec) && !fs::is_regular_file(output, ec)) fail(command, kExitBadInput, named + ": not a regular file");
  const fs::path dir = fs::absolute(fs::path(output), ec).parent_path();
  if (!fs::is_directory(dir, ec)) fail(command, kExitBadInput, named + ": no directory " + dir.string());
  if (::access(dir.c_str(), W_OK) != 0) fail(command, kExitBadInput, named + ": " + dir.string() + " is not writable");
}

void check_input_file(const std::string& command, const std::string& path, const std::string& flag) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    fail(command, kExitBadInput, flag + " " + path + ": no such file" +
                                     (std::filesystem::path(path).is_relative() ? " (relative to " +
                                                                                      std::filesystem::current_path(ec).string() + ")"
                                                                                : std::string()));
  }
}

}  // namespace echo::cli
