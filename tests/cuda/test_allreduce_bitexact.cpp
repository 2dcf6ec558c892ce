// The CUDA all-reduce against the CPU reference, bit for bit (docs/numerics.md): every quantizer,
// bit width, compensator mode and residual mode, dtype and rank count, at awkward sizes, over
// several passes of several sites (the compensator state carries across sites). Ranks share the
// GPUs present round-robin, so this also runs on one GPU.
#include <boost/test/unit_test.hpp>

#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "device_group.h"
#include "echo/allreduce.h"
#include "echo/cuda/communicator.h"
#include "echo/cuda/host_group.h"
#include "test_data.h"
#include "work_queues_fixture.h"

namespace {

using namespace echo;

struct Case {
  QuantizerKind kind;
  int bits;
  CompensatorMode mode;
  ResidualMode residual;
  DType dtype;
  int ranks;
  Direction direction = Direction::kForward;
  std::size_t exact_max_count = 0;
  bool specials = false;  // NaN, +-Inf and values past the fp16 scale range in a few groups
  std::size_t exact_capacity = 0;  // elements per exact-path round; 0: the library default
  DType state_dtype = DType::kFloat32;  // compensator averages
  std::size_t split_tail_min_count = cuda::kDefaultSplitTailMinCount;  // CommOptions::split_tail_min_count
  OverflowGroups overflow = OverflowGroups::kPoison;  // QuantSpec::overflow (docs/numerics.md 2.4)
  bool wide_values = false;  // test::make_wide_input: magnitudes to 1e37 and the fp16 scale boundary
  Rotation rotation = Rotation::kNone;  // QuantSpec::rotation (docs/numerics.md 2.6)
  int group = 128;                      // QuantSpec::group
};

// The largest finite value of a dtype.
double dtype_max(DType d) {
  return d == DType::kFloat16 ? 65504.0 : d == DType::kBFloat16 ? 3.3895313892515355e38 : 3.4028234663852886e38;
}

// Finite in, finite out (docs/numerics.md 2.4): with wide groups every output whose exact sum of
// inputs is within half the dtype's range (room for the quantization error and the compensator's
// corrections) is finite, and every rank holds the same bits. Returns the groups holding an element
// whose exact sum is past that limit: the only groups the call may poison.
std::size_t check_finite_and_rank_identical(const std::vector<std::vector<float>>& in,
                                            const std::vector<std::vector<float>>& out, DType dtype, int group,
                                            const std::string& what) {
  const double limit = 0.5 * dtype_max(dtype);
  std::size_t overflowing_groups = 0;
  std::size_t last_group = std::numeric_limits<std::size_t>::max();
  for (std::size_t i = 0; i < out[0].size(); ++i) {
    double sum = 0.0;
    for (const auto& x : in) sum += x[i];
    if (std::fabs(sum) <= limit) {
      BOOST_REQUIRE_MESSAGE(std::isfinite(out[0][i]), what + ": output " + std::to_string(i) + " is " +
                                                          std::to_string(out[0][i]) + " for the finite sum " +
                                                          std::to_string(sum));
    } else if (i / group != last_group) {
      last_group = i / group;
      ++overflowing_groups;
    }
  }
  for (std::size_t r = 1; r < out.size(); ++r) {
    BOOST_REQUIRE_MESSAGE(std::memcmp(out[r].data(), out[0].data(), out[0].size() * 4) == 0,
                          what + ": rank " + std::to_string(r) + " differs from rank 0");
  }
  return overflowing_groups;
}

// A switch-over well inside the default exact-path round, so the sweeps stay quick; the library's
// own default is checked at its boundary separately.
constexpr std::size_t kTestExactMax = 131072;

std::string describe(const Case& c, std::size_t n, int pass, int site) {
  return std::string(quantizer_name(c.kind)) + " b" + std::to_string(c.bits) + " " +
         compensator_mode_name(c.mode) + "/" + residual_mode_name(c.residual) + " " + dtype_name(c.dtype) +
         " P" + std::to_string(c.ranks) + " " + direction_name(c.direction) +
         (c.overflow == OverflowGroups::kWide ? " wide" : "") + (c.wide_values ? " (wide values)" : "") +
         (c.rotation == Rotation::kHadamard ? " hadamard" : "") + " g" + std::to_string(c.group) + " exact<=" +
         std::to_string(c.exact_max_count) + (c.split_tail_min_count == 0 ? " split" : "") +
         " n=" + std::to_string(n) + " pass " + std::to_string(pass) +
         " site " + std::to_string(site);
}

bool bits_equal(const std::vector<float>& a, const std::vector<float>& b, std::size_t* first) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    std::uint32_t x, y;
    std::memcpy(&x, &a[i], 4);
    std::memcpy(&y, &b[i], 4);
    if (x != y) {
      *first = i;
      return false;
    }
  }
  return true;
}

