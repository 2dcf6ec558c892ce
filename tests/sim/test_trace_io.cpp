// TraceWriter -> TraceReader round trip, and the writer's all-or-nothing file handling.
#include <boost/test/unit_test.hpp>

#include <filesystem>

#include "echo/trace.h"
#include "test_util.h"

namespace fs = std::filesystem;
using namespace echo;

BOOST_AUTO_TEST_SUITE(trace_io)

BOOST_AUTO_TEST_CASE(written_trace_reads_back_bit_for_bit) {
  const fs::path dir = fs::temp_directory_path() / ("echo-trace-io-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "t.h5").string();
  TraceInfo info;
  info.ranks = 3;
  info.passes = 2;
  info.sites = 4;
  info.count = 250;
  info.dtype = DType::kFloat16;
  info.direction = Direction::kBackward;
  info.has_hidden_states = true;
  info.site_kind = {0, 1, 0, 1};
  info.tokens = 5;
  info.hidden = 50;
  info.model = "unit-test";
  TraceWriter writer;
  BOOST_TEST_REQUIRE(writer.create(path, info).ok());
  std::vector<std::vector<float>> sites;
  for (std::size_t p = 0; p < info.passes; ++p) {
    for (std::size_t k = 0; k < info.sites; ++k) {
      sites.push_back(echo::test::activations(3 * 250, 17u * p + k));
      BOOST_TEST_REQUIRE(writer.write_site(p, k, sites.back().data()).ok());
    }
    const std::vector<float> hidden = echo::test::activations(5 * 250, 99u + p);
    BOOST_TEST_REQUIRE(writer.write_hidden_states(p, hidden.data()).ok());
  }
  BOOST_TEST(!fs::exists(path));  // nothing visible before commit
  BOOST_TEST_REQUIRE(writer.commit().ok());

  TraceReader reader;
  BOOST_TEST_REQUIRE(reader.open(path).ok());
  const TraceInfo& got = reader.info();
  BOOST_TEST(got.ranks == 3);
  BOOST_TEST(got.count == 250u);
  BOOST_TEST(got.dtype == DType::kFloat16);
  BOOST_TEST(got.direction == Direction::kBackward);
  BOOST_TEST(got.has_hidden_states);
  BOOST_TEST(got.site_kind == info.site_kind);
  BOOST_TEST(*got.tokens == 5);
  BOOST_TEST(got.model == "unit-test");
  std::vector<float> back(3 * 250);
  BOOST_TEST_REQUIRE(reader.read_site(1, 2, back.data()).ok());
  BOOST_TEST(echo::test::first_bit_difference(back.data(), sites[4 + 2].data(), back.size()) == -1);
  BOOST_TEST(reader.read_site(2, 0, back.data()).code() == StatusCode::kInvalidArgument);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(abandoned_writer_leaves_no_file) {
  const fs::path dir = fs::temp_directory_path() / ("echo-trace-abandon-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    TraceInfo info;
    info.ranks = 2;
    info.passes = 1;
    info.sites = 1;
    info.count = 10;
    TraceWriter writer;
    BOOST_TEST_REQUIRE(writer.create((dir / "t.h5").string(), info).ok());
  }
  BOOST_TEST(fs::is_empty(dir));
  TraceInfo bad;
  TraceWriter writer;
  BOOST_TEST(writer.create((dir / "u.h5").string(), bad).code() == StatusCode::kInvalidArgument);
  BOOST_TEST(fs::is_empty(dir));
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()
