// Dequantization of hand-built blocks against values computed by hand from the ggml layouts:
// every result is a small integer times a power of two plus an fp16 offset, so exact in fp32.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <vector>

#include "echo/dtype.h"
#include "echo/model/dequantize.h"

using echo::model::GgmlType;
using echo::model::dequantize;

namespace {

void put_half(std::vector<std::uint8_t>& out, float value) {
  const std::uint16_t bits = echo::float_to_half_bits(value);
  out.push_back(static_cast<std::uint8_t>(bits & 0xFF));
  out.push_back(static_cast<std::uint8_t>(bits >> 8));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(dequantize_blocks)

BOOST_AUTO_TEST_CASE(q4_1_low_nibbles_first_then_high) {
  std::vector<std::uint8_t> block;
  put_half(block, 0.25f);   // d
  put_half(block, -1.0f);   // m
  for (int j = 0; j < 16; ++j) block.push_back(static_cast<std::uint8_t>((15 - j) << 4 | j));
  std::vector<float> out(32, 0.0f);
  BOOST_REQUIRE(dequantize(GgmlType::kQ4_1, block.data(), block.size(), 32, out.data()).ok());
  for (int j = 0; j < 16; ++j) {
    BOOST_TEST(out[j] == 0.25f * j - 1.0f);
    BOOST_TEST(out[j + 16] == 0.25f * (15 - j) - 1.0f);
  }
}

BOOST_AUTO_TEST_CASE(q8_0_signed_codes) {
  std::vector<std::uint8_t> block;
  put_half(block, 0.5f);
  for (int j = 0; j < 32; ++j) block.push_back(static_cast<std::uint8_t>(static_cast<std::int8_t>(j * 8 - 128)));
  std::vector<float> out(32, 0.0f);
  BOOST_REQUIRE(dequantize(GgmlType::kQ8_0, block.data(), block.size(), 32, out.data()).ok());
  for (int j = 0; j < 32; ++j) BOOST_TEST(out[j] == 0.5f * static_cast<float>(j * 8 - 128));
}

BOOST_AUTO_TEST_CASE(q4_0_offsets_codes_by_eight) {
  std::vector<std::uint8_t> block;
  put_half(block, 2.0f);
  for (int j = 0; j < 16; ++j) block.push_back(static_cast<std::uint8_t>(0xF0 | (j & 0x0F)));
  std::vector<float> out(32, 0.0f);
  BOOST_REQUIRE(dequantize(GgmlType::kQ4_0, block.data(), block.size(), 32, out.data()).ok());
  for (int j = 0; j < 16; ++j) {
    BOOST_TEST(out[j] == 2.0f * static_cast<float>(j - 8));
    BOOST_TEST(out[j + 16] == 14.0f);
  }
}

BOOST_AUTO_TEST_CASE(f16_and_f32_pass_through) {
  std::vector<std::uint8_t> halves;
  for (const float v : {1.5f, -65504.0f, 0.0f}) put_half(halves, v);
  std::vector<float> out(3, 1.0f);
  BOOST_REQUIRE(dequantize(GgmlType::kF16, halves.data(), halves.size(), 3, out.data()).ok());
  BOOST_TEST(out[0] == 1.5f);
  BOOST_TEST(out[1] == -65504.0f);
  BOOST_TEST(out[2] == 0.0f);
  const float values[2] = {3.25f, -7.0f};
  std::vector<std::uint8_t> raw(8);
  std::memcpy(raw.data(), values, 8);
  BOOST_REQUIRE(dequantize(GgmlType::kF32, raw.data(), raw.size(), 2, out.data()).ok());
  BOOST_TEST(out[0] == 3.25f);
  BOOST_TEST(out[1] == -7.0f);
}

BOOST_AUTO_TEST_CASE(size_mismatch_and_unsupported_type) {
  std::vector<std::uint8_t> block(20, 0);
  std::vector<float> out(64);
  BOOST_TEST(static_cast<int>(dequantize(GgmlType::kQ4_1, block.data(), block.size(), 64,
                                         out.data()).code()) ==
             static_cast<int>(echo::StatusCode::kInvalidArgument));
  std::vector<std::uint8_t> k_block(210, 0);
  std::vector<float> k_out(256);
  const echo::Status status =
      dequantize(GgmlType::kQ6_K, k_block.data(), k_block.size(), 256, k_out.data());
  BOOST_TEST(static_cast<int>(status.code()) == static_cast<int>(echo::StatusCode::kUnsupported));
  BOOST_TEST(status.message().find("Q6_K") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
