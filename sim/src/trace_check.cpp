#include "echo/trace_check.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <string>

#include "echo/trace.h"

namespace echo {
namespace {

using Clock = std::chrono::steady_clock;

// The child's report: "opened <declared bytes>\n" once the header is valid, then
// "<status code>\n<message>" at the end.
constexpr const char* kOpenedTag = "opened ";
// Memory the child may take while it opens the file and reads the header.
constexpr std::uint64_t kHeaderMemoryBytes = 1ull << 30;

void write_all(int fd, const std::string& text) {
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

std::uint64_t declared_bytes(const TraceInfo& info) {
  // open() has refused shapes whose byte count does not fit in 64 bits.
  const std::uint64_t ranks = static_cast<std::uint64_t>(info.ranks);
  std::uint64_t bytes = info.passes * info.sites * ranks * info.count * sizeof(float);
  if (info.has_hidden_states) bytes += info.passes * (info.sites + 1) * info.count * sizeof(float);
  return bytes;
}

// Bounds the child's address space so that a size HDF5 takes from a damaged file fails to allocate
// instead of taking the machine's memory: `soft` more than it uses now (raised later up to the
// hard limit, trace_memory_budget() more).
void limit_memory(std::uint64_t soft) {
  static const std::uint64_t base = [] {
    unsigned long long pages = 0;
    if (FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%llu", &pages) != 1) pages = 0;
      std::fclose(f);
    }
    return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(sysconf(_SC_PAGE_SIZE));
  }();
  const rlimit limit{base + soft, base + trace_memory_budget()};
  setrlimit(RLIMIT_AS, &limit);
}

[[noreturn]] void run_child(const std::string& path, int fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  // A crash here ends the child by its signal, which the parent reports, without a core file or
  // the handlers a sanitizer or fuzzer may have installed in the parent.
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, SIG_DFL);
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  // The header is small: a damaged string length there must not reach gigabytes of memset.
  limit_memory(std::min(kHeaderMemoryBytes, trace_memory_budget()));
  TraceReader reader;
  Status status = reader.open(path);
  if (status.ok()) {
    write_all(fd, kOpenedTag + std::to_string(declared_bytes(reader.info())) + "\n");
    limit_memory(trace_memory_budget());
    status = reader.read_all();
  }
  write_all(fd, std::to_string(static_cast<int>(status.code())) + "\n" + status.message());
  close(fd);
  _exit(0);
}

Status damaged(const std::string& path, const std::string& what) {
  return Status(StatusCode::kFormatError, path + ": " + what + "; the file is damaged or not an echo trace");
}

}  // namespace

Status check_trace_in_child(const std::string& path, const TraceCheckLimits& limits) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return Status(StatusCode::kIoError, path + ": cannot check the file (pipe: " + std::strerror(errno) + ")");
  }
  std::fflush(nullptr);  // the child's copy of unwritten output would otherwise be written twice
  const pid_t child = fork();
  if (child < 0) {
    close(fds[0]);
    close(fds[1]);
    return Status(StatusCode::kIoError, path + ": cannot check the file (fork: " + std::strerror(errno) + ")");
  }
  if (child == 0) {
    close(fds[0]);
    run_child(path, fds[1]);
  }
  close(fds[1]);

  std::string report;
  auto deadline = Clock::now() + std::chrono::duration<double>(limits.open_seconds);
  double allowed = limits.open_seconds;
  bool extended = false;
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    char buffer[4096];
    const ssize_t n = read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // end of the report: the child has finished or died
    report.append(buffer, static_cast<std::size_t>(n));
    const std::size_t line_end = report.find('\n');
    if (!extended && report.rfind(kOpenedTag, 0) == 0 && line_end != std::string::npos) {
      // The header is valid: the data gets time in proportion to its declared size.
      const double bytes = std::strtod(report.c_str() + std::strlen(kOpenedTag), nullptr);
      const double more = limits.open_seconds + bytes / limits.min_read_bytes_per_second;
      deadline = Clock::now() + std::chrono::duration<double>(more);
      allowed += more;
      extended = true;
      report.erase(0, line_end + 1);
    }
  }
  close(fds[0]);
  if (timed_out) kill(child, SIGKILL);
  int wait_status = 0;
  while (waitpid(child, &wait_status, 0) < 0 && errno == EINTR) {
  }

  if (timed_out) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.0f", allowed);
    return damaged(path, std::string("reading it did not finish within ") + seconds + " s (HDF5 " +
                             (extended ? "loops on its data" : "loops on its structure") + ")");
  }
  if (WIFSIGNALED(wait_status)) {
    const int sig = WTERMSIG(wait_status);
    return damaged(path, "HDF5 crashed reading it (signal " + std::to_string(sig) + ", " + strsignal(sig) + ")");
  }
  const std::size_t line_end = report.find('\n');
  if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0 || line_end == std::string::npos) {
    return damaged(path, "reading it ended without a result (exit status " +
                             std::to_string(WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1) + ")");
  }
  const int code = std::atoi(report.substr(0, line_end).c_str());
  if (code == 0) return Status::Ok();
  return Status(static_cast<StatusCode>(code), report.substr(line_end + 1));
}

}  // namespace echo
