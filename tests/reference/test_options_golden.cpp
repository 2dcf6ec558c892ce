// The transport options (docs/numerics.md 2.4-2.6: wide groups, outliers sent exactly, the
// Hadamard rotation) against golden vectors from an independent implementation
// (tests/reference/golden/make_options_golden.py): one group rotated, quantized, dequantized with
// its outliers placed and de-rotated by the reference, every value and field compared bit for bit.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "echo/numerics/group_params.h"
#include "echo/quantizer.h"
#include "echo/rotation.h"
#include "test_util.h"

using namespace echo;
using echo::test::bits_float;
using echo::test::float_bits;

namespace {

// One case of the golden file (its docstring gives the layout).
struct GoldenCase {
  std::string header;
  QuantSpec spec;
  std::vector<float> input;
  std::vector<float> sent;
  GroupParams params;
  std::vector<OutlierEntry> outliers;
  std::vector<int> codes;
  std::vector<float> received;
};

std::vector<float> hex_floats(const std::string& line, std::size_t count) {
  std::istringstream in(line);
  std::vector<float> v(count);
  for (float& x : v) {
    std::uint32_t b = 0;
    in >> std::hex >> b;
    x = bits_float(b);
  }
  return v;
}

// The next case, or false at the end of the file (a malformed case fails the test).
bool read_case(std::istream& in, GoldenCase* c) {
  if (!std::getline(in, c->header)) return false;
  std::istringstream h(c->header);
  std::string word, kind, overflow, rotation;
  std::size_t count = 0;
  h >> word >> kind >> c->spec.bits >> count >> c->spec.group >> overflow >> c->spec.outliers >> rotation;
  BOOST_TEST_REQUIRE(word == "case", "a case header: " << c->header);
  const auto k = parse_quantizer(kind);
  const auto o = parse_overflow_groups(overflow);
  const auto r = parse_rotation(rotation);
  BOOST_TEST_REQUIRE((k && o && r), "known quantizer, overflow mode and rotation: " << c->header);
  c->spec.kind = *k;
  c->spec.overflow = *o;
  c->spec.rotation = *r;
  BOOST_TEST_REQUIRE(c->spec.validate().ok(), c->header);
  std::string line;
  std::getline(in, line);
  c->input = hex_floats(line, count);
  std::getline(in, line);
  c->sent = hex_floats(line, count);
  std::getline(in, line);
  std::istringstream params(line);
  unsigned scale = 0, zero = 0;
  params >> std::hex >> scale >> zero;
  c->params = {static_cast<std::uint16_t>(scale), static_cast<std::uint16_t>(zero)};
  std::getline(in, line);
  std::istringstream entries(line);
  c->outliers.assign(static_cast<std::size_t>(c->spec.outliers), OutlierEntry{});
  for (OutlierEntry& e : c->outliers) {
    unsigned index = 0, value = 0;
    entries >> std::hex >> index >> value;
    e = {static_cast<std::uint16_t>(index), static_cast<std::uint16_t>(value)};
  }
  std::getline(in, line);
  std::istringstream codes(line);
  c->codes.assign(count, -1);
  for (int& q : c->codes) codes >> q;
  std::getline(in, line);
  c->received = hex_floats(line, count);
  return true;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(transport_options_golden)

BOOST_AUTO_TEST_CASE(every_option_matches_the_independent_implementation) {
  std::ifstream in(echo::test::data_path("tests/reference/golden/transport_options_golden.txt"));
  BOOST_TEST_REQUIRE(in.good());
  GoldenCase c;
  int cases = 0, wide = 0, rotated = 0, with_outliers = 0;
  while (read_case(in, &c)) {
    BOOST_TEST_CONTEXT("case " << cases << ": " << c.header) {
      const std::size_t n = c.input.size();
      BOOST_TEST_REQUIRE(c.spec.num_groups(n) == 1u, "one group per case");
      std::vector<float> sent = c.input;
      rotate_groups(c.spec, sent.data(), n);
      for (std::size_t i = 0; i < n; ++i) {
        BOOST_TEST_REQUIRE(float_bits(sent[i]) == float_bits(c.sent[i]), "rotated element " << i);
      }
      std::vector<std::uint8_t> codes(n);
      GroupParams params;
      std::vector<OutlierEntry> outliers(c.outliers.size());
      quantize(c.spec, sent.data(), n, codes.data(), &params, outliers.data());
      BOOST_TEST(params.scale == c.params.scale);
      BOOST_TEST(params.zero_point == c.params.zero_point);
      for (std::size_t j = 0; j < outliers.size(); ++j) {
        BOOST_TEST(outliers[j].index == c.outliers[j].index, "outlier slot " << j);
        BOOST_TEST(outliers[j].value == c.outliers[j].value, "outlier slot " << j);
      }
      for (std::size_t i = 0; i < n; ++i) {
        BOOST_TEST_REQUIRE(static_cast<int>(codes[i]) == c.codes[i], "code " << i);
      }
      std::vector<float> received(n);
      dequantize(c.spec, codes.data(), &params, n, received.data(), outliers.data());
      unrotate_groups(c.spec, received.data(), n);
      for (std::size_t i = 0; i < n; ++i) {
        BOOST_TEST_REQUIRE(float_bits(received[i]) == float_bits(c.received[i]), "received element " << i);
      }
    }
    ++cases;
    wide += numerics::is_wide_scale_field(c.params.scale) ? 1 : 0;
    rotated += c.spec.rotation == Rotation::kHadamard && c.input.size() == static_cast<std::size_t>(c.spec.group);
    with_outliers += c.spec.outliers > 0 ? 1 : 0;
  }
  // The file covers every option, and wide groups in numbers (a regenerated file that lost them
  // would pass the loop above vacuously).
  BOOST_TEST(cases >= 400);
  BOOST_TEST(wide >= 100);
  BOOST_TEST(rotated >= 100);
  BOOST_TEST(with_outliers >= 100);
}

BOOST_AUTO_TEST_SUITE_END()
