// The C++ tokenizer against ids from the Hugging Face `tokenizers` package
// (tools/make_tokenizer_golden.py) on the committed corpora and on edge-case strings.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "echo/model/text_file.h"
#include "smollm2_fixture.h"

using echo::model::testing::GoldenFile;
using echo::model::testing::data_path;
using echo::model::testing::smollm2;

namespace {

// Index of the first difference, or the common length when one is a prefix of the other.
std::size_t first_difference(const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b) {
  std::size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(tokenizer)

BOOST_AUTO_TEST_CASE(corpora_match_hugging_face_tokenizers) {
  const GoldenFile golden(data_path("tokenizer-golden.h5"));
  int checked = 0;
  for (int i = 0; golden.has("text" + std::to_string(i)); ++i) {
    const std::string group = "text" + std::to_string(i);
    const std::string path = std::string(ECHO_SOURCE_DIR) + "/" + golden.attribute(group, "path");
    std::string text;
    BOOST_REQUIRE_MESSAGE(echo::model::read_text_file(path, &text).ok(), "cannot read " + path);
    std::vector<std::int32_t> ids;
    BOOST_REQUIRE(smollm2().tokenizer().encode(text, &ids).ok());
    const std::vector<std::int32_t> expected = golden.read<std::int32_t>(group + "/ids");
    BOOST_TEST_INFO(path << ": first difference at token " << first_difference(ids, expected));
    BOOST_TEST(ids.size() == expected.size());
    BOOST_TEST((ids == expected));
    BOOST_TEST(expected.size() > 1000u);  // a real corpus, not an empty golden
    ++checked;
  }
  BOOST_TEST(checked >= 2);
}

BOOST_AUTO_TEST_CASE(edge_cases_match_hugging_face_tokenizers) {
  const GoldenFile golden(data_path("tokenizer-golden.h5"));
  int checked = 0;
  for (int i = 0; golden.has("cases/case" + std::to_string(i)); ++i) {
    const std::string group = "cases/case" + std::to_string(i);
    const std::string text = golden.attribute(group, "text");
    std::vector<std::int32_t> ids;
    BOOST_REQUIRE(smollm2().tokenizer().encode(text, &ids).ok());
    const std::vector<std::int32_t> expected = golden.read<std::int32_t>(group + "/ids");
    BOOST_TEST_INFO("text: \"" << text << "\"");
    BOOST_TEST(ids == expected, boost::test_tools::per_element());
    ++checked;
  }
  BOOST_TEST(checked >= 10);
}

BOOST_AUTO_TEST_CASE(decode_inverts_encode) {
  const std::string text = "Call me Ishmael. 1851 \xe2\x80\x94 caf\xc3\xa9<|im_end|>\n";
  std::vector<std::int32_t> ids;
  BOOST_REQUIRE(smollm2().tokenizer().encode(text, &ids).ok());
  BOOST_TEST(smollm2().tokenizer().decode(ids) == text);
}

BOOST_AUTO_TEST_CASE(invalid_utf8_is_refused) {
  std::vector<std::int32_t> ids;
  const echo::Status status = smollm2().tokenizer().encode("ab\xff", &ids);
  BOOST_TEST(!status.ok());
  BOOST_TEST(status.message().find("UTF-8") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
