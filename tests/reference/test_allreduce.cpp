// The reference all-reduce: structure (two quantizations), rank identity, residual identity,
// backward scaling, non-finite policy, exact path and argument checks, swept over P, n, bits,
// groups, quantizers, dtypes and residual modes.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <limits>

#include "echo/allreduce.h"
#include "test_util.h"

using namespace echo;
using echo::test::first_bit_difference;

namespace {

struct Ranks {
  std::vector<std::vector<float>> in, out, xp;
  std::vector<const float*> in_ptr;
  std::vector<float*> out_ptr, xp_ptr;
  Ranks(int p, std::size_t n, std::uint32_t seed, float scale = 1.0f, float offset = 0.0f)
      : in(p), out(p, std::vector<float>(n)), xp(p, std::vector<float>(n)) {
    for (int r = 0; r < p; ++r) {
      in[r] = echo::test::activations(n, seed * 31u + r, scale, offset);
      in_ptr.push_back(in[r].data());
      out_ptr.push_back(out[r].data());
      xp_ptr.push_back(xp[r].data());
    }
  }
};

// The owner algorithm written out directly from quantize_dequantize: two quantizations per element.
std::vector<float> two_quantization_model(const AllReduceSpec& spec, int p, std::size_t n,
                                          const Ranks& data) {
  std::vector<float> y(n);
  const Segmentation seg(n, spec.quant.group, p);
  for (int j = 0; j < p; ++j) {
    const std::size_t b = seg.begin(j), len = seg.end(j) - b;
    if (len == 0) continue;
    std::vector<float> acc(len), tmp(len), x(len);
    for (int i = 0; i < p; ++i) {
      for (std::size_t e = 0; e < len; ++e) x[e] = round_to_dtype(data.in[i][b + e], spec.dtype);
      if (i != j) quantize_dequantize(spec.quant, x.data(), len, tmp.data()); else tmp = x;
      for (std::size_t e = 0; e < len; ++e) acc[e] = i == 0 ? tmp[e] : acc[e] + tmp[e];
    }
    quantize_dequantize(spec.quant, acc.data(), len, tmp.data());
    for (std::size_t e = 0; e < len; ++e) y[b + e] = round_to_dtype(tmp[e], spec.dtype);
  }
  return y;
}

const std::size_t kAwkwardCounts[] = {1, 7, 127, 129, 1000, 4799, 576 * 3 + 5};

}  // namespace

BOOST_AUTO_TEST_SUITE(allreduce_reference)

BOOST_AUTO_TEST_CASE(segmentation_covers_the_message_on_group_boundaries) {
  for (int p = 1; p <= kMaxRanks; ++p) {
    for (std::size_t n : kAwkwardCounts) {
      const Segmentation seg(n, 128, p);
      std::size_t covered = 0;
      for (int j = 0; j < p; ++j) {
        BOOST_TEST_REQUIRE((seg.begin(j) % 128 == 0u || seg.begin(j) == n));
        BOOST_TEST_REQUIRE(seg.begin(j) == (j == 0 ? 0 : seg.end(j - 1)));
        covered += seg.end(j) - seg.begin(j);
      }
      BOOST_TEST_REQUIRE(covered == n);
    }
  }
}