// Runs passes x sites on the GPU group and the reference; every output and x' must match bitwise.
void check_case(const Case& c, const std::vector<std::size_t>& sizes, int passes, int sites) {
  AllReduceSpec spec;
  spec.quant.kind = c.kind;
  spec.quant.bits = c.bits;
  spec.dtype = c.dtype;
  spec.direction = c.direction;
  spec.exact_max_count = c.exact_max_count;
  spec.compensator.mode = c.mode;
  spec.compensator.residual = c.residual;
  spec.compensator.state_dtype = c.state_dtype;
  spec.quant.overflow = c.overflow;
  spec.quant.rotation = c.rotation;
  spec.quant.group = c.group;
  std::unique_ptr<cuda::HostGroup> group;
  const Status created = cuda::HostGroup::create(c.ranks, spec, &group, c.exact_capacity, c.split_tail_min_count);
  BOOST_REQUIRE_MESSAGE(created.ok(), created.message());
  for (std::size_t n : sizes) {
    std::vector<CompensatorState> states(c.ranks);
    for (int pass = 0; pass < passes; ++pass) {
      group->reset_compensator();
      for (auto& s : states) s.reset();
      for (int site = 0; site < sites; ++site) {
        std::vector<std::vector<float>> in(c.ranks), out_gpu(c.ranks, std::vector<float>(n, -7.0f)),
            out_ref(c.ranks, std::vector<float>(n)), xp_gpu(c.ranks, std::vector<float>(n)),
            xp_ref(c.ranks, std::vector<float>(n));
        std::vector<const float*> ip(c.ranks);
        std::vector<float*> og(c.ranks), orf(c.ranks), xg(c.ranks), xr(c.ranks);
        for (int r = 0; r < c.ranks; ++r) {
          const std::uint64_t seed = 1000003ull * n + 7919ull * pass + 101ull * site + r;
          in[r] = c.wide_values ? test::make_wide_input(seed, n, c.dtype, spec.quant.group, r)
                                : test::make_input(seed, n, c.dtype, spec.quant.group);
          if (c.specials) {
            // Poison a few groups on some ranks: the reduced group must be NaN on every rank and
            // counted once. NaNs of both signs with payloads: every NaN written is canonical.
            const float quiet = std::numeric_limits<float>::quiet_NaN();
            const float payload = -std::nanf("0x5a5");  // negative, with a payload
            const float inf = std::numeric_limits<float>::infinity();
            const float big = c.dtype == DType::kFloat32 ? 3.0e38f : round_to_dtype(60000.0f, c.dtype);
            for (std::size_t i = r; i < n; i += 997) {
              const int which = static_cast<int>((i / 997 + site) % 4);
              const float nan = (i / 997 / 4) % 2 ? payload : quiet;
              in[r][i] = which == 0 ? nan : which == 1 ? inf : which == 2 ? -inf : (r % 2 ? big : -big);
            }
          }
          ip[r] = in[r].data();
          og[r] = out_gpu[r].data();
          orf[r] = out_ref[r].data();
          xg[r] = xp_gpu[r].data();
          xr[r] = xp_ref[r].data();
        }
        AllReduceReport rep_ref, rep_gpu;
        const Status sr = echo::allreduce(spec, c.ranks, n, ip.data(), orf.data(),
                                          c.mode == CompensatorMode::kOff ? nullptr : states.data(),
                                          xr.data(), &rep_ref);
        BOOST_REQUIRE_MESSAGE(sr.ok(), sr.message());
        const Status sg = group->allreduce(n, ip.data(), og.data(), xg.data(), &rep_gpu);
        BOOST_REQUIRE_MESSAGE(sg.ok(), describe(c, n, pass, site) + ": " + sg.message());
        for (int r = 0; r < c.ranks; ++r) {
          std::size_t at = 0;
          BOOST_REQUIRE_MESSAGE(bits_equal(out_gpu[r], out_ref[r], &at),
                                describe(c, n, pass, site) + ": output of rank " + std::to_string(r) +
                                    " differs at " + std::to_string(at) + ": gpu " +
                                    std::to_string(out_gpu[r][at]) + " ref " + std::to_string(out_ref[r][at]) +
                                    " (input " + std::to_string(in[r][at]) + ")");
          BOOST_REQUIRE_MESSAGE(bits_equal(xp_gpu[r], xp_ref[r], &at),
                                describe(c, n, pass, site) + ": x' of rank " + std::to_string(r) +
                                    " differs at " + std::to_string(at));
        }
        for (int r = 0; r < c.ranks; ++r) {
          BOOST_REQUIRE_MESSAGE(test::nans_are_canonical(out_gpu[r]) && test::nans_are_canonical(xp_gpu[r]),
                                describe(c, n, pass, site) + ": a NaN of rank " + std::to_string(r) +
                                    " is not the canonical one");
        }
        // (A rotation's butterflies may overflow near FLT_MAX / g: no finiteness promise there.)
        if (c.wide_values && !c.specials && c.rotation == Rotation::kNone) {
          const std::size_t overflowing =
              check_finite_and_rank_identical(in, out_gpu, c.dtype, c.group, describe(c, n, pass, site));
          BOOST_CHECK_LE(rep_gpu.poisoned_groups, overflowing);
        }
        BOOST_CHECK_EQUAL(rep_gpu.poisoned_groups, rep_ref.poisoned_groups);
        BOOST_CHECK_EQUAL(rep_gpu.exact_path, rep_ref.exact_path);
        BOOST_CHECK_EQUAL(rep_gpu.scale_exponent, rep_ref.scale_exponent);
        // An output of zeros everywhere would hide unwritten memory (poisoned groups are NaN).
        double norm = 0;
        for (float v : out_gpu[0]) norm += std::isfinite(v) ? std::fabs(v) : 1.0;
        BOOST_CHECK_GT(norm, 0.0);
      }
    }
  }
}

