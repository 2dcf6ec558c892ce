// Packed wire format: layout and round trips.
#include <boost/test/unit_test.hpp>

#include "echo/wire.h"
#include "test_util.h"

using namespace echo;

BOOST_AUTO_TEST_SUITE(wire)

BOOST_AUTO_TEST_CASE(four_bit_codes_fill_low_nibble_first) {
  QuantSpec spec{4, 16, QuantizerKind::kZeroAware};
  std::vector<std::uint8_t> codes(16);
  for (int i = 0; i < 16; ++i) codes[i] = static_cast<std::uint8_t>(i);
  GroupParams params{0x3C00, 0x4800};
  std::vector<std::uint8_t> wire(wire_bytes(spec, 16));
  BOOST_TEST(wire.size() == 8u + 4u);
  pack_segment(spec, codes.data(), &params, 16, wire.data());
  BOOST_TEST(wire[0] == 0x10);
  BOOST_TEST(wire[7] == 0xFE);
  BOOST_TEST(wire[8] == 0x00);
  BOOST_TEST(wire[9] == 0x3C);
  BOOST_TEST(wire[10] == 0x00);
  BOOST_TEST(wire[11] == 0x48);
}

BOOST_AUTO_TEST_CASE(sizes_match_the_paper) {
  QuantSpec spec{4, 128, QuantizerKind::kZeroAware};
  BOOST_TEST(wire_bytes(spec, 128) == 68u);  // 4.25 bits per value
  spec.kind = QuantizerKind::kSymmetric;
  BOOST_TEST(wire_bytes(spec, 128) == 66u);
  spec.bits = 8;
  BOOST_TEST(wire_bytes(spec, 129) == 2u * (128u + 2u));  // partial group padded
}

BOOST_AUTO_TEST_CASE(round_trip_every_bit_width) {
  for (QuantizerKind kind : {QuantizerKind::kZeroAware, QuantizerKind::kSymmetric}) {
    for (int bits = kMinBits; bits <= kMaxBits; ++bits) {
      for (std::size_t count : {1u, 15u, 16u, 17u, 100u, 333u}) {
        QuantSpec spec{bits, 16, kind};
        const std::vector<float> x = echo::test::activations(count, 3u + bits);
        std::vector<std::uint8_t> codes(count), back(count);
        std::vector<GroupParams> params(spec.num_groups(count)), params_back(params.size());
        quantize(spec, x.data(), count, codes.data(), params.data());
        std::vector<std::uint8_t> wire(wire_bytes(spec, count));
        pack_segment(spec, codes.data(), params.data(), count, wire.data());
        unpack_segment(spec, wire.data(), count, back.data(), params_back.data());
        BOOST_TEST_REQUIRE(codes == back);
        for (std::size_t k = 0; k < params.size(); ++k) {
          BOOST_TEST_REQUIRE(params[k].scale == params_back[k].scale);
          BOOST_TEST_REQUIRE(params[k].zero_point == params_back[k].zero_point);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
