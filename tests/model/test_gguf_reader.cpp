// GGUF reader: a well-formed image parses to the expected metadata and tensors; each kind of
// malformed image is refused with kFormatError naming the field; every truncation is refused.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "echo/model/gguf.h"
#include "gguf_builder.h"

using echo::StatusCode;
using echo::model::GgmlType;
using echo::model::GgufFile;
using echo::model::testing::GgufBuilder;

namespace {

constexpr std::uint32_t kF32 = 0;
constexpr std::uint32_t kQ4_1 = 3;

std::vector<std::uint8_t> f32_bytes(const std::vector<float>& values) {
  std::vector<std::uint8_t> out;
  for (const float v : values) GgufBuilder::put_to(out, v);
  return out;
}

GgufBuilder valid_builder() {
  GgufBuilder b;
  b.kv_string("general.architecture", "llama")
      .kv_u32("llama.block_count", 2)
      .kv_f32("llama.rope.freq_base", 10000.0f)
      .kv_strings("tokenizer.ggml.tokens", {"a", "b", "ab"})
      .kv_i32s("tokenizer.ggml.token_type", {1, 1, 3})
      .tensor("norm", {4}, kF32, f32_bytes({1.0f, -2.0f, 0.5f, 3.0f}))
      .tensor("mat", {32, 2}, kQ4_1, std::vector<std::uint8_t>(40, 0x11));
  return b;
}

// Parses bytes and requires failure with kFormatError whose message mentions `field`.
void require_format_error(std::vector<std::uint8_t> bytes, const std::string& field) {
  GgufFile file;
  const echo::Status status = file.parse(std::move(bytes), "test.gguf");
  BOOST_TEST_INFO("message: " << status.message());
  BOOST_REQUIRE(!status.ok());
  BOOST_TEST(static_cast<int>(status.code()) == static_cast<int>(StatusCode::kFormatError));
  BOOST_TEST(status.message().find("test.gguf") != std::string::npos);
  BOOST_TEST(status.message().find(field) != std::string::npos);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(gguf_reader)

BOOST_AUTO_TEST_CASE(valid_file_parses_metadata_and_tensors) {
  GgufFile file;
  const echo::Status status = file.parse(valid_builder().bytes(), "test.gguf");
  BOOST_REQUIRE_MESSAGE(status.ok(), status.message());
  BOOST_TEST(file.version() == 3u);
  std::string architecture;
  BOOST_TEST(file.get_string("general.architecture", &architecture).ok());
  BOOST_TEST(architecture == "llama");
  std::int64_t layers = 0;
  BOOST_TEST(file.get_integer("llama.block_count", &layers).ok());
  BOOST_TEST(layers == 2);
  const std::vector<std::string>* tokens = nullptr;
  BOOST_REQUIRE(file.get_string_array("tokenizer.ggml.tokens", &tokens).ok());
  BOOST_TEST(*tokens == (std::vector<std::string>{"a", "b", "ab"}), boost::test_tools::per_element());
  BOOST_REQUIRE(file.tensors().size() == 2u);
  const auto* mat = file.find_tensor("mat");
  BOOST_REQUIRE(mat != nullptr);
  BOOST_TEST(static_cast<int>(mat->type) == static_cast<int>(GgmlType::kQ4_1));
  BOOST_TEST(mat->num_elements == 64u);
  BOOST_TEST(mat->num_bytes == 40u);
  BOOST_TEST(mat->offset == 32u);
  BOOST_TEST(file.tensor_data(*mat)[0] == 0x11);
  const auto* norm = file.find_tensor("norm");
  float second = 0;
  std::memcpy(&second, file.tensor_data(*norm) + 4, 4);
  BOOST_TEST(second == -2.0f);
}

BOOST_AUTO_TEST_CASE(wrong_type_lookup_names_the_key) {
  GgufFile file;
  BOOST_REQUIRE(file.parse(valid_builder().bytes(), "test.gguf").ok());
  std::string text;
  const echo::Status status = file.get_string("llama.block_count", &text);
  BOOST_TEST(!status.ok());
  BOOST_TEST(status.message().find("llama.block_count is uint32, expected a string") !=
             std::string::npos);
  BOOST_TEST(file.get_integer("missing.key", nullptr).message().find("missing.key is missing") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(bad_magic_and_version) {
  std::vector<std::uint8_t> bytes = valid_builder().bytes();
  bytes[0] = 'X';
  require_format_error(bytes, "magic");
  require_format_error(GgufBuilder(1).bytes(), "version");
  require_format_error({}, "magic");
}

BOOST_AUTO_TEST_CASE(every_truncation_is_refused) {
  const std::vector<std::uint8_t> bytes = valid_builder().bytes();
  for (std::size_t length = 0; length < bytes.size(); ++length) {
    GgufFile file;
    const echo::Status status =
        file.parse(std::vector<std::uint8_t>(bytes.begin(), bytes.begin() + length), "cut.gguf");
    BOOST_TEST_INFO("prefix of " << length << " bytes");
    BOOST_TEST(!status.ok());
    BOOST_TEST(static_cast<int>(status.code()) == static_cast<int>(StatusCode::kFormatError));
  }
}

BOOST_AUTO_TEST_CASE(huge_counts_are_refused_before_allocating) {
  GgufBuilder array;
  std::vector<std::uint8_t> entry;
  GgufBuilder::put_string(entry, "big");
  GgufBuilder::put_to(entry, std::uint32_t{9});            // array
  GgufBuilder::put_to(entry, std::uint32_t{8});            // of strings
  GgufBuilder::put_to(entry, std::uint64_t{1} << 60);      // absurd count
  array.kv_raw(entry, 1);
  require_format_error(array.bytes(), "metadata big");

  std::vector<std::uint8_t> bytes = valid_builder().bytes();
  const std::uint64_t huge = std::uint64_t{1} << 62;
  std::memcpy(bytes.data() + 16, &huge, 8);  // kv_count
  require_format_error(bytes, "kv_count");
}

BOOST_AUTO_TEST_CASE(string_longer_than_the_file) {
  std::vector<std::uint8_t> entry;
  GgufBuilder::put_to(entry, std::uint64_t{1000});  // key length past the end
  entry.push_back('k');
  GgufBuilder b;
  b.kv_raw(entry, 1);
  require_format_error(b.bytes(), "metadata key 0");
}

BOOST_AUTO_TEST_CASE(unknown_value_type_and_nested_array) {
  std::vector<std::uint8_t> entry;
  GgufBuilder::put_string(entry, "odd");
  GgufBuilder::put_to(entry, std::uint32_t{42});
  GgufBuilder unknown;
  unknown.kv_raw(entry, 1);
  require_format_error(unknown.bytes(), "unknown value type 42");

  std::vector<std::uint8_t> nested;
  GgufBuilder::put_string(nested, "nest");
  GgufBuilder::put_to(nested, std::uint32_t{9});
  GgufBuilder::put_to(nested, std::uint32_t{9});
  GgufBuilder::put_to(nested, std::uint64_t{1});
  GgufBuilder with_nested;
  with_nested.kv_raw(nested, 1);
  require_format_error(with_nested.bytes(), "nested arrays");
}

BOOST_AUTO_TEST_CASE(duplicate_key_and_tensor) {
  GgufBuilder keys;
  keys.kv_u32("k", 1).kv_u32("k", 2);
  require_format_error(keys.bytes(), "duplicate key");
  GgufBuilder tensors;
  tensors.tensor("t", {1}, kF32, f32_bytes({1})).tensor("t", {1}, kF32, f32_bytes({2}));
  require_format_error(tensors.bytes(), "duplicate tensor name");
}

BOOST_AUTO_TEST_CASE(bad_tensor_entries) {
  GgufBuilder dims;
  dims.tensor("t", {1, 1, 1, 1, 1}, kF32, f32_bytes({1}));
  require_format_error(dims.bytes(), "n_dims 5");
  GgufBuilder zero;
  zero.tensor("t", {0}, kF32, {});
  require_format_error(zero.bytes(), "dimension 0");
  GgufBuilder type;
  type.tensor("t", {1}, 99, f32_bytes({1}));
  require_format_error(type.bytes(), "unsupported tensor type 99");
  GgufBuilder block;
  block.tensor("t", {31}, kQ4_1, std::vector<std::uint8_t>(20, 0));
  require_format_error(block.bytes(), "not a multiple of the Q4_1 block size");
}

BOOST_AUTO_TEST_CASE(tensor_data_outside_the_file) {
  GgufBuilder past_end;
  past_end.tensor("t", {8}, kF32, f32_bytes({1, 2, 3}));  // 32 bytes declared, 12 present
  require_format_error(past_end.bytes(), "runs past the end");
  GgufBuilder misaligned;
  misaligned.tensor_at("t", {1}, kF32, 4, f32_bytes({1, 2}));
  require_format_error(misaligned.bytes(), "not aligned");
  GgufBuilder wrapped;
  wrapped.tensor_at("t", {1}, kF32, ~std::uint64_t{31}, f32_bytes({1}));
  require_format_error(wrapped.bytes(), "runs past the end");
}

BOOST_AUTO_TEST_CASE(bad_alignment_value) {
  GgufBuilder b;
  b.kv_u32("general.alignment", 24);
  require_format_error(b.bytes(), "general.alignment");
}

BOOST_AUTO_TEST_SUITE_END()
