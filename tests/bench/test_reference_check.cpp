// The benchmark's #wrong column: the CPU reference of a row's calls, every rank's output compared
// with it element by element; and the table and CSV cells of the verification columns. No GPU.
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "echo/numerics/dtype_rounding.h"
#include "reference_check.h"
#include "report.h"

namespace {

using namespace echo;
using Bits = std::vector<std::uint16_t>;

// P ranks of `count` bf16 values, roughly normal.
std::vector<Bits> random_inputs(int ranks, std::size_t count) {
  std::mt19937 gen(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<Bits> in(ranks, Bits(count));
  for (auto& r : in) {
    for (auto& v : r) v = numerics::float_to_bf16_bits(dist(gen));
  }
  return in;
}

AllReduceSpec spec_of(CompensatorMode mode) {
  AllReduceSpec spec;
  spec.dtype = DType::kBFloat16;
  spec.quant.bits = 4;
  spec.compensator.mode = mode;
  spec.exact_max_count = 0;  // always quantize
  return spec;
}

int commas(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), ',')); }

}  // namespace

BOOST_AUTO_TEST_SUITE(bench_reference_check)

BOOST_AUTO_TEST_CASE(wrong_counts_every_element_of_every_rank_unlike_the_reference) {
  const auto in = random_inputs(3, 1000);
  Bits expected;
  BOOST_TEST_REQUIRE(bench::reference_result(spec_of(CompensatorMode::kOff), in, 1, &expected).ok());
  BOOST_TEST_REQUIRE(expected.size() == 1000u);
  std::vector<Bits> out(3, expected);
  BOOST_TEST(bench::count_wrong(expected, out) == 0u);
  out[1][17] ^= 1;  // one bit of one element of rank 1
  BOOST_TEST(bench::count_wrong(expected, out) == 1u);
  out[2][17] ^= 0x8000;  // the same element on rank 2: counted again
  out[2][999] ^= 1;
  BOOST_TEST(bench::count_wrong(expected, out) == 3u);
  out[0].resize(998);  // a short output: the missing elements are wrong
  BOOST_TEST(bench::count_wrong(expected, out) == 5u);
}

// The reference carries the compensator from call to call as the device does: the first call
// from a reset state applies no correction (the uncompensated result), the second one does.
BOOST_AUTO_TEST_CASE(the_reference_carries_the_compensator_across_calls) {
  const auto in = random_inputs(2, 4096);
  Bits off, once, twice;
  BOOST_TEST_REQUIRE(bench::reference_result(spec_of(CompensatorMode::kOff), in, 1, &off).ok());
  BOOST_TEST_REQUIRE(bench::reference_result(spec_of(CompensatorMode::kDual), in, 1, &once).ok());
  BOOST_TEST_REQUIRE(bench::reference_result(spec_of(CompensatorMode::kDual), in, 2, &twice).ok());
  BOOST_TEST(once == off);
  BOOST_TEST(bench::count_wrong(once, {twice}) > 0u);
}

BOOST_AUTO_TEST_CASE(the_reference_refuses_ragged_inputs) {
  std::vector<Bits> in = random_inputs(2, 64);
  in[1].resize(63);
  Bits expected;
  const Status s = bench::reference_result(spec_of(CompensatorMode::kOff), in, 1, &expected);
  BOOST_TEST((s.code() == StatusCode::kInvalidArgument));
  BOOST_TEST(s.message().find("rank 1 has 63 elements") != std::string::npos, s.message());
}

// #wrong reads n/a where no reference was computed and is empty (CSV) or '-' (table) without
// verification; the CSV line has the header's thirteen columns either way.
BOOST_AUTO_TEST_CASE(verification_cells) {
  bench::RowResult r{"echo4", 1 << 20, 0.05, 0.1, true, {}};
  r.v.differ = 1;
  r.v.rel_error = 0.0125;
  BOOST_TEST(bench::table_line(r, 2).find("| n/a | 1 | 2.00x | 0.012500 |") != std::string::npos,
             bench::table_line(r, 2));
  BOOST_TEST(bench::csv_line(r, 2, "plain") == "echo4,2,plain,1048576,524288,bf16,50.0,21.0,21.0,n/a,1,2.00,0.012500\n");
  r.v.wrong = 0;
  BOOST_TEST(bench::table_line(r, 2).find("| 0 | 1 | 2.00x |") != std::string::npos, bench::table_line(r, 2));
  r.verified = false;
  BOOST_TEST(bench::table_line(r, 2).find("| - | - | 2.00x | - |") != std::string::npos, bench::table_line(r, 2));
  BOOST_TEST(bench::csv_line(r, 2, "plain") == "echo4,2,plain,1048576,524288,bf16,50.0,21.0,21.0,,,2.00,\n");
  BOOST_TEST(commas(bench::csv_line(r, 2, "plain")) == commas(bench::kCsvHeader));
}

// --csv appends only to a file of this version's columns: an earlier version's #wrong meant what
// #differ means now.
BOOST_AUTO_TEST_CASE(csv_of_other_columns_is_refused) {
  const auto dir = std::filesystem::temp_directory_path() / ("echo-bench-csv-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string old_file = (dir / "old.csv").string(), new_file = (dir / "new.csv").string();
  std::ofstream(old_file) << "row,ranks,mode,size,count,type,time,algbw,busbw,#wrong,ratio_vs_nccl,rel_error\n";
  std::ofstream(new_file) << bench::kCsvHeader;
  const Status old_status = bench::check_csv_columns(old_file);
  BOOST_TEST((old_status.code() == StatusCode::kInvalidArgument));
  BOOST_TEST(old_status.message().find(old_file) != std::string::npos, old_status.message());
  BOOST_TEST(bench::check_csv_columns(new_file).ok());
  BOOST_TEST(bench::check_csv_columns((dir / "absent.csv").string()).ok());
  BOOST_TEST_REQUIRE(bench::append_text(new_file, "x\n", bench::kCsvHeader).ok());
  std::ifstream in(new_file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BOOST_TEST(text == std::string(bench::kCsvHeader) + "x\n");
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()
