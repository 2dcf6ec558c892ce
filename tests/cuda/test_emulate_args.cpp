// Argument checks of the one-GPU emulation (echo/cuda/emulate.h): bad arguments are refused with
// a message naming what is wrong before any CUDA call, so these run without a GPU (the addresses
// are never touched); and the state's size follows the compensator.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <limits>
#include <string>

#include "echo/allreduce.h"
#include "echo/cuda/emulate.h"

using namespace echo;

namespace {

void* at(std::uintptr_t a) { return reinterpret_cast<void*>(a); }

// Arguments that pass every check made without a device: distinct, aligned (fake) addresses.
cuda::EmulateArguments fake_arguments(int ranks, std::size_t count) {
  cuda::EmulateArguments a;
  a.ranks = ranks;
  a.count = count;
  a.parts = at(0x10000000);
  a.out = at(0x20000000);
  a.workspace = at(0x30000000);
  return a;
}

}  // namespace

BOOST_AUTO_TEST_CASE(arguments_are_checked) {
  cuda::EmulateArguments good = fake_arguments(4, 1000);
  good.spec.compensator.mode = CompensatorMode::kOff;
  auto refused = [](const cuda::EmulateArguments& a, StatusCode code, const std::string& words) {
    const Status s = cuda::emulate_allreduce(a, nullptr);
    BOOST_CHECK_MESSAGE(!s.ok() && s.code() == code && s.message().find(words) != std::string::npos,
                        "expected '" << words << "', got: " << s.message());
  };
  cuda::EmulateArguments a = good;
  a.ranks = 0;
  refused(a, StatusCode::kInvalidArgument, "ranks must be in [1, 8]");
  a.ranks = 9;
  refused(a, StatusCode::kInvalidArgument, "ranks must be in [1, 8]");
  a = good;
  a.count = 0;
  refused(a, StatusCode::kInvalidArgument, "count must be >= 1");
  a = good;
  a.spec.quant.bits = 9;
  refused(a, StatusCode::kInvalidArgument, "bits must be in [2, 8]");
  a = good;
  a.spec.quant.group = 100;
  refused(a, StatusCode::kInvalidArgument, "group size");
  a = good;
  a.spec.algorithm = Algorithm::kRing;
  refused(a, StatusCode::kUnsupported, "owner algorithm only");
  a = good;
  a.parts = nullptr;
  refused(a, StatusCode::kInvalidArgument, "parts is null");
  a = good;
  a.out = nullptr;
  refused(a, StatusCode::kInvalidArgument, "out is null");
  a = good;
  a.workspace = nullptr;
  refused(a, StatusCode::kInvalidArgument, "workspace is null");
  a = good;
  a.out = at(0x20000001);
  refused(a, StatusCode::kInvalidArgument, "out is not aligned");
  a = good;
  a.out = at(0x10000000 + 2 * 500);  // inside rank 0's row
  refused(a, StatusCode::kInvalidArgument, "parts and out overlap");
  a = good;
  a.compensated = static_cast<float*>(at(0x10000000 + 2 * 3000));
  refused(a, StatusCode::kInvalidArgument, "parts and compensated overlap");
  a = good;
  a.spec.compensator.mode = CompensatorMode::kDual;
  refused(a, StatusCode::kInvalidArgument, "needs a state");
  a.state = at(0x40000000);
  a.state_bytes = cuda::emulate_state_bytes(a.spec, a.ranks, a.count) - 1;
  refused(a, StatusCode::kInvalidArgument, "state holds");
  a = good;
  a.spec.compensator.eta = 2.0f;
  a.spec.compensator.mode = CompensatorMode::kSingle;
  refused(a, StatusCode::kInvalidArgument, "eta must be in [0, 1]");
  // Wide groups and the Hadamard rotation are served (the next check, count, is what refuses
  // here); outliers sent exactly are refused as unsupported.
  a = good;
  a.spec.quant.overflow = OverflowGroups::kWide;
  a.spec.quant.rotation = Rotation::kHadamard;
  a.count = 0;
  refused(a, StatusCode::kInvalidArgument, "count must be >= 1");
  a.spec.quant.outliers = 1;
  refused(a, StatusCode::kUnsupported, "outliers sent exactly are CPU reference only");
  a.spec.quant.outliers = 3;  // invalid, not merely unsupported
  refused(a, StatusCode::kInvalidArgument, "outliers");
  // Stream units are served with their profile and clip, which units 'site' refuse as invalid.
  a = good;
  a.spec.compensator.units = CompensatorUnits::kSite;
  a.spec.compensator.profile = CompensatorProfile::kSqrt;
  refused(a, StatusCode::kInvalidArgument, "units 'stream' only");
  a.spec.compensator.profile = CompensatorProfile::kFlat;
  a.spec.compensator.clip = 1.0f;
  refused(a, StatusCode::kInvalidArgument, "units 'stream' only");
  // The state's size follows the compensator: none off, m1 alone single, m1 and m2 dual; bf16
  // averages take half.
  AllReduceSpec s;
  s.compensator.mode = CompensatorMode::kOff;
  BOOST_CHECK_EQUAL(cuda::emulate_state_bytes(s, 4, 1000), 0u);
  s.compensator.mode = CompensatorMode::kSingle;
  const std::size_t single = cuda::emulate_state_bytes(s, 4, 1000);
  s.compensator.mode = CompensatorMode::kDual;
  const std::size_t dual = cuda::emulate_state_bytes(s, 4, 1000);
  s.compensator.state_dtype = DType::kBFloat16;
  const std::size_t dual_bf16 = cuda::emulate_state_bytes(s, 4, 1000);
  BOOST_CHECK_GE(single, 4u * 1000 * 4);
  BOOST_CHECK_EQUAL(dual - single, single - 256);
  BOOST_CHECK_EQUAL(dual - 256, 2 * (dual_bf16 - 256));
}

