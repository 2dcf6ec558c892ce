// The trace reader against damaged files: escaped messages, images in memory, the child-process
// check (docs/trace-format.md, Damaged and hostile files).
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "echo/printable.h"
#include "echo/trace.h"
#include "echo/trace_check.h"
#include "test_util.h"

using namespace echo;
using echo::test::data_path;

namespace {

std::vector<char> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(trace_guard)

BOOST_AUTO_TEST_CASE(printable_escapes_every_byte_a_terminal_could_act_on) {
  BOOST_TEST(printable("echo-trace 1.0") == "echo-trace 1.0");
  BOOST_TEST(printable(std::string("a\\b\x1b[31m\n\x7f\xff\0z", 13)) == "a\\\\b\\x1b[31m\\x0a\\x7f\\xff\\x00z");
}

BOOST_AUTO_TEST_CASE(image_in_memory_reads_as_the_file_does) {
  const std::string path = data_path("tests/data/good_chunked_gzip.h5");
  TraceReader from_file;
  BOOST_TEST_REQUIRE(from_file.open(path).ok());
  const std::vector<char> bytes = file_bytes(path);
  TraceReader from_image;
  const Status s = from_image.open_image(bytes.data(), bytes.size(), "image.h5");
  BOOST_TEST_REQUIRE(s.ok(), s.message());
  BOOST_TEST(*from_image.info().tokens == *from_file.info().tokens);
  BOOST_TEST(from_image.info().site_kind == from_file.info().site_kind);
  const std::size_t n = static_cast<std::size_t>(from_file.info().ranks) * from_file.info().count;
  std::vector<float> a(n), b(n);
  BOOST_TEST_REQUIRE(from_file.read_site(1, 2, a.data()).ok());
  BOOST_TEST_REQUIRE(from_image.read_site(1, 2, b.data()).ok());
  BOOST_TEST(echo::test::first_bit_difference(a.data(), b.data(), n) == -1);
  BOOST_TEST(from_image.read_all().ok());
}

BOOST_AUTO_TEST_CASE(declared_sizes_beyond_the_file_are_refused_at_open) {
  TraceReader reader;
  const Status s = reader.open(data_path("tests/data/bad_declared_size.h5"));
  BOOST_TEST(s.code() == StatusCode::kFormatError);
  BOOST_TEST(s.message().find("cannot all be there") != std::string::npos, s.message());
}

BOOST_AUTO_TEST_CASE(child_check_passes_good_traces_and_reports_the_readers_reason) {
  for (const char* name : {"good_small.h5", "good_fixed_strings.h5", "good_chunked_gzip.h5",
                           "good_fixed_chunked.h5", "good_tiny.h5"}) {
    const Status s = check_trace_in_child(data_path(std::string("tests/data/") + name));
    BOOST_TEST(s.ok(), name << ": " << s.message());
  }
  const std::string bad = data_path("tests/data/bad_version.h5");
  TraceReader reader;
  const Status direct = reader.open(bad);
  const Status child = check_trace_in_child(bad);
  BOOST_TEST(child.code() == direct.code());
  BOOST_TEST(child.message() == direct.message());
}

BOOST_AUTO_TEST_CASE(child_check_turns_a_time_limit_into_a_named_refusal) {
  // No time at all for the header: the child cannot report in time.
  TraceCheckLimits limits;
  limits.open_seconds = 0.0;
  const std::string path = data_path("tests/data/good_small.h5");
  const Status s = check_trace_in_child(path, limits);
  BOOST_TEST(s.code() == StatusCode::kFormatError);
  BOOST_TEST(s.message().find(path + ": reading it did not finish within 0 s") == 0u, s.message());
}

BOOST_AUTO_TEST_SUITE_END()
