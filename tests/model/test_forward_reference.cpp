// The C++ forward pass (P = 1, fp32: no all-reduce rounding) against the independent float64
// numpy forward of tools/reference_forward.py, on the prompts stored in reference-logits.h5.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "smollm2_fixture.h"

using echo::model::Matrix;
using echo::model::TensorParallel;
using echo::model::TensorParallelSpec;
using echo::model::testing::GoldenFile;
using echo::model::testing::data_path;
using echo::model::testing::smollm2;

namespace {

// fp32 accumulation over 30 layers of 576-wide dot products against a float64 reference leaves
// relative errors near 1e-6; 1e-4 leaves room for BLAS-order differences, 1e-3 is the target.
constexpr double kMaxRelativeError = 1e-4;

struct ErrorNorms {
  double diff_sq = 0.0;
  double ref_sq = 0.0;
  double relative() const { return std::sqrt(diff_sq / ref_sq); }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(forward_reference)

BOOST_AUTO_TEST_CASE(logits_match_numpy_float64) {
  const GoldenFile golden(data_path("reference-logits.h5"));
  TensorParallelSpec spec;
  spec.ranks = 1;
  spec.dtype = echo::DType::kFloat32;
  TensorParallel tp;
  BOOST_REQUIRE(tp.configure(spec).ok());
  int prompts = 0;
  ErrorNorms all;
  for (int p = 0; golden.has("prompt" + std::to_string(p)); ++p) {
    const std::string group = "prompt" + std::to_string(p);
    const std::vector<std::int32_t> ids = golden.read<std::int32_t>(group + "/ids");
    std::vector<std::int32_t> cpp_ids;
    BOOST_REQUIRE(smollm2().tokenizer().encode(golden.attribute(group, "text"), &cpp_ids).ok());
    BOOST_TEST(cpp_ids == ids, boost::test_tools::per_element());

    Matrix logits;
    BOOST_REQUIRE(smollm2().forward(ids, tp, &logits).ok());
    const std::vector<std::int32_t> columns = golden.read<std::int32_t>(group + "/columns");
    const std::vector<float> sampled = golden.read<float>(group + "/sampled_logits");
    const std::vector<float> last = golden.read<float>(group + "/last_logits");
    BOOST_REQUIRE(sampled.size() == ids.size() * columns.size());
    BOOST_REQUIRE(last.size() == static_cast<std::size_t>(logits.cols()));
    ErrorNorms norms;
    for (std::size_t t = 0; t < ids.size(); ++t) {
      for (std::size_t c = 0; c < columns.size(); ++c) {
        const double ref = sampled[t * columns.size() + c];
        const double diff = logits(static_cast<Eigen::Index>(t), columns[c]) - ref;
        norms.diff_sq += diff * diff;
        norms.ref_sq += ref * ref;
      }
    }
    for (std::size_t v = 0; v < last.size(); ++v) {
      const double diff = logits(logits.rows() - 1, static_cast<Eigen::Index>(v)) - last[v];
      norms.diff_sq += diff * diff;
      norms.ref_sq += static_cast<double>(last[v]) * last[v];
    }
    BOOST_TEST_MESSAGE("prompt " << p << ": relative logit error " << norms.relative());
    BOOST_TEST(norms.ref_sq > 0.0);
    BOOST_TEST(norms.relative() < kMaxRelativeError);
    all.diff_sq += norms.diff_sq;
    all.ref_sq += norms.ref_sq;
    ++prompts;
  }
  BOOST_TEST_MESSAGE("all prompts: relative logit error " << all.relative());
  BOOST_TEST(prompts >= 3);
}

BOOST_AUTO_TEST_CASE(greedy_continuation_names_paris) {
  TensorParallelSpec spec;
  spec.ranks = 1;
  spec.dtype = echo::DType::kFloat32;
  TensorParallel tp;
  BOOST_REQUIRE(tp.configure(spec).ok());
  std::vector<std::int32_t> ids;
  BOOST_REQUIRE(smollm2().tokenizer().encode("The capital of France is", &ids).ok());
  Matrix logits;
  BOOST_REQUIRE(smollm2().forward(ids, tp, &logits).ok());
  Eigen::Index best = 0;
  logits.row(logits.rows() - 1).maxCoeff(&best);
  BOOST_TEST(smollm2().tokenizer().decode({static_cast<std::int32_t>(best)}) == " Paris");
}

BOOST_AUTO_TEST_SUITE_END()
