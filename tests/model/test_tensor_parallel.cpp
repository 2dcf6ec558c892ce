// Tensor-parallel emulation: feature slices, the exact all-reduce against a direct computation,
// the 60 sites a pass visits, and the per-pass compensator reset.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <vector>

#include "echo/dtype.h"
#include "smollm2_fixture.h"

using echo::DType;
using echo::model::Matrix;
using echo::model::ReduceMode;
using echo::model::SiteKind;
using echo::model::SiteObserver;
using echo::model::TensorParallel;
using echo::model::TensorParallelSpec;
using echo::model::slice_begin;
using echo::model::testing::smollm2;

namespace {

// Counts sites and remembers the contributions of one site.
class RecordingObserver : public SiteObserver {
 public:
  void on_site(int site, SiteKind kind, int ranks, std::size_t count,
               const float* const* contributions) override {
    sites.push_back(site);
    kinds.push_back(kind);
    if (site == 0) {
      first_site.assign(static_cast<std::size_t>(ranks), {});
      for (int r = 0; r < ranks; ++r) {
        first_site[static_cast<std::size_t>(r)].assign(contributions[r], contributions[r] + count);
      }
    }
  }
  void on_hidden(int index, const Matrix&) override { hidden.push_back(index); }

  std::vector<int> sites;
  std::vector<SiteKind> kinds;
  std::vector<int> hidden;
  std::vector<std::vector<float>> first_site;
};

std::vector<std::int32_t> sample_tokens() {
  std::vector<std::int32_t> ids;
  BOOST_REQUIRE(smollm2()
                    .tokenizer()
                    .encode("It is a way I have of driving off the spleen and regulating the "
                            "circulation.", &ids)
                    .ok());
  return ids;
}

TensorParallelSpec spec_for(int ranks, ReduceMode mode) {
  TensorParallelSpec spec;
  spec.ranks = ranks;
  spec.mode = mode;
  return spec;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(tensor_parallel)

BOOST_AUTO_TEST_CASE(slices_are_contiguous_and_head_aligned) {
  // 576 features = 9 heads of 64: P = 3 splits at head boundaries, P = 4 at 144.
  BOOST_TEST(slice_begin(576, 3, 1) == 192u);
  BOOST_TEST(slice_begin(576, 3, 2) == 384u);
  BOOST_TEST(slice_begin(576, 4, 1) == 144u);
  BOOST_TEST(slice_begin(576, 4, 4) == 576u);
  BOOST_TEST(slice_begin(1536, 8, 3) == 576u);
  BOOST_TEST(slice_begin(10, 3, 1) == 3u);
  BOOST_TEST(slice_begin(10, 3, 2) == 6u);
}

BOOST_AUTO_TEST_CASE(exact_reduce_is_the_rounded_sum_of_rounded_partials) {
  Matrix input = Matrix::Random(5, 12);
  Matrix weight = Matrix::Random(7, 12);
  TensorParallel tp;
  BOOST_REQUIRE(tp.configure(spec_for(3, ReduceMode::kExact)).ok());
  Matrix out;
  BOOST_REQUIRE(tp.reduce(0, SiteKind::kMlp, input, weight, &out, nullptr).ok());
  for (Eigen::Index t = 0; t < 5; ++t) {
    for (Eigen::Index o = 0; o < 7; ++o) {
      float sum = 0.0f;
      for (int r = 0; r < 3; ++r) {
        const Matrix partial = input.middleCols(4 * r, 4) * weight.middleCols(4 * r, 4).transpose();
        sum += echo::round_to_dtype(partial(t, o), DType::kBFloat16);
      }
      BOOST_TEST(out(t, o) == echo::round_to_dtype(sum, DType::kBFloat16));
    }
  }
  BOOST_TEST(out.norm() > 0.0f);
}

BOOST_AUTO_TEST_CASE(a_pass_visits_sixty_sites_in_order) {
  const std::vector<std::int32_t> ids = sample_tokens();
  TensorParallel tp;
  BOOST_REQUIRE(tp.configure(spec_for(4, ReduceMode::kExact)).ok());
  RecordingObserver observer;
  Matrix logits;
  BOOST_REQUIRE(smollm2().forward(ids, tp, &logits, &observer).ok());
  BOOST_REQUIRE(observer.sites.size() == 60u);
  for (int k = 0; k < 60; ++k) {
    BOOST_TEST(observer.sites[static_cast<std::size_t>(k)] == k);
    BOOST_TEST((observer.kinds[static_cast<std::size_t>(k)] ==
                (k % 2 == 0 ? SiteKind::kAttention : SiteKind::kMlp)));
  }
  BOOST_TEST(observer.hidden.size() == 61u);
  BOOST_REQUIRE(observer.first_site.size() == 4u);
  for (const auto& contribution : observer.first_site) {
    BOOST_TEST(contribution.size() == ids.size() * 576u);
    for (const float v : contribution) {
      BOOST_TEST_REQUIRE(v == echo::round_to_dtype(v, DType::kBFloat16));  // bf16 contributions
    }
  }
}

BOOST_AUTO_TEST_CASE(compensator_state_does_not_cross_passes) {
  const std::vector<std::int32_t> ids = sample_tokens();
  TensorParallel tp;
  BOOST_REQUIRE(tp.configure(spec_for(4, ReduceMode::kEcho)).ok());
  Matrix first, second;
  BOOST_REQUIRE(smollm2().forward(ids, tp, &first).ok());
  BOOST_REQUIRE(smollm2().forward(ids, tp, &second).ok());
  BOOST_TEST((first.array() == second.array()).all());
}

BOOST_AUTO_TEST_CASE(quantized_logits_stay_near_exact) {
  // Approximate: an 8-bit all-reduce moves logits by far less than 4-bit without compensation
  // (measured on this prompt: 0.031 and 0.28 relative; a 16x step in grid resolution).
  const std::vector<std::int32_t> ids = sample_tokens();
  auto logits_for = [&](TensorParallelSpec spec) {
    TensorParallel tp;
    BOOST_REQUIRE(tp.configure(spec).ok());
    Matrix logits;
    BOOST_REQUIRE(smollm2().forward(ids, tp, &logits).ok());
    return logits;
  };
  const Matrix exact = logits_for(spec_for(4, ReduceMode::kExact));
  TensorParallelSpec eight = spec_for(4, ReduceMode::kEcho);
  eight.allreduce.quant.bits = 8;
  TensorParallelSpec four_off = spec_for(4, ReduceMode::kEcho);
  four_off.allreduce.compensator.mode = echo::CompensatorMode::kOff;
  const double error8 = (logits_for(eight) - exact).norm() / exact.norm();
  const double error4 = (logits_for(four_off) - exact).norm() / exact.norm();
  BOOST_TEST_MESSAGE("relative logit change: 8-bit " << error8 << ", 4-bit uncompensated " << error4);
  BOOST_TEST(error8 > 0.0);
  BOOST_TEST(error8 < 0.1);
  BOOST_TEST(error8 < 0.25 * error4);
}

BOOST_AUTO_TEST_CASE(bad_specs_are_refused) {
  TensorParallel tp;
  BOOST_TEST(!tp.configure(spec_for(0, ReduceMode::kExact)).ok());
  BOOST_TEST(!tp.configure(spec_for(9, ReduceMode::kExact)).ok());
  TensorParallelSpec bad_bits = spec_for(4, ReduceMode::kEcho);
  bad_bits.allreduce.quant.bits = 1;
  BOOST_TEST(!tp.configure(bad_bits).ok());
  std::vector<std::int32_t> out_of_vocab = {49152};
  BOOST_REQUIRE(tp.configure(spec_for(1, ReduceMode::kExact)).ok());
  Matrix logits;
  BOOST_TEST(!smollm2().forward(out_of_vocab, tp, &logits).ok());
  BOOST_TEST(!smollm2().forward({}, tp, &logits).ok());
}

BOOST_AUTO_TEST_SUITE_END()