// Compensator units 'stream' (docs/numerics.md 6.1): a forward call checks its site (whole rows, a
// usable weight RMS) and, at a post-norm, its gains scratch; backward calls and sites without a
// post-norm need none.
BOOST_AUTO_TEST_CASE(stream_units_check_their_site_and_gains) {
  cuda::EmulateArguments good = fake_arguments(4, 1280);
  good.state = at(0x40000000);
  good.spec.compensator.mode = CompensatorMode::kDual;
  good.spec.compensator.units = CompensatorUnits::kStream;
  good.state_bytes = cuda::emulate_state_bytes(good.spec, good.ranks, good.count);
  good.site.has_post_norm = true;
  good.site.row_length = 640;
  good.site.weight_rms = 2.0f;
  BOOST_CHECK_EQUAL(cuda::emulate_gains_bytes(good.spec, 4, 1280, good.site), 8u * 4 * 2);
  good.gains = at(0x50000000);
  good.gains_bytes = 64;
  auto refused = [](const cuda::EmulateArguments& a, const std::string& words) {
    const Status s = cuda::emulate_allreduce(a, nullptr);
    BOOST_CHECK_MESSAGE(!s.ok() && s.code() == StatusCode::kInvalidArgument && s.message().find(words) != std::string::npos,
                        "expected '" << words << "', got: " << s.message());
  };
  cuda::EmulateArguments a = good;
  a.site.row_length = 600;
  refused(a, "does not divide the message's 1280 elements");
  a = good;
  a.site.weight_rms = 0.0f;
  refused(a, "weight RMS must be finite and > 0");
  a = good;
  a.gains = nullptr;
  refused(a, "need gains (emulate_gains_bytes: 64 bytes");
  a = good;
  a.gains_bytes = 63;
  refused(a, "gains holds 63 bytes, the call needs 64");
  a = good;
  a.gains = at(0x50000004);
  refused(a, "gains is not 8-byte aligned");
  a = good;
  a.gains = at(0x40000000 + 256);
  refused(a, "state and gains overlap");
  // Numerics 6.1 steps 6 and 7: a clip adds a bound per rank and row, profile 'sqrt' a factor per
  // feature and needs the norm's weights on the device (a host copy, where given, is checked too).
  a = good;
  a.spec.compensator.clip = 1.0f;
  BOOST_CHECK_EQUAL(cuda::emulate_gains_bytes(a.spec, 4, 1280, a.site), 64u + 4u * 4 * 2);
  a.gains_bytes = 64;
  refused(a, "gains holds 64 bytes, the call needs 96");
  a.spec.compensator.profile = CompensatorProfile::kSqrt;
  BOOST_CHECK_EQUAL(cuda::emulate_gains_bytes(a.spec, 4, 1280, a.site), 96u + 4u * 640);
  a.gains_bytes = 96 + 4 * 640;
  refused(a, "needs the norm's weights on the device (EmulateArguments::weights, 640 fp32)");
  a.weights = static_cast<const float*>(at(0x60000002));
  refused(a, "weights is not 4-byte aligned");
  a.weights = static_cast<const float*>(at(0x50000000 + 64));
  refused(a, "gains and weights overlap");
  a.site.weights.assign(640, 1.0f);
  a.site.weights[17] = std::numeric_limits<float>::infinity();
  refused(a, "weight 17");
  // No gains where the units do not apply: backward calls, a site without a post-norm, the
  // compensator off, the paper's units.
  AllReduceSpec s = good.spec;
  s.direction = Direction::kBackward;
  BOOST_CHECK_EQUAL(cuda::emulate_gains_bytes(s, 4, 1280, good.site), 0u);
  s = good.spec;
  BOOST_CHECK_EQUAL(cuda::emulate_gains_bytes(s, 4, 1280, SiteInfo{}), 0u);
  s.compensator.mode = CompensatorMode::kOff;
  BOOST_CHECK_EQUAL(cuda::emulate_gains_bytes(s, 4, 1280, good.site), 0u);
  s = good.spec;
  s.compensator.units = CompensatorUnits::kSite;
  BOOST_CHECK_EQUAL(cuda::emulate_gains_bytes(s, 4, 1280, good.site), 0u);
}