bool have_gpu() { return test::gpu_present(); }

const std::vector<std::size_t> kAwkward = {1, 127, 1000, 12345, 65537, 300001};

}  // namespace

BOOST_AUTO_TEST_CASE(quantizers_bits_dtypes_ranks_uncompensated) {
  if (!have_gpu()) return;
  for (QuantizerKind kind : {QuantizerKind::kZeroAware, QuantizerKind::kNaive, QuantizerKind::kSymmetric}) {
    for (int bits : {4, 8}) {
      for (DType dt : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
        for (int p : {2, 3, 4}) {
          check_case({kind, bits, CompensatorMode::kOff, ResidualMode::kGlobal, dt, p}, kAwkward, 1, 2);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(compensated_single_and_dual_both_residual_modes) {
  if (!have_gpu()) return;
  for (CompensatorMode mode : {CompensatorMode::kSingle, CompensatorMode::kDual}) {
    for (ResidualMode res : {ResidualMode::kGlobal, ResidualMode::kLocal}) {
      for (QuantizerKind kind : {QuantizerKind::kZeroAware, QuantizerKind::kNaive, QuantizerKind::kSymmetric}) {
        for (int bits : {4, 8}) {
          for (DType dt : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
            for (int p : {2, 3, 4}) {
              check_case({kind, bits, mode, res, dt, p}, {1000, 65537}, 2, 4);
            }
          }
        }
      }
    }
  }
}

// The split form of the local residual's kernels (push + reduce, then the tail in a kernel of its
// own) at every size: both compensators, bit widths, dtypes and state types, a zero-aware and a
// symmetric quantizer, P = 2 (one peer's copy at a time), 3, 4 (one batch of four) and 5 (two
// batches, the second partial), forward and backward.
BOOST_AUTO_TEST_CASE(split_tail_kernels) {
  if (!have_gpu()) return;
  for (CompensatorMode mode : {CompensatorMode::kSingle, CompensatorMode::kDual}) {
    for (int bits : {4, 8}) {
      for (DType dt : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
        for (int p : {2, 3, 4, 5}) {
          for (DType state : {DType::kFloat32, DType::kBFloat16}) {
            const QuantizerKind kind = p % 2 == 0 ? QuantizerKind::kZeroAware : QuantizerKind::kSymmetric;
            Case c{kind, bits, mode, ResidualMode::kLocal, dt, p};
            c.state_dtype = state;
            c.split_tail_min_count = 0;
            check_case(c, {1000, 65537}, 2, 3);
          }
        }
      }
    }
  }
  Case backward{QuantizerKind::kZeroAware, 4, CompensatorMode::kDual, ResidualMode::kLocal, DType::kBFloat16, 4,
                Direction::kBackward};
  backward.split_tail_min_count = 0;
  check_case(backward, {12345, 100003}, 2, 3);
}

// Five to eight ranks, up to the most the library takes (kMaxRanks), on whatever GPUs are present
// (ranks share them): flags, tiles and workspace layouts past P = 4, on the quantized and the exact
// path, compensated or not, forward and backward, and the library's exact-path default for that P.
BOOST_AUTO_TEST_CASE(five_to_eight_ranks_sharing_gpus) {
  if (!have_gpu()) return;
  for (int p : {5, 8}) {
    check_case({QuantizerKind::kZeroAware, 4, CompensatorMode::kOff, ResidualMode::kGlobal, DType::kBFloat16, p},
               {1, 1000, 65537, 300001}, 1, 2);
    for (ResidualMode res : {ResidualMode::kGlobal, ResidualMode::kLocal}) {
      check_case({QuantizerKind::kZeroAware, 4, CompensatorMode::kDual, res, DType::kBFloat16, p}, {12345, 300001},
                 2, 3);
    }
    check_case({QuantizerKind::kSymmetric, 8, CompensatorMode::kSingle, ResidualMode::kGlobal, DType::kFloat16, p,
                Direction::kBackward},
               {12345, 100003}, 2, 3);
    // The deployed switch-over of a compensated call: bf16 terms (forward bf16) and fp32 ones (fp16).
    for (DType d : {DType::kBFloat16, DType::kFloat16}) {
      Case exact{QuantizerKind::kZeroAware, 4, CompensatorMode::kDual, ResidualMode::kLocal, d, p};
      AllReduceSpec deployed;
      deployed.dtype = d;
      deployed.compensator.mode = exact.mode;
      deployed.compensator.residual = exact.residual;
      exact.exact_max_count = cuda::default_exact_max_count(p, deployed);
      check_case(exact, {1000, exact.exact_max_count, exact.exact_max_count + 1}, 1, 2);
    }
  }
}

BOOST_AUTO_TEST_CASE(long_pass_56_sites) {
  if (!have_gpu()) return;
  check_case({QuantizerKind::kZeroAware, 4, CompensatorMode::kDual, ResidualMode::kGlobal, DType::kBFloat16, 4},
             {40961}, 2, 56);
  check_case({QuantizerKind::kZeroAware, 4, CompensatorMode::kDual, ResidualMode::kLocal, DType::kBFloat16, 3},
             {40961}, 2, 56);
}

BOOST_AUTO_TEST_CASE(exact_small_message_path) {
  if (!have_gpu()) return;
  for (DType dt : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
    for (CompensatorMode mode : {CompensatorMode::kOff, CompensatorMode::kDual}) {
      for (ResidualMode res : {ResidualMode::kGlobal, ResidualMode::kLocal}) {
        Case c{QuantizerKind::kZeroAware, 4, mode, res, dt, 4};
        c.exact_max_count = kTestExactMax;
        check_case(c, {1, 1000, 4097, kTestExactMax, kTestExactMax + 1}, 2, 3);
      }
    }
  }
  // The kernel compiled for forward bf16 calls with the dual compensator, the local residual and
  // bf16 state.
  for (int p : {2, 3, 4}) {
    Case c{QuantizerKind::kZeroAware, 4, CompensatorMode::kDual, ResidualMode::kLocal, DType::kBFloat16, p};
    c.state_dtype = DType::kBFloat16;
    c.exact_max_count = kTestExactMax;
    check_case(c, {1, 1000, 4097, kTestExactMax, kTestExactMax + 1}, 2, 3);
  }
  // The library default, on both sides of its boundary.
  for (int p : {2, 4}) {
    Case c{QuantizerKind::kZeroAware, 4, CompensatorMode::kOff, ResidualMode::kGlobal, DType::kBFloat16, p};
    c.exact_max_count = cuda::default_exact_max_count(p);
    check_case(c, {c.exact_max_count, c.exact_max_count + 1}, 1, 1);
  }
}

// Compensator averages stored in bf16 (rounded after every update): the quantized path with both
// residual modes (state updated inside push and reduce, or by the update kernel), the exact path,
// forward and backward, single and dual.
BOOST_AUTO_TEST_CASE(bf16_compensator_state) {
  if (!have_gpu()) return;
  for (DType dt : {DType::kBFloat16, DType::kFloat32}) {
    for (CompensatorMode mode : {CompensatorMode::kSingle, CompensatorMode::kDual}) {
      for (ResidualMode res : {ResidualMode::kGlobal, ResidualMode::kLocal}) {
        for (Direction dir : {Direction::kForward, Direction::kBackward}) {
          Case c{QuantizerKind::kZeroAware, 4, mode, res, dt, 3, dir};
          c.state_dtype = DType::kBFloat16;
          c.exact_max_count = 4096;
          check_case(c, {1000, 4097, 70001}, 2, 3);
        }
      }
    }
  }
}

// Exact messages larger than one round of staging run in several launches.
BOOST_AUTO_TEST_CASE(exact_path_in_several_rounds) {
  if (!have_gpu()) return;
  for (DType dt : {DType::kBFloat16, DType::kFloat32}) {
    for (CompensatorMode mode : {CompensatorMode::kOff, CompensatorMode::kDual}) {
      for (Direction dir : {Direction::kForward, Direction::kBackward}) {
        Case c{QuantizerKind::kZeroAware, 4, mode, ResidualMode::kLocal, dt, 3, dir};
        c.exact_max_count = kTestExactMax;
        c.exact_capacity = 4096;
        check_case(c, {4096, 4097, 3 * 4096 + 5, 50001}, 2, 2);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(backward_scaling) {
  if (!have_gpu()) return;
  for (ResidualMode res : {ResidualMode::kGlobal, ResidualMode::kLocal}) {
    for (std::size_t exact : {std::size_t{0}, kTestExactMax}) {
      Case c{QuantizerKind::kZeroAware, 4, CompensatorMode::kDual, res, DType::kBFloat16, 4, Direction::kBackward};
      c.exact_max_count = exact;
      check_case(c, {1000, 300001}, 2, 3);
    }
  }
}

// Non-finite inputs, with the compensator off and on: poisoned groups, NaN sums in the exact path,
// and NaNs carried into the compensator state and from there into later sites' x'. Every NaN
// written is the canonical one (docs/numerics.md 1), so outputs and x' match bit for bit.
BOOST_AUTO_TEST_CASE(non_finite_inputs_poison_groups) {
  if (!have_gpu()) return;
  struct Comp {
    CompensatorMode mode;
    ResidualMode residual;
    DType state_dtype;
  };
  const Comp comps[] = {{CompensatorMode::kOff, ResidualMode::kGlobal, DType::kFloat32},
                        {CompensatorMode::kDual, ResidualMode::kGlobal, DType::kFloat32},
                        {CompensatorMode::kDual, ResidualMode::kLocal, DType::kFloat32},
                        {CompensatorMode::kSingle, ResidualMode::kLocal, DType::kBFloat16}};
  for (const Comp& cm : comps) {
    for (DType dt : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
      for (int p : {2, 3, 4}) {
        for (std::size_t exact : {std::size_t{0}, kTestExactMax}) {
          for (Direction dir : {Direction::kForward, Direction::kBackward}) {
            if (dir == Direction::kBackward && (p != 3 || cm.mode == CompensatorMode::kOff)) continue;
            Case c{QuantizerKind::kZeroAware, 4, cm.mode, cm.residual, dt, p, dir};
            c.exact_max_count = exact;
            c.specials = true;
            c.state_dtype = cm.state_dtype;
            check_case(c, {5000, 70001}, 1, 3);
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(large_message_many_tiles_and_rounds) {
  if (!have_gpu()) return;
  // 2^23 + 77 elements: thousands of tiles per segment; 8-bit fp32 needs two rounds at the
  // default slot size only for far larger messages, so this checks the tiling, not the rounds.
  check_case({QuantizerKind::kZeroAware, 4, CompensatorMode::kDual, ResidualMode::kLocal, DType::kBFloat16, 4},
             {(std::size_t{1} << 23) + 77}, 1, 2);
  check_case({QuantizerKind::kSymmetric, 8, CompensatorMode::kOff, ResidualMode::kGlobal, DType::kFloat32, 3},
             {(std::size_t{1} << 23) + 77}, 1, 1);
}

// Overflow-groups wide (docs/numerics.md 2.4): groups at and one dtype step past the fp16 scale
// limit (poisoned under poison, a flagged bf16 scale here) and magnitudes up to 1e37, in the
// push (each rank's groups) and the gather (the owner's sums), over P = 2, 4, 8, 4 and 8 bits, the
// compensator off, dual with the global residual and dual with the local one, forward and backward,
// every dtype: bit for bit the reference's outputs, x' and report, every output finite unless the
// sum itself leaves the dtype's range, and the same on every rank.
BOOST_AUTO_TEST_CASE(wide_groups_past_the_fp16_scale_limit) {
  if (!have_gpu()) return;
  struct Comp {
    CompensatorMode mode;
    ResidualMode residual;
  };
  const Comp comps[] = {{CompensatorMode::kOff, ResidualMode::kGlobal},
                        {CompensatorMode::kDual, ResidualMode::kGlobal},
                        {CompensatorMode::kDual, ResidualMode::kLocal}};
  for (int p : {2, 4, 8}) {
    for (int bits : {4, 8}) {
      for (const Comp& cm : comps) {
        for (DType dt : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
          for (Direction dir : {Direction::kForward, Direction::kBackward}) {
            Case c{p % 4 == 0 ? QuantizerKind::kZeroAware : QuantizerKind::kSymmetric, bits, cm.mode, cm.residual, dt, p,
                   dir};
            c.overflow = OverflowGroups::kWide;
            c.wide_values = true;
            check_case(c, {4097, 65537}, 1, 3);
          }
        }
      }
    }
  }
  // The naive quantizer, bf16 state and the split tail kernel once each.
  Case naive{QuantizerKind::kNaive, 4, CompensatorMode::kSingle, ResidualMode::kLocal, DType::kFloat32, 3};
  naive.overflow = OverflowGroups::kWide;
  naive.wide_values = true;
  naive.state_dtype = DType::kBFloat16;
  check_case(naive, {1, 127, 12345, 300001}, 2, 3);
  naive.split_tail_min_count = 0;
  check_case(naive, {12345, 300001}, 1, 3);
}

// Overflow-groups wide changes nothing where no group passes the fp16 scale limit, and non-finite
// values still poison their groups (counted as under poison).
BOOST_AUTO_TEST_CASE(wide_groups_below_the_limit_and_with_non_finite_values) {
  if (!have_gpu()) return;
  for (DType dt : {DType::kBFloat16, DType::kFloat32}) {
    Case plain{QuantizerKind::kZeroAware, 4, CompensatorMode::kDual, ResidualMode::kLocal, dt, 4};
    plain.overflow = OverflowGroups::kWide;
    check_case(plain, kAwkward, 1, 3);
    Case specials{QuantizerKind::kZeroAware, 4, CompensatorMode::kDual, ResidualMode::kGlobal, dt, 3};
    specials.overflow = OverflowGroups::kWide;
    specials.specials = true;
    check_case(specials, {5000, 70001}, 1, 3);
  }
}

// Rotation (docs/numerics.md 2.6): every rank rotates the groups it sends, the owner its own and
// then the sum it gathers; every rank de-rotates; the compensator state stays unrotated (the local
// residual de-rotates the push and the owner sum). Partial last groups are not rotated (awkward
// sizes). P = 2, 3, 4, 8; 4 and 8 bits; compensator off, dual global, dual local, single local with
// bf16 state; forward and backward; every dtype; group sizes from one lane (16) to a whole warp
// (1024, or 256 on 8-element lanes).
BOOST_AUTO_TEST_CASE(hadamard_rotation) {
  if (!have_gpu()) return;
  struct Comp {
    CompensatorMode mode;
    ResidualMode residual;
    DType state;
  };
  const Comp comps[] = {{CompensatorMode::kOff, ResidualMode::kGlobal, DType::kFloat32},
                        {CompensatorMode::kDual, ResidualMode::kGlobal, DType::kFloat32},
                        {CompensatorMode::kDual, ResidualMode::kLocal, DType::kFloat32},
                        {CompensatorMode::kSingle, ResidualMode::kLocal, DType::kBFloat16}};
  for (int p : {2, 3, 4, 8}) {
    for (int bits : {4, 8}) {
      for (const Comp& cm : comps) {
        for (DType dt : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
          for (Direction dir : {Direction::kForward, Direction::kBackward}) {
            if (dir == Direction::kBackward && cm.mode == CompensatorMode::kOff) continue;
            Case c{p % 2 ? QuantizerKind::kSymmetric : QuantizerKind::kZeroAware, bits, cm.mode, cm.residual, dt, p, dir};
            c.state_dtype = cm.state;
            c.rotation = Rotation::kHadamard;
            check_case(c, {1000, 65537}, 1, 3);
          }
        }
      }
    }
  }
  for (int group : {16, 64, 256, 1024}) {
    for (const Comp& cm : comps) {
      Case c{QuantizerKind::kZeroAware, 4, cm.mode, cm.residual, DType::kBFloat16, 3};
      c.state_dtype = cm.state;
      c.rotation = Rotation::kHadamard;
      c.group = group;
      const auto g = static_cast<std::size_t>(group);
      check_case(c, {1, g - 1, 5 * g + 3, 70001}, 2, 3);
    }
  }
  // The split tail kernel, the naive quantizer and many tiles.
  Case split{QuantizerKind::kNaive, 4, CompensatorMode::kDual, ResidualMode::kLocal, DType::kBFloat16, 4};
  split.rotation = Rotation::kHadamard;
  split.split_tail_min_count = 0;
  check_case(split, {12345, (std::size_t{1} << 20) + 77}, 1, 3);
}

// Rotation with non-finite inputs (a NaN or Inf spreads over its whole rotated group, which is
// poisoned) and with wide groups (docs/numerics.md 2.4 and 2.6 together).
BOOST_AUTO_TEST_CASE(hadamard_rotation_with_non_finite_values_and_wide_groups) {
  if (!have_gpu()) return;
  for (DType dt : {DType::kBFloat16, DType::kFloat32}) {
    for (ResidualMode res : {ResidualMode::kGlobal, ResidualMode::kLocal}) {
      Case specials{QuantizerKind::kZeroAware, 4, CompensatorMode::kDual, res, dt, 3};
      specials.rotation = Rotation::kHadamard;
      specials.specials = true;
      check_case(specials, {5000, 70001}, 1, 3);
      for (int p : {2, 4}) {
        Case wide{QuantizerKind::kZeroAware, 4, CompensatorMode::kDual, res, dt, p};
        wide.rotation = Rotation::kHadamard;
        wide.overflow = OverflowGroups::kWide;
        wide.wide_values = true;
        check_case(wide, {4097, 65537}, 2, 3);
      }
    }
  }
}