BOOST_AUTO_TEST_CASE(owner_algorithm_is_two_quantizations_and_ranks_agree) {
  const QuantizerKind kinds[] = {QuantizerKind::kZeroAware, QuantizerKind::kNaive, QuantizerKind::kSymmetric};
  const DType dtypes[] = {DType::kFloat32, DType::kBFloat16, DType::kFloat16};
  std::uint32_t seed = 0;
  for (int p = 1; p <= kMaxRanks; ++p) {
    for (std::size_t n : kAwkwardCounts) {
      for (int bits : {4, 8}) {
        for (int group : {16, 128, 1024}) {
          const QuantizerKind kind = kinds[seed % 3];
          const DType dtype = dtypes[(seed / 3) % 3];
          ++seed;
          AllReduceSpec spec;
          spec.quant = {bits, group, kind};
          spec.dtype = dtype;
          spec.compensator.mode = CompensatorMode::kOff;
          Ranks data(p, n, seed, 2.0f, 0.5f);
          AllReduceReport report;
          BOOST_TEST_REQUIRE(allreduce(spec, p, n, data.in_ptr.data(), data.out_ptr.data(), nullptr, nullptr, &report).ok());
          const std::vector<float> model = two_quantization_model(spec, p, n, data);
          BOOST_TEST_CONTEXT("P " << p << " n " << n << " bits " << bits << " group " << group << " "
                                  << quantizer_name(kind) << " " << dtype_name(dtype)) {
            BOOST_TEST_REQUIRE(first_bit_difference(data.out[0].data(), model.data(), n) == -1);
            for (int r = 1; r < p; ++r) {
              BOOST_TEST_REQUIRE(first_bit_difference(data.out[0].data(), data.out[r].data(), n) == -1);
            }
            BOOST_TEST(report.poisoned_groups == 0u);
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(error_is_bounded_by_two_quantization_steps) {
  // |y - sum x| <= sum of the pushed copies' half steps + the gather's half step: at most two
  // roundings per element, whatever P. Checked here as a bound that grows with P only through
  // the number of independent pushed copies, unlike the ring.
  AllReduceSpec spec;
  spec.dtype = DType::kFloat32;
  spec.compensator.mode = CompensatorMode::kOff;
  spec.quant = {8, 128, QuantizerKind::kZeroAware};
  for (int p = 2; p <= kMaxRanks; ++p) {
    const std::size_t n = 128 * p * 4;
    Ranks data(p, n, 900u + p);
    BOOST_TEST_REQUIRE(allreduce(spec, p, n, data.in_ptr.data(), data.out_ptr.data(), nullptr, nullptr, nullptr).ok());
    AllReduceSpec ring = spec;
    ring.algorithm = Algorithm::kRing;
    Ranks ring_data(p, n, 900u + p);
    BOOST_TEST_REQUIRE(allreduce(ring, p, n, ring_data.in_ptr.data(), ring_data.out_ptr.data(), nullptr, nullptr, nullptr).ok());
    // Half a quantization step of a group whose values span [lo, hi]: the zero-aware map at most
    // widens the range to take in 0, and the fp16 scale adds at most 2^-10 of a step.
    const double levels = (1 << spec.quant.bits) - 1;
    auto half_step = [&](const float* v, std::size_t first) {
      double lo = 0.0, hi = 0.0;
      for (std::size_t i = first; i < first + 128; ++i) {
        lo = std::min(lo, static_cast<double>(v[i]));
        hi = std::max(hi, static_cast<double>(v[i]));
      }
      return (hi - lo) / levels / 2.0 * (1.0 + 0x1p-10);
    };
    const std::size_t segment = n / p;
    std::vector<double> exact(n, 0.0);
    for (std::size_t e = 0; e < n; ++e) {
      for (int r = 0; r < p; ++r) exact[e] += data.in[r][e];
    }
    std::vector<float> sum_f(exact.begin(), exact.end());
    double owner_err = 0.0, ring_err = 0.0;
    for (std::size_t e = 0; e < n; ++e) {
      const std::size_t group = e / 128 * 128;
      const int owner = static_cast<int>(e / segment);
      // One rounding of every pushed copy (the owner keeps its own), one of the reduced sum, and
      // the fp32 sum's own rounding.
      double bound = half_step(sum_f.data(), group) * 1.1;  // the reduced sum spans about the same range
      double magnitude = 0.0;
      for (int r = 0; r < p; ++r) {
        if (r != owner) bound += half_step(data.in[r].data(), group);
        magnitude += std::abs(data.in[r][e]);
      }
      bound += p * 0x1p-23 * magnitude;
      BOOST_TEST(std::abs(data.out[0][e] - exact[e]) <= bound, "P " << p << ", element " << e);
      owner_err += std::pow(data.out[0][e] - exact[e], 2);
      ring_err += std::pow(ring_data.out[0][e] - exact[e], 2);
    }
    if (p >= 4) BOOST_TEST(owner_err < ring_err, "P " << p << " owner " << owner_err << " ring " << ring_err);
    for (int r = 1; r < p; ++r) {
      BOOST_TEST_REQUIRE(first_bit_difference(ring_data.out[0].data(), ring_data.out[r].data(), n) == -1);
    }
  }
}

BOOST_AUTO_TEST_CASE(residuals_sum_to_minus_the_injected_error) {
  // Quantized path, and the exact path (x' rounded to bf16 before the sum in these forward bf16
  // calls, so each rank's rounding error joins its local residual).
  for (bool exact : {false, true}) {
  for (ResidualMode residual : {ResidualMode::kGlobal, ResidualMode::kLocal}) {
    for (int p : {1, 2, 3, 4, 8}) {
      for (std::size_t n : {129u, 1000u, 4799u}) {
        AllReduceSpec spec;
        spec.dtype = DType::kBFloat16;
        spec.exact_max_count = exact ? n : 0;
        spec.compensator.mode = CompensatorMode::kSingle;
        spec.compensator.beta = 0.0f;  // m1 = u exactly after one call
        spec.compensator.residual = residual;
        std::vector<CompensatorState> states(p);
        Ranks data(p, n, 42u + p, 3.0f, 0.1f);
        // Two calls: the second applies the first's residuals, so its x' are no bf16 values.
        for (int call = 0; call < 2; ++call) {
          BOOST_TEST_REQUIRE(allreduce(spec, p, n, data.in_ptr.data(), data.out_ptr.data(), states.data(),
                                       data.xp_ptr.data(), nullptr)
                                 .ok());
        }
        double worst = 0.0, size = 0.0;
        for (std::size_t e = 0; e < n; ++e) {
          double sum_u = 0.0, sum_xp = 0.0;
          for (int r = 0; r < p; ++r) {
            sum_u += states[r].m1[e];
            sum_xp += data.xp[r][e];
          }
          const double delta = data.out[0][e] - sum_xp;
          worst = std::max(worst, std::fabs(sum_u + delta));
          size = std::max(size, std::fabs(delta));
        }
        // Each u_i is one fp32 rounding of a value below ~2 |x| (global) or one step (local):
        // P * 2^-24 * 30 < 2e-5 absolute for these inputs (|x| < ~30).
        // (One rank on the exact path injects nothing: its sum is its own bf16 x'.)
        if (!exact || p > 1) BOOST_TEST(size > 0.0);
        BOOST_TEST(worst <= 2e-5, residual_mode_name(residual) << (exact ? " exact" : "") << " P " << p << " n "
                                                              << n << " worst " << worst);
      }
    }
  }
  }
}

BOOST_AUTO_TEST_CASE(compensated_calls_keep_ranks_identical_in_both_residual_modes) {
  for (ResidualMode residual : {ResidualMode::kGlobal, ResidualMode::kLocal}) {
    for (CompensatorMode mode : {CompensatorMode::kSingle, CompensatorMode::kDual}) {
      const int p = 3;
      const std::size_t n = 1111;
      AllReduceSpec spec;
      spec.compensator.mode = mode;
      spec.compensator.residual = residual;
      std::vector<CompensatorState> states(p);
      for (int site = 0; site < 20; ++site) {
        Ranks data(p, n, 7u * site + 1);
        BOOST_TEST_REQUIRE(allreduce(spec, p, n, data.in_ptr.data(), data.out_ptr.data(), states.data(), nullptr, nullptr).ok());
        for (int r = 1; r < p; ++r) {
          BOOST_TEST_REQUIRE(first_bit_difference(data.out[0].data(), data.out[r].data(), n) == -1);
        }
      }
      // The states differ per rank (each holds its own residual) but are finite and non-zero.
      for (int r = 0; r < p; ++r) {
        BOOST_TEST_REQUIRE(states[r].m1.size() == n);
        std::size_t nonzero = 0;
        for (std::size_t i = 0; i < n; ++i) {
          BOOST_TEST_REQUIRE(std::isfinite(states[r].m1[i]));
          if (i < states[r].m2.size()) BOOST_TEST_REQUIRE(std::isfinite(states[r].m2[i]));
          nonzero += states[r].m1[i] != 0.0f;
        }
        BOOST_TEST(nonzero > n / 2, "rank " << r << ": " << nonzero << " of " << n << " non-zero");
      }
      BOOST_TEST(first_bit_difference(states[0].m1.data(), states[1].m1.data(), n) != -1);
    }
  }
}

BOOST_AUTO_TEST_CASE(in_place_equals_out_of_place) {
  const int p = 4;
  const std::size_t n = 3001;
  AllReduceSpec spec;
  std::vector<CompensatorState> s1(p), s2(p);
  Ranks a(p, n, 11u), b(p, n, 11u);
  std::vector<float*> in_place(p);
  for (int r = 0; r < p; ++r) in_place[r] = b.in[r].data();
  BOOST_TEST_REQUIRE(allreduce(spec, p, n, a.in_ptr.data(), a.out_ptr.data(), s1.data(), nullptr, nullptr).ok());
  BOOST_TEST_REQUIRE(allreduce(spec, p, n, b.in_ptr.data(), in_place.data(), s2.data(), nullptr, nullptr).ok());
  for (int r = 0; r < p; ++r) {
    BOOST_TEST_REQUIRE(first_bit_difference(a.out[r].data(), b.in[r].data(), n) == -1);
    BOOST_TEST_REQUIRE(first_bit_difference(s1[r].m1.data(), s2[r].m1.data(), n) == -1);
  }
}

BOOST_AUTO_TEST_CASE(power_of_two_scaling_is_exact) {
  // Backward mode on x * 2^m returns the backward result on x times 2^m, bit for bit, when no
  // scale is subnormal: the shared exponent absorbs the factor.
  const int p = 4;
  const std::size_t n = 2048 + 77;
  AllReduceSpec spec;
  spec.direction = Direction::kBackward;
  spec.dtype = DType::kFloat32;
  spec.compensator.mode = CompensatorMode::kOff;
  for (int m : {-20, -7, 3, 12}) {
    Ranks base(p, n, 5u), scaled(p, n, 5u);
    for (int r = 0; r < p; ++r) {
      for (float& v : scaled.in[r]) v = std::ldexp(v, m);
    }
    AllReduceReport rb, rs;
    BOOST_TEST_REQUIRE(allreduce(spec, p, n, base.in_ptr.data(), base.out_ptr.data(), nullptr, nullptr, &rb).ok());
    BOOST_TEST_REQUIRE(allreduce(spec, p, n, scaled.in_ptr.data(), scaled.out_ptr.data(), nullptr, nullptr, &rs).ok());
    BOOST_TEST(rs.scale_exponent == rb.scale_exponent - m);
    for (std::size_t e = 0; e < n; ++e) {
      BOOST_TEST_REQUIRE(echo::test::float_bits(std::ldexp(base.out[0][e], m)) ==
                         echo::test::float_bits(scaled.out[0][e]), "m " << m << " element " << e);
    }
  }
}

BOOST_AUTO_TEST_CASE(backward_scaling_rescues_tiny_gradients) {
  const int p = 2;
  const std::size_t n = 1024;
  AllReduceSpec spec;
  spec.dtype = DType::kFloat32;
  spec.compensator.mode = CompensatorMode::kOff;
  Ranks fwd(p, n, 3u, 1e-9f), bwd(p, n, 3u, 1e-9f);
  BOOST_TEST_REQUIRE(allreduce(spec, p, n, fwd.in_ptr.data(), fwd.out_ptr.data(), nullptr, nullptr, nullptr).ok());
  spec.direction = Direction::kBackward;
  BOOST_TEST_REQUIRE(allreduce(spec, p, n, bwd.in_ptr.data(), bwd.out_ptr.data(), nullptr, nullptr, nullptr).ok());
  double err_fwd = 0.0, err_bwd = 0.0, ref = 0.0;
  for (std::size_t e = 0; e < n; ++e) {
    const double exact = static_cast<double>(fwd.in[0][e]) + fwd.in[1][e];
    err_fwd += std::pow(fwd.out[0][e] - exact, 2);
    err_bwd += std::pow(bwd.out[0][e] - exact, 2);
    ref += exact * exact;
  }
  // Unscaled, fp16 scales bottom out at 2^-24 >> 1e-9: the grid is far too coarse.
  BOOST_TEST(std::sqrt(err_bwd / ref) < 0.2);
  BOOST_TEST(std::sqrt(err_fwd / ref) > 0.9);
  BOOST_TEST(backward_scale_exponent(1.0f) == 14);
  BOOST_TEST(backward_scale_exponent(0.0f) == 0);
  BOOST_TEST(backward_scale_exponent(std::numeric_limits<float>::infinity()) == 0);
}

BOOST_AUTO_TEST_CASE(non_finite_input_poisons_its_group_on_every_rank) {
  for (bool owner_segment : {false, true}) {
    const int p = 4;
    const std::size_t n = 128 * 8;
    AllReduceSpec spec;
    spec.quant.group = 128;
    Ranks data(p, n, 8u);
    // Element 300 is in group 2, segment 1 (groups 2..3). Rank 1 owns it, rank 2 pushes it.
    data.in[owner_segment ? 1 : 2][300] = std::numeric_limits<float>::quiet_NaN();
    data.in[0][900] = std::numeric_limits<float>::infinity();
    std::vector<CompensatorState> states(p);
    AllReduceReport report;
    BOOST_TEST_REQUIRE(allreduce(spec, p, n, data.in_ptr.data(), data.out_ptr.data(), states.data(), nullptr, &report).ok());
    BOOST_TEST(report.poisoned_groups == 2u);
    for (int r = 0; r < p; ++r) {
      for (std::size_t e = 0; e < n; ++e) {
        const bool poisoned = e / 128 == 2 || e / 128 == 7;
        BOOST_TEST_REQUIRE(std::isnan(data.out[r][e]) == poisoned, "rank " << r << " element " << e);
      }
    }
  }
}

// NaNs of any sign and payload in the inputs, and NaNs the compensator carries from one call into
// the next: every NaN the library writes (output, x', state) is the canonical one, on both paths
// and in both residual modes, with fp32 and bf16 state.
BOOST_AUTO_TEST_CASE(every_nan_written_is_canonical) {
  const int p = 3;
  const std::size_t n = 128 * 9 + 5;
  for (std::size_t exact : {std::size_t{0}, n}) {
    for (ResidualMode residual : {ResidualMode::kGlobal, ResidualMode::kLocal}) {
      for (DType state_dtype : {DType::kFloat32, DType::kBFloat16}) {
        for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
          AllReduceSpec spec;
          spec.dtype = dtype;
          spec.exact_max_count = exact;
          spec.compensator.mode = CompensatorMode::kDual;
          spec.compensator.residual = residual;
          spec.compensator.state_dtype = state_dtype;
          std::vector<CompensatorState> states(p);
          std::size_t nans = 0;
          for (int call = 0; call < 3; ++call) {
            Ranks data(p, n, 40u + call);
            data.in[0][7] = test::bits_float(0xFFC005A5u);     // negative NaN with a payload
            data.in[1][300] = test::bits_float(0x7F800001u);   // signalling NaN
            data.in[2][301] = std::numeric_limits<float>::infinity();
            data.in[1][301] = -std::numeric_limits<float>::infinity();  // Inf - Inf: a new NaN
            BOOST_TEST_REQUIRE(allreduce(spec, p, n, data.in_ptr.data(), data.out_ptr.data(), states.data(),
                                         data.xp_ptr.data(), nullptr).ok());
            auto check = [&](const std::vector<float>& v, const char* what) {
              for (std::size_t e = 0; e < v.size(); ++e) {
                if (!std::isnan(v[e])) continue;
                ++nans;
                BOOST_TEST_REQUIRE(test::float_bits(v[e]) == kCanonicalNaNFloat,
                                   what << " element " << e << " call " << call << " dtype " << dtype_name(dtype));
              }
            };
            for (int r = 0; r < p; ++r) {
              check(data.out[r], "output");
              check(data.xp[r], "x'");
              check(states[r].m1, "m1");
              check(states[r].m2, "m2");
            }
          }
          BOOST_TEST(nans > 0u);  // the inputs did produce NaNs to check
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(exact_path_sums_in_rank_order) {
  const int p = 5;
  const std::size_t n = 333;
  AllReduceSpec spec;
  spec.exact_max_count = 333;
  spec.compensator.mode = CompensatorMode::kOff;
  Ranks data(p, n, 21u);
  AllReduceReport report;
  BOOST_TEST_REQUIRE(allreduce(spec, p, n, data.in_ptr.data(), data.out_ptr.data(), nullptr, nullptr, &report).ok());
  BOOST_TEST(report.exact_path);
  std::vector<float> rounded[p];
  std::vector<const float*> ptr(p);
  for (int r = 0; r < p; ++r) {
    rounded[r] = data.in[r];
    round_to_dtype(rounded[r].data(), n, spec.dtype);
    ptr[r] = rounded[r].data();
  }
  std::vector<float> expected(n);
  exact_allreduce(spec.dtype, p, n, ptr.data(), expected.data());
  BOOST_TEST(first_bit_difference(expected.data(), data.out[3].data(), n) == -1);
  spec.exact_max_count = 332;
  BOOST_TEST_REQUIRE(allreduce(spec, p, n, data.in_ptr.data(), data.out_ptr.data(), nullptr, nullptr, &report).ok());
  BOOST_TEST(!report.exact_path);
}

// The order of the exact path's sum, with values written out: fp32 inputs 1, 1e8 and -1e8 on ranks
// 0, 1 and 2 sum to 0 in rank order ((1 + 1e8) rounds to 1e8) and to 1 in any order that adds the
// two large ones first, so this case fails if the order changes (bf16 inputs could not tell).
BOOST_AUTO_TEST_CASE(exact_path_order_is_rank_order) {
  const int p = 3;
  const std::size_t n = 4;
  AllReduceSpec spec;
  spec.dtype = DType::kFloat32;
  spec.exact_max_count = n;
  spec.compensator.mode = CompensatorMode::kOff;
  const std::vector<float> in[p] = {{1.0f, 1.0f, -1.0f, 3.0f}, {1e8f, -1e8f, 1e8f, 1e8f}, {-1e8f, 1e8f, -1e8f, -1e8f}};
  const float expected[n] = {0.0f, 0.0f, 0.0f, 0.0f};
  std::vector<float> out[p] = {std::vector<float>(n), std::vector<float>(n), std::vector<float>(n)};
  const float* ip[p] = {in[0].data(), in[1].data(), in[2].data()};
  float* op[p] = {out[0].data(), out[1].data(), out[2].data()};
  AllReduceReport report;
  BOOST_TEST_REQUIRE(allreduce(spec, p, n, ip, op, nullptr, nullptr, &report).ok());
  BOOST_TEST(report.exact_path);
  for (int r = 0; r < p; ++r) {
    for (std::size_t i = 0; i < n; ++i) BOOST_TEST(out[r][i] == expected[i], "rank " << r << ", element " << i);
  }
}

// With the compensator, the exact path sums x' rounded to the dtype in forward bf16 calls and x'
// itself in fp16 and backward ones (docs/numerics.md 4). The second call of each pair applies the
// first one's residuals, so its x' are no dtype values and the two policies differ.
BOOST_AUTO_TEST_CASE(compensated_exact_path_sums_the_documented_terms) {
  const int p = 3;
  const std::size_t n = 1000;
  struct Shape {
    DType dtype;
    Direction direction;
    bool rounds;
  };
  for (const Shape& shape : {Shape{DType::kBFloat16, Direction::kForward, true},
                             Shape{DType::kFloat16, Direction::kForward, false},
                             Shape{DType::kBFloat16, Direction::kBackward, false}}) {
    AllReduceSpec spec;
    spec.dtype = shape.dtype;
    spec.direction = shape.direction;
    spec.exact_max_count = n;
    spec.compensator.mode = CompensatorMode::kDual;
    spec.compensator.residual = ResidualMode::kLocal;
    BOOST_TEST(exact_path_rounds_x_prime(spec) == shape.rounds);
    std::vector<CompensatorState> states(p);
    Ranks data(p, n, 77u, 2.0f, 0.05f);
    AllReduceReport report;
    for (int call = 0; call < 2; ++call) {
      BOOST_TEST_REQUIRE(allreduce(spec, p, n, data.in_ptr.data(), data.out_ptr.data(), states.data(),
                                   data.xp_ptr.data(), &report)
                             .ok());
    }
    BOOST_TEST_REQUIRE(report.exact_path);
    // The terms: x' (scaled by 2^k backward), rounded to the dtype where the policy says so.
    std::vector<std::vector<float>> terms(data.xp);
    std::size_t inexact = 0;
    for (auto& t : terms) {
      for (float& v : t) {
        if (shape.rounds) {
          const float r = round_to_dtype(v, spec.dtype);
          inexact += r != v;
          v = r;
        } else if (report.scale_exponent != 0) {
          v = std::ldexp(v, report.scale_exponent);
        }
      }
    }
    if (shape.rounds) BOOST_TEST(inexact > 0u);  // the rounding did something to check
    std::vector<const float*> ptr(p);
    for (int r = 0; r < p; ++r) ptr[r] = terms[r].data();
    std::vector<float> expected(n);
    exact_allreduce(DType::kFloat32, p, n, ptr.data(), expected.data());
    for (float& v : expected) {
      if (report.scale_exponent != 0) v = std::ldexp(v, -report.scale_exponent);
      v = round_to_dtype(v, spec.dtype);
    }
    BOOST_TEST(first_bit_difference(expected.data(), data.out[1].data(), n) == -1,
               dtype_name(spec.dtype) << " " << direction_name(spec.direction));
  }
}

BOOST_AUTO_TEST_CASE(bad_arguments_are_reported_not_fatal) {
  Ranks data(2, 10, 1u);
  AllReduceSpec spec;
  std::vector<CompensatorState> states(9);
  BOOST_TEST(allreduce(spec, 0, 10, data.in_ptr.data(), data.out_ptr.data(), states.data(), nullptr, nullptr).code() == StatusCode::kInvalidArgument);
  BOOST_TEST(allreduce(spec, 9, 10, data.in_ptr.data(), data.out_ptr.data(), states.data(), nullptr, nullptr).code() == StatusCode::kInvalidArgument);
  BOOST_TEST(allreduce(spec, 2, 0, data.in_ptr.data(), data.out_ptr.data(), states.data(), nullptr, nullptr).code() == StatusCode::kInvalidArgument);
  BOOST_TEST(allreduce(spec, 2, 10, data.in_ptr.data(), data.out_ptr.data(), nullptr, nullptr, nullptr).code() == StatusCode::kInvalidArgument);
  states[0].m1.assign(11, 0.0f);
  const Status mismatch = allreduce(spec, 2, 10, data.in_ptr.data(), data.out_ptr.data(), states.data(), nullptr, nullptr);
  BOOST_TEST(mismatch.message().find("rank 0") != std::string::npos);
  AllReduceSpec ring;
  ring.algorithm = Algorithm::kRing;
  ring.compensator.residual = ResidualMode::kLocal;
  BOOST_TEST(!ring.validate(4).ok());
}

BOOST_AUTO_TEST_SUITE_END()