// Compensator 'deficit' (docs/numerics.md 6.2): its state is m1 alone, as single's; at a post-norm
// site its gains scratch adds the floored weights wf_j (one per feature) to gains 'sum''s, and it
// needs the norm's weights on the device (a host copy, where given, is checked too).
BOOST_AUTO_TEST_CASE(deficit_checks_its_weights_and_scratch) {
  cuda::EmulateArguments good = fake_arguments(4, 1280);
  good.state = at(0x40000000);
  good.spec.compensator.mode = CompensatorMode::kDeficit;
  good.spec.compensator.units = CompensatorUnits::kStream;
  good.spec.compensator.residual = ResidualMode::kLocal;
  good.spec.compensator.gains = CompensatorGains::kSum;
  good.state_bytes = cuda::emulate_state_bytes(good.spec, good.ranks, good.count);
  good.site.has_post_norm = true;
  good.site.row_length = 640;
  good.site.weight_rms = 2.0f;
  good.site.kind = SiteKind::kMlp;
  AllReduceSpec single = good.spec;
  single.compensator.mode = CompensatorMode::kSingle;
  BOOST_CHECK_EQUAL(good.state_bytes, cuda::emulate_state_bytes(single, 4, 1280));
  const std::size_t gains = cuda::emulate_gains_bytes(good.spec, 4, 1280, good.site);
  BOOST_CHECK_EQUAL(gains, cuda::emulate_gains_bytes(single, 4, 1280, good.site) + 4u * 640);
  good.gains = at(0x50000000);
  good.gains_bytes = gains;
  good.ratios = at(0x70000000);
  good.ratios_bytes = cuda::emulate_ratios_bytes(good.spec, 4, 1280, good.site);
  BOOST_CHECK_EQUAL(good.ratios_bytes, 4u * 2 * 4 * 2);
  auto refused = [](const cuda::EmulateArguments& a, StatusCode code, const std::string& words) {
    const Status s = cuda::emulate_allreduce(a, nullptr);
    BOOST_CHECK_MESSAGE(!s.ok() && s.code() == code && s.message().find(words) != std::string::npos,
                        "expected '" << words << "', got: " << s.message());
  };
  cuda::EmulateArguments a = good;
  refused(a, StatusCode::kInvalidArgument,
          "compensator 'deficit' at a site with a post-norm needs the norm's weights on the device "
          "(EmulateArguments::weights, 640 fp32)");
  a.weights = static_cast<const float*>(at(0x60000002));
  refused(a, StatusCode::kInvalidArgument, "weights is not 4-byte aligned");
  a.weights = static_cast<const float*>(at(0x50000000 + 64));
  refused(a, StatusCode::kInvalidArgument, "gains and weights overlap");
  a.site.weights.assign(320, 1.0f);
  refused(a, StatusCode::kInvalidArgument, "compensator 'deficit' needs the site's 640 post-norm weights");
  a.site.weights.assign(640, 1.0f);
  a.site.weights[17] = std::numeric_limits<float>::infinity();
  refused(a, StatusCode::kInvalidArgument, "weight 17");
  a = good;
  a.weights = static_cast<const float*>(at(0x60000000));
  a.gains_bytes = gains - 1;
  refused(a, StatusCode::kInvalidArgument, "the call needs " + std::to_string(gains));
  // Only in the settings it runs with.
  a = good;
  a.spec.compensator.profile = CompensatorProfile::kSqrt;
  refused(a, StatusCode::kInvalidArgument, "compensator 'deficit' runs with units 'stream'");
  // A site without a post-norm and backward calls need no scratch and no weights.
  BOOST_CHECK_EQUAL(cuda::emulate_gains_bytes(good.spec, 4, 1280, SiteInfo{}), 0u);
  AllReduceSpec backward = good.spec;
  backward.direction = Direction::kBackward;
  BOOST_CHECK_EQUAL(cuda::emulate_gains_bytes(backward, 4, 1280, good.site), 0u);
  BOOST_CHECK_EQUAL(cuda::emulate_ratios_bytes(backward, 4, 1280, good.site), 0u);
}
