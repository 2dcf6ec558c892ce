// Running the echotk binary from a test, and a scratch directory per test case.
#pragma once

#include <boost/test/unit_test.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <string>

namespace echo::test {

struct Run {
  int exit_code;
  std::string output;  // stdout and stderr together
};

inline Run run_echotk(const std::string& args) {
  const std::string cmd = std::string(ECHO_BINARY_DIR) + "/bin/echotk " + args + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  BOOST_TEST_REQUIRE(pipe != nullptr);
  std::string output;
  std::array<char, 4096> buffer;
  while (std::fgets(buffer.data(), buffer.size(), pipe)) output += buffer.data();
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

// A fresh directory per test case, removed afterwards.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("echo-cli-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  static int& counter() {
    static int c = 0;
    return c;
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
  std::size_t entries() const {
    return static_cast<std::size_t>(
        std::distance(std::filesystem::directory_iterator(path), std::filesystem::directory_iterator()));
  }
};

}  // namespace echo::test
