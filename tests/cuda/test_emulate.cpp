// The one-GPU emulation (echo/cuda/emulate.h) against the CPU reference, bit for bit: the output,
// x', every rank's compensator state and the report, over several consecutive calls with the state
// carried, across bit widths 2..8, quantizers, group sizes, compensator and residual modes, state
// types, dtypes, P = 1..8, awkward sizes, the exact path at its boundary, backward scaling,
// non-finite inputs and values near the fp16 parameter limit, wide groups and the Hadamard rotation
// (docs/numerics.md 2.4, 2.6), compensator units 'stream' at a post-norm site (6.1, against
// echo::allreduce_at_site) and compensator 'deficit' (6.2); in place, on unaligned rows and replayed
// from a CUDA graph; host memory is refused (the other argument checks need no GPU:
// test_emulate_args.cpp).
#include <boost/test/unit_test.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "device_group.h"
#include "echo/allreduce.h"
#include "echo/cuda/emulate.h"
#include "echo/site.h"
#include "test_data.h"

namespace {

using namespace echo;

struct Case {
  QuantizerKind kind = QuantizerKind::kZeroAware;
  int bits = 4;
  int group = 128;
  CompensatorMode mode = CompensatorMode::kOff;
  ResidualMode residual = ResidualMode::kGlobal;
  DType state_dtype = DType::kFloat32;
  DType dtype = DType::kBFloat16;
  int ranks = 2;
  Direction direction = Direction::kForward;
  std::size_t exact_max_count = 0;
  bool specials = false;      // NaN (with payloads), +-Inf, values near the dtype's and fp16's limits
  float magnitude = 1.0f;     // inputs times this (moves the backward exponent far from 0)
  std::size_t shift = 0;      // parts and out start this many elements into their allocations
  bool in_place = false;      // out is rank 0's row of parts
  bool compensated = true;    // also compare x'
  OverflowGroups overflow = OverflowGroups::kPoison;
  Rotation rotation = Rotation::kNone;
  bool eta_one = false;       // compensator gain 1 instead of the default
  bool wide_values = false;   // groups at and past the fp16 scale limit, magnitudes up to 1e37
  bool stream = false;        // compensator units 'stream' (docs/numerics.md 6.1)
  std::size_t row_length = 0; // the call's site: a post-norm of this width (0: a site without one)
  float weight_scale = 1.0f;  // the post-norm's weights times this (its gain, as Gemma's differ by site)
  float weight_swing = 0.75f; // the weights' sin amplitude (past 1: weights of both signs, near 0)
  bool profile_sqrt = false;  // compensator profile 'sqrt' (numerics 6.1 step 6)
  float clip = 0.0f;          // compensator clip (step 7)
  bool gains_sum = false;     // compensator gains 'sum' (step 8): forward calls at sites of kind
                              // attention, MLP, attention, attention, ... (call % 3 == 1: MLP)
};

// The call's site (c.stream): a post-norm of c.row_length effective weights
// 1 + c.weight_swing sin(0.37 i), times c.weight_scale; none when c.row_length is 0.
SiteInfo site_of(const Case& c) {
  if (c.row_length == 0) return SiteInfo{};
  std::vector<float> w(c.row_length);
  for (std::size_t i = 0; i < w.size(); ++i) {
    w[i] = c.weight_scale * (1.0f + c.weight_swing * std::sin(0.37f * static_cast<float>(i)));
  }
  return post_norm_site(w);
}

AllReduceSpec spec_of(const Case& c) {
  AllReduceSpec s;
  s.quant.kind = c.kind;
  s.quant.bits = c.bits;
  s.quant.group = c.group;
  s.dtype = c.dtype;
  s.direction = c.direction;
  s.exact_max_count = c.exact_max_count;
  s.compensator.mode = c.mode;
  s.compensator.residual = c.residual;
  s.compensator.state_dtype = c.state_dtype;
  if (c.eta_one) s.compensator.eta = 1.0f;
  s.quant.overflow = c.overflow;
  s.quant.rotation = c.rotation;
  if (c.stream) s.compensator.units = CompensatorUnits::kStream;
  if (c.profile_sqrt) s.compensator.profile = CompensatorProfile::kSqrt;
  s.compensator.clip = c.clip;
  if (c.gains_sum) s.compensator.gains = CompensatorGains::kSum;
  return s;
}

std::string describe(const Case& c, std::size_t n, int pass, int call) {
  return std::string(quantizer_name(c.kind)) + " b" + std::to_string(c.bits) + " g" + std::to_string(c.group) + " " +
         compensator_mode_name(c.mode) + "/" + residual_mode_name(c.residual) + "/" + dtype_name(c.state_dtype) + " " +
         dtype_name(c.dtype) + " P" + std::to_string(c.ranks) + " " + direction_name(c.direction) + " exact<=" +
         std::to_string(c.exact_max_count) + (c.specials ? " specials" : "") + (c.in_place ? " in-place" : "") +
         " overflow-groups " + overflow_groups_name(c.overflow) + " rotation " + rotation_name(c.rotation) +
         (c.eta_one ? " eta 1" : "") + (c.wide_values ? " wide values" : "") +
         (c.stream ? " units stream, row " + std::to_string(c.row_length) + " weights x" +
                         std::to_string(c.weight_scale) + (c.profile_sqrt ? " profile sqrt" : "") +
                         (c.clip != 0.0f ? " clip " + std::to_string(c.clip) : "") +
                         (c.gains_sum ? " gains sum" : "") : "") +
         " shift " + std::to_string(c.shift) + " n=" + std::to_string(n) + " pass " + std::to_string(pass) +
         " call " + std::to_string(call);
}

bool bits_equal(const float* a, const float* b, std::size_t n, std::size_t* first) {
  for (std::size_t i = 0; i < n; ++i) {
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

std::string hex(float v) {
  std::uint32_t b;
  std::memcpy(&b, &v, 4);
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", b);
  return buf;
}

// The fp16 scale limit of a group's range at `bits` bits: 65504 * (2^b - 1) (the boundary of
// tests/reference/test_transport_options.cpp, suite wide_groups, at every width).
float fp16_scale_limit_range(int bits) { return 65504.0f * static_cast<float>((1 << bits) - 1); }

// Wide-group inputs (c.wide_values): group m of the message is scaled to magnitudes up to 10^(m mod
// 38) (10^(m mod 35) with the rotation, whose butterflies sum g values: docs/numerics.md 2.6), and
// every 7th group
// holds, at its first element, the range at the fp16 scale limit, the next float above it, or 0.1%
// below or above (rounded to the dtype), beside a 1.
void add_wide_values(const Case& c, std::size_t n, int call, int r, std::vector<float>& x) {
  if (c.dtype == DType::kFloat16) return;  // fp16 holds no value past 65504
  const std::size_t g = static_cast<std::size_t>(c.group);
  const int decades = c.rotation == Rotation::kHadamard ? 35 : 38;
  const float limit = fp16_scale_limit_range(c.bits);
  const float tops[] = {limit, std::nextafter(limit, std::numeric_limits<float>::infinity()), limit * 0.999f,
                        limit * 1.001f};
  for (std::size_t m = 0; m * g < n; ++m) {
    const std::size_t begin = m * g;
    const std::size_t end = std::min(n, begin + g);
    if (m % 7 == 3) {
      for (std::size_t i = begin; i < end; ++i) x[i] = 0.0f;
      x[begin] = round_to_dtype(tops[(m / 7 + static_cast<std::size_t>(call + r)) % 4], c.dtype);
      if (begin + 4 < end) x[begin + 4] = 1.0f;
      continue;
    }
    // The generator's values stay below about 2^14 in magnitude: below 10^e after the scaling.
    const float f = std::pow(10.0f, static_cast<float>(m % static_cast<std::size_t>(decades))) * 0x1p-14f;
    for (std::size_t i = begin; i < end; ++i) x[i] = round_to_dtype(x[i] * f, c.dtype);
  }
}

// Rank r's contribution to one call: the shared generator's groups (every quantizer branch), and
// with specials NaNs (canonical and with a negative payload), +-Inf, values at the dtype's range
// and groups whose fp16 scale lands just below or above 65504 for the bit width.
std::vector<float> make_part(const Case& c, std::size_t n, int pass, int call, int r) {
  std::vector<float> x = test::make_input(1000003ull * n + 7919ull * pass + 101ull * call + 13ull * r +
                                              static_cast<std::uint64_t>(c.bits) * 17 + c.group,
                                          n, c.dtype, c.group);
  for (float& v : x) v = round_to_dtype(v * c.magnitude, c.dtype);
  // One positive value on every rank (the generator may draw an all-zero message when n is
  // small), so the sum, and hence some output element, is non-zero.
  x[n / 2] = round_to_dtype(0.75f * static_cast<float>(r + 1) * c.magnitude, c.dtype);
  if (c.wide_values) add_wide_values(c, n, call, r, x);
  // Stream units: rank 0's first row is zeros on odd calls (rho 0: the row carries nothing).
  if (c.stream && c.row_length != 0 && r == 0 && call % 2 == 1 && n / 2 >= c.row_length) {
    std::fill(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(c.row_length), 0.0f);
  }
  if (!c.specials) return x;
  const float inf = std::numeric_limits<float>::infinity();
  const float quiet = std::numeric_limits<float>::quiet_NaN();
  const float payload = -std::nanf("0x5a5");
  const float big = c.dtype == DType::kFloat32 ? 3.0e38f : c.dtype == DType::kBFloat16 ? 3.0e38f : 60000.0f;
  for (std::size_t i = static_cast<std::size_t>(r) * 7; i < n; i += 997) {
    const int which = static_cast<int>((i / 997 + call + r) % 6);
    const float v = which == 0   ? quiet
                    : which == 1 ? payload
                    : which == 2 ? inf
                    : which == 3 ? -inf
                    : which == 4 ? big
                                 : -big;
    x[i] = round_to_dtype(v, c.dtype);
  }
  // Groups near the fp16 parameter limit: range about 65504 * (2^b - 1), just below or above it
  // (for fp16 data the largest values; sums of several ranks then pass the limit).
  const float levels = static_cast<float>((1 << c.bits) - 1);
  const float factor = (call + r) % 2 ? 0.999f : 1.001f;
  const float half_range = c.dtype == DType::kFloat16 ? 60000.0f : 65504.0f * levels * 0.5f * factor;
  const std::size_t g = static_cast<std::size_t>(c.group);
  for (std::size_t begin = 5 * g; begin < n; begin += 13 * g) {
    for (std::size_t i = begin; i < std::min(n, begin + g); ++i) {
      const float t = static_cast<float>((i * 37 + r) % 101) / 50.0f - 1.0f;  // [-1, 1]
      x[i] = round_to_dtype(half_range * (i == begin ? 1.0f : i == begin + 1 ? -1.0f : t), c.dtype);
    }
  }
  return x;
}

// Device buffers of one case (parts, out, report, the state of each direction, x').
struct Rig {
  int ranks = 0;
  std::size_t n = 0;
  AllReduceSpec spec;
  std::size_t es = 0;
  char* parts_alloc = nullptr;
  char* out_alloc = nullptr;
  void* parts = nullptr;
  void* out = nullptr;
  void* workspace = nullptr;
  void* state[2] = {nullptr, nullptr};  // forward, backward
  std::size_t state_bytes = 0;
  float* compensated = nullptr;
  SiteInfo site;
  void* gains = nullptr;
  std::size_t gains_bytes = 0;
  float* weights = nullptr;  // the site's weights on the device (profile 'sqrt', compensator 'deficit')
  void* ratios = nullptr;    // gains 'sum': the row ratios kept between a pass's calls
  std::size_t ratios_bytes = 0;
  cudaStream_t stream = nullptr;

  Rig(const Case& c, std::size_t count) : ranks(c.ranks), n(count), spec(spec_of(c)), site(site_of(c)) {
    es = dtype_size(spec.dtype);
    TEST_CUDA(cudaStreamCreate(&stream));
    TEST_CUDA(cudaMalloc(&parts_alloc, (static_cast<std::size_t>(ranks) * n + c.shift) * es));
    parts = parts_alloc + c.shift * es;
    if (c.in_place) {
      out = parts;
    } else {
      TEST_CUDA(cudaMalloc(&out_alloc, (n + c.shift) * es));
      out = out_alloc + c.shift * es;
    }
    TEST_CUDA(cudaMalloc(&workspace, cuda::emulate_workspace_bytes()));
    // Both directions share the spec's compensator, so one size fits both states.
    state_bytes = cuda::emulate_state_bytes(spec, ranks, n);
    for (void*& s : state) {
      if (state_bytes != 0) TEST_CUDA(cudaMalloc(&s, state_bytes));
    }
    if (c.compensated) TEST_CUDA(cudaMalloc(&compensated, static_cast<std::size_t>(ranks) * n * 4));
    AllReduceSpec forward = spec;
    forward.direction = Direction::kForward;
    gains_bytes = cuda::emulate_gains_bytes(forward, ranks, n, site);
    if (gains_bytes != 0) TEST_CUDA(cudaMalloc(&gains, gains_bytes));
    SiteInfo kind_known = site;
    kind_known.kind = SiteKind::kAttention;
    ratios_bytes = cuda::emulate_ratios_bytes(forward, ranks, n, kind_known);
    if (ratios_bytes != 0) TEST_CUDA(cudaMalloc(&ratios, ratios_bytes));
    if ((c.profile_sqrt || c.mode == CompensatorMode::kDeficit) && !site.weights.empty()) {
      TEST_CUDA(cudaMalloc(&weights, site.weights.size() * 4));
      TEST_CUDA(cudaMemcpy(weights, site.weights.data(), site.weights.size() * 4, cudaMemcpyHostToDevice));
    }
  }
  ~Rig() {
    cudaFree(parts_alloc);
    cudaFree(out_alloc);
    cudaFree(workspace);
    for (void* s : state) cudaFree(s);
    cudaFree(compensated);
    cudaFree(gains);
    cudaFree(weights);
    cudaFree(ratios);
    cudaStreamDestroy(stream);
  }
  void reset() {
    for (void* s : state) {
      if (s != nullptr) TEST_OK(cuda::emulate_reset_state(s, state_bytes, stream));
    }
  }
  cuda::EmulateArguments arguments(Direction d) const {
    cuda::EmulateArguments a;
    a.spec = spec;
    a.spec.direction = d;
    a.ranks = ranks;
    a.count = n;
    a.parts = parts;
    a.out = out;
    a.state = state[d == Direction::kBackward ? 1 : 0];
    a.state_bytes = state_bytes;
    a.workspace = workspace;
    a.compensated = compensated;
    a.site = site;
    a.gains = gains;
    a.gains_bytes = gains_bytes;
    a.weights = weights;
    a.ratios = ratios;
    a.ratios_bytes = ratios_bytes;
    return a;
  }
  void upload(const std::vector<std::vector<float>>& in) {
    for (int r = 0; r < ranks; ++r) {
      const auto bits = test::to_bits(in[r], spec.dtype);
      TEST_CUDA(cudaMemcpyAsync(static_cast<char*>(parts) + static_cast<std::size_t>(r) * n * es, bits.data(),
                                bits.size(), cudaMemcpyHostToDevice, stream));
      TEST_CUDA(cudaStreamSynchronize(stream));
    }
  }
  // A byte pattern no call writes everywhere, so an element left unwritten differs from the reference.
  void poison_outputs() {
    if (!in_place()) TEST_CUDA(cudaMemsetAsync(out, 0x3C, n * es, stream));
    if (compensated != nullptr) TEST_CUDA(cudaMemsetAsync(compensated, 0x3C, static_cast<std::size_t>(ranks) * n * 4, stream));
  }
  bool in_place() const { return out == parts; }
  std::vector<float> download_out() {
    std::vector<unsigned char> bits(n * es);
    TEST_CUDA(cudaStreamSynchronize(stream));
    TEST_CUDA(cudaMemcpy(bits.data(), out, bits.size(), cudaMemcpyDeviceToHost));
    return test::from_bits(bits, spec.dtype);
  }
  std::vector<float> download_compensated(int r) {
    std::vector<float> x(n);
    TEST_CUDA(cudaStreamSynchronize(stream));
    TEST_CUDA(cudaMemcpy(x.data(), compensated + static_cast<std::size_t>(r) * n, n * 4, cudaMemcpyDeviceToHost));
    return x;
  }
  // Gains 'sum': the row ratios as the emulation keeps them, kind-major, then rank, then row.
  std::vector<float> download_ratios() {
    std::vector<float> v(ratios_bytes / 4);
    TEST_CUDA(cudaStreamSynchronize(stream));
    TEST_CUDA(cudaMemcpy(v.data(), ratios, v.size() * 4, cudaMemcpyDeviceToHost));
    return v;
  }
};

// Finite in, finite out holds for a call whose sums fit its dtype. In units 'stream'
// (docs/numerics.md 6.1) the correction c0 * R grows with a row's RMS ratio between calls, and the
// independent inputs of these tests change a row's RMS by up to about 1000x from call to call, so an
// fp16 sum of x' can pass 65504 and round to Inf, in the reference as in the emulation. The output is
// bounded by sum_r max_i |x'_r[i]| times the dequantization's overshoot of a group's largest value
// (under 2 for every quantizer and scale rounding), hence this headroom.
constexpr double kFiniteSumHeadroom = 0.5;

double dtype_max(DType d) {
  return d == DType::kFloat16 ? 65504.0 : d == DType::kBFloat16 ? 3.3895313892515355e38 : 3.4028234663852886e38;
}

bool sums_fit(const std::vector<std::vector<float>>& x, DType dtype) {
  double bound = 0.0;
  for (const std::vector<float>& row : x) {
    double m = 0.0;
    for (float v : row) m = std::max(m, std::fabs(static_cast<double>(v)));
    bound += m;
  }
  return bound <= kFiniteSumHeadroom * dtype_max(dtype);
}

// One call on the reference and on the emulation; everything they deliver must match bitwise.
void check_call(const Case& c, Rig& rig, Direction d, std::vector<CompensatorState>& states, int pass, int call,
                const std::string& what) {
  const int P = c.ranks;
  const std::size_t n = rig.n;
  AllReduceSpec spec = rig.spec;
  spec.direction = d;
  std::vector<std::vector<float>> in(P), out_ref(P, std::vector<float>(n)), xp_ref(P, std::vector<float>(n));
  std::vector<const float*> ip(P);
  std::vector<float*> op(P), xp(P);
  for (int r = 0; r < P; ++r) {
    in[r] = make_part(c, n, pass, call, r);
    ip[r] = in[r].data();
    op[r] = out_ref[r].data();
    xp[r] = xp_ref[r].data();
  }
  AllReduceReport rep_ref;
  const bool comp = c.mode != CompensatorMode::kOff;
  if (c.gains_sum) rig.site.kind = call % 3 == 1 ? SiteKind::kMlp : SiteKind::kAttention;
  const Status sr = c.stream ? echo::allreduce_at_site(rig.site, spec, P, n, ip.data(), op.data(),
                                                       comp ? states.data() : nullptr, xp.data(), &rep_ref)
                             : echo::allreduce(spec, P, n, ip.data(), op.data(), comp ? states.data() : nullptr,
                                               xp.data(), &rep_ref);
  BOOST_REQUIRE_MESSAGE(sr.ok(), sr.message());

  rig.upload(in);
  rig.poison_outputs();
  const cuda::EmulateArguments args = rig.arguments(d);
  TEST_OK(cuda::emulate_can_implement(args));
  TEST_OK(cuda::emulate_allreduce(args, rig.stream));
  AllReduceReport rep;
  TEST_OK(cuda::emulate_read_report(rig.workspace, rig.stream, &rep));

  const std::vector<float> out = rig.download_out();
  std::size_t at = 0;
  BOOST_REQUIRE_MESSAGE(bits_equal(out.data(), out_ref[0].data(), n, &at),
                        what + ": output differs at " + std::to_string(at) + ": emulation " + hex(out[at]) + " (" +
                            std::to_string(out[at]) + ") reference " + hex(out_ref[0][at]) + " (" +
                            std::to_string(out_ref[0][at]) + ")");
  BOOST_REQUIRE(test::nans_are_canonical(out));
  if (c.overflow == OverflowGroups::kWide && !c.specials && (!c.stream || sums_fit(xp_ref, c.dtype))) {
    // Finite in, finite out (docs/numerics.md 2.4): no input here brings a sum near FLT_MAX (in units
    // 'stream', checked: sums_fit). And the reference delivers the same bits to every rank.
    for (std::size_t i = 0; i < n; ++i) {
      BOOST_REQUIRE_MESSAGE(std::isfinite(out[i]), what + ": output " + std::to_string(i) + " is not finite");
    }
    BOOST_CHECK_MESSAGE(rep_ref.poisoned_groups == 0, what + ": the reference poisoned a finite group");
    for (int r = 1; r < P; ++r) {
      BOOST_REQUIRE_MESSAGE(bits_equal(out_ref[r].data(), out_ref[0].data(), n, &at),
                            what + ": the reference's rank " + std::to_string(r) + " differs from rank 0 at " +
                                std::to_string(at));
    }
  }
  // A call that wrote nothing (or zeros) cannot pass: some output is non-zero.
  std::size_t nonzero = 0;
  for (float v : out) nonzero += v != 0.0f ? 1 : 0;
  BOOST_REQUIRE_MESSAGE(nonzero > 0, what + ": every output element is zero");
  if (rig.compensated != nullptr) {
    for (int r = 0; r < P; ++r) {
      const std::vector<float> x = rig.download_compensated(r);
      BOOST_REQUIRE_MESSAGE(bits_equal(x.data(), xp_ref[r].data(), n, &at),
                            what + ": x' of rank " + std::to_string(r) + " differs at " + std::to_string(at) + ": " +
                                hex(x[at]) + " vs " + hex(xp_ref[r][at]));
    }
  }
  if (comp) {
    const void* state = rig.state[d == Direction::kBackward ? 1 : 0];
    std::vector<float> m1(n), m2(n);
    for (int r = 0; r < P; ++r) {
      TEST_OK(cuda::emulate_download_state(state, spec, P, n, r, m1.data(), m2.data(), rig.stream));
      BOOST_REQUIRE_EQUAL(states[r].m1.size(), n);
      BOOST_REQUIRE_MESSAGE(bits_equal(m1.data(), states[r].m1.data(), n, &at),
                            what + ": m1 of rank " + std::to_string(r) + " differs at " + std::to_string(at) + ": " +
                                hex(m1[at]) + " vs " + hex(states[r].m1[at]));
      if (c.mode == CompensatorMode::kDual) {
        BOOST_REQUIRE_MESSAGE(bits_equal(m2.data(), states[r].m2.data(), n, &at),
                              what + ": m2 of rank " + std::to_string(r) + " differs at " + std::to_string(at) + ": " +
                                  hex(m2[at]) + " vs " + hex(states[r].m2[at]));
      }
    }
  }
  if (comp && c.gains_sum && d == Direction::kForward && rig.ratios != nullptr && rig.site.has_post_norm) {
    // The row ratios of every kind the reference holds (one per rank and row; a kind it does not
    // hold is not read by the next call either).
    const std::vector<float> ratios = rig.download_ratios();
    const std::size_t rows = n / rig.site.row_length;
    for (int r = 0; r < P; ++r) {
      for (int k = 0; k < kSiteKinds; ++k) {
        const std::vector<float>& want = states[r].row_ratios[static_cast<std::size_t>(k)];
        if (want.empty()) continue;
        BOOST_REQUIRE_EQUAL(want.size(), rows);
        const float* got = ratios.data() + (static_cast<std::size_t>(k) * P + static_cast<std::size_t>(r)) * rows;
        BOOST_REQUIRE_MESSAGE(bits_equal(got, want.data(), rows, &at),
                              what + ": row ratio of kind " + std::to_string(k) + ", rank " + std::to_string(r) +
                                  " differs at row " + std::to_string(at) + ": " + hex(got[at]) + " vs " +
                                  hex(want[at]));
      }
    }
  }
  BOOST_CHECK_MESSAGE(rep.poisoned_groups == rep_ref.poisoned_groups,
                      what + ": poisoned groups " + std::to_string(rep.poisoned_groups) + " vs " +
                          std::to_string(rep_ref.poisoned_groups));
  BOOST_CHECK_MESSAGE(rep.scale_exponent == rep_ref.scale_exponent,
                      what + ": scale exponent " + std::to_string(rep.scale_exponent) + " vs " +
                          std::to_string(rep_ref.scale_exponent));
  BOOST_CHECK_MESSAGE(rep.exact_path == rep_ref.exact_path, what + ": exact path flag differs");
}

// `passes` passes of `calls` consecutive calls (the state carried, reset between passes) for every
// size; directions alternate when `alternate` (forward and backward keep separate states).
void check_case(const Case& c, const std::vector<std::size_t>& sizes, int passes, int calls, bool alternate = false) {
  for (std::size_t n : sizes) {
    Rig rig(c, n);
    std::vector<CompensatorState> states[2] = {std::vector<CompensatorState>(c.ranks),
                                               std::vector<CompensatorState>(c.ranks)};
    for (int pass = 0; pass < passes; ++pass) {
      rig.reset();
      for (auto& v : states) {
        for (auto& s : v) s.reset();
      }
      for (int call = 0; call < calls; ++call) {
        const Direction d = alternate ? (call % 2 ? Direction::kBackward : Direction::kForward) : c.direction;
        Case cc = c;
        cc.direction = d;
        check_call(cc, rig, d, states[d == Direction::kBackward ? 1 : 0], pass, call, describe(cc, n, pass, call));
      }
    }
  }
}

bool have_gpu() { return test::gpu_present(); }

// Compensator configurations the sweeps rotate through.
struct CompConfig {
  CompensatorMode mode;
  ResidualMode residual;
  DType state;
};
const CompConfig kCompConfigs[] = {
    {CompensatorMode::kOff, ResidualMode::kGlobal, DType::kFloat32},
    {CompensatorMode::kDual, ResidualMode::kGlobal, DType::kFloat32},
    {CompensatorMode::kDual, ResidualMode::kLocal, DType::kBFloat16},
    {CompensatorMode::kSingle, ResidualMode::kLocal, DType::kFloat32},
    {CompensatorMode::kSingle, ResidualMode::kGlobal, DType::kBFloat16},
    {CompensatorMode::kDual, ResidualMode::kLocal, DType::kFloat32},
    {CompensatorMode::kDual, ResidualMode::kGlobal, DType::kBFloat16},
};
constexpr int kNumCompConfigs = sizeof(kCompConfigs) / sizeof(kCompConfigs[0]);
const DType kDTypes[] = {DType::kBFloat16, DType::kFloat16, DType::kFloat32};
const QuantizerKind kKinds[] = {QuantizerKind::kZeroAware, QuantizerKind::kNaive, QuantizerKind::kSymmetric};

Case with_comp(Case c, const CompConfig& k) {
  c.mode = k.mode;
  c.residual = k.residual;
  c.state_dtype = k.state;
  return c;
}

}  // namespace

// Every bit width and quantizer at every group size, P, dtype and compensator rotating with them.
BOOST_AUTO_TEST_CASE(bits_quantizers_groups) {
  if (!have_gpu()) return;
  int i = 0;
  for (int bits = kMinBits; bits <= kMaxBits; ++bits) {
    for (QuantizerKind kind : kKinds) {
      for (int group : {16, 32, 64, 128, 256, 512, 1024}) {
        Case c = with_comp({}, kCompConfigs[i % kNumCompConfigs]);
        c.kind = kind;
        c.bits = bits;
        c.group = group;
        c.dtype = kDTypes[i % 3];
        c.ranks = 1 + i % kMaxRanks;
        check_case(c, {1000, 4099}, 1, 3);
        ++i;
      }
    }
  }
}

// Every compensator, residual mode and state type with every dtype and P = 1..8, forward.
BOOST_AUTO_TEST_CASE(compensators_dtypes_ranks) {
  if (!have_gpu()) return;
  int i = 0;
  for (const CompConfig& k : kCompConfigs) {
    for (DType dt : kDTypes) {
      for (int p = 1; p <= kMaxRanks; ++p) {
        Case c = with_comp({}, k);
        c.dtype = dt;
        c.ranks = p;
        c.kind = kKinds[i % 3];
        c.bits = kMinBits + i % (kMaxBits - kMinBits + 1);
        c.group = (i % 4 == 0) ? 1024 : 128;
        check_case(c, {1, 3001, 20011}, 2, 3);
        ++i;
      }
    }
  }
}

// Backward calls: one exponent from every rank's max |x'|, the compensator outside the scaling;
// magnitudes from 2^-40 to 2^40 so that k ranges far from 0.
BOOST_AUTO_TEST_CASE(backward_scaling) {
  if (!have_gpu()) return;
  int i = 0;
  for (const CompConfig& k : kCompConfigs) {
    for (DType dt : kDTypes) {
      for (float mag : {1.0f, 0x1p-40f, 0x1p+40f, 0x1p-12f}) {
        if (dt == DType::kFloat16 && mag != 1.0f && mag != 0x1p-12f) continue;  // beyond fp16's range
        Case c = with_comp({}, k);
        c.dtype = dt;
        c.direction = Direction::kBackward;
        c.magnitude = mag;
        c.ranks = 1 + i % kMaxRanks;
        c.kind = kKinds[i % 3];
        c.bits = kMinBits + (i * 3) % (kMaxBits - kMinBits + 1);
        c.group = (i % 3 == 0) ? 256 : 64;
        check_case(c, {2049, 9999}, 2, 3);
        ++i;
      }
    }
  }
}

// The exact path at its boundary (n == exact_max_count: exact; n - 1: quantized), forward and
// backward, every compensator (bf16 forward rounds x', docs/numerics.md 4), with and without
// non-finite terms.
BOOST_AUTO_TEST_CASE(exact_path) {
  if (!have_gpu()) return;
  int i = 0;
  for (const CompConfig& k : kCompConfigs) {
    for (DType dt : kDTypes) {
      for (Direction d : {Direction::kForward, Direction::kBackward}) {
        for (bool specials : {false, true}) {
          Case c = with_comp({}, k);
          c.dtype = dt;
          c.direction = d;
          c.specials = specials;
          c.ranks = 1 + (i * 5) % kMaxRanks;
          c.group = (i % 2) ? 1024 : 32;
          c.kind = kKinds[i % 3];
          for (std::size_t n : {std::size_t{5003}, std::size_t{1}}) {
            for (std::size_t threshold : {n, n - 1}) {
              c.exact_max_count = threshold;
              check_case(c, {n}, 1, 3);
            }
          }
          ++i;
        }
      }
    }
  }
}

// NaN, +-Inf and values at the dtype's and at fp16's parameter limit: poisoned groups are NaN on
// output (canonical), counted once, and reach the states as the reference has them.
BOOST_AUTO_TEST_CASE(non_finite_and_fp16_limit) {
  if (!have_gpu()) return;
  int i = 0;
  for (const CompConfig& k : kCompConfigs) {
    for (DType dt : kDTypes) {
      for (int bits : {2, 4, 8}) {
        Case c = with_comp({}, k);
        c.dtype = dt;
        c.bits = bits;
        c.specials = true;
        c.ranks = 1 + (i * 3) % kMaxRanks;
        c.kind = kKinds[i % 3];
        c.group = (i % 2) ? 128 : 512;
        c.direction = (i % 4 == 3) ? Direction::kBackward : Direction::kForward;
        check_case(c, {30011}, 1, 3);
        ++i;
      }
    }
  }
}

// A pass alternating forward and backward calls: each direction keeps its own state.
BOOST_AUTO_TEST_CASE(forward_and_backward_states_are_separate) {
  if (!have_gpu()) return;
  for (const CompConfig& k : kCompConfigs) {
    Case c = with_comp({}, k);
    c.ranks = 3;
    c.dtype = DType::kBFloat16;
    check_case(c, {5000}, 2, 6, true);
  }
}

// Rows that start off the vector alignment (element shifts), and the output written over rank 0's
// row of the input.
BOOST_AUTO_TEST_CASE(in_place_and_unaligned) {
  if (!have_gpu()) return;
  int i = 0;
  for (DType dt : kDTypes) {
    for (std::size_t shift : {std::size_t{0}, std::size_t{1}, std::size_t{3}}) {
      for (bool in_place : {false, true}) {
        Case c = with_comp({}, kCompConfigs[i % kNumCompConfigs]);
        c.dtype = dt;
        c.shift = shift;
        c.in_place = in_place;
        c.ranks = 2 + i % 7;
        c.direction = (i % 3 == 2) ? Direction::kBackward : Direction::kForward;
        check_case(c, {4097, 4096}, 1, 3);
        ++i;
      }
    }
  }
}

// Wide groups (docs/numerics.md 2.4) and the Hadamard rotation (2.6), each alone and together: 4 and
// 8 bits, groups 16 to 1024 (rotation butterflies inside a thread, between lanes, between warps),
// compensator off and dual with the global and the local residual (gain 1), forward and backward
// calls alternating, every dtype, P = 2, 4, 8, counts that end in a partial group (not rotated)
// and one of whole groups; some with NaN, +-Inf and the fp16-limit groups of `specials`.
BOOST_AUTO_TEST_CASE(wide_groups_and_rotation) {
  if (!have_gpu()) return;
  const CompConfig comps[] = {{CompensatorMode::kOff, ResidualMode::kGlobal, DType::kFloat32},
                              {CompensatorMode::kDual, ResidualMode::kGlobal, DType::kFloat32},
                              {CompensatorMode::kDual, ResidualMode::kLocal, DType::kFloat32},
                              {CompensatorMode::kDual, ResidualMode::kLocal, DType::kBFloat16}};
  const int ranks[] = {2, 4, 8};
  int i = 0;
  for (int option = 0; option < 3; ++option) {
    for (int bits : {4, 8}) {
      for (int group : {16, 64, 128, 256, 1024}) {
        for (const CompConfig& k : comps) {
          Case c = with_comp({}, k);
          c.overflow = option != 1 ? OverflowGroups::kWide : OverflowGroups::kPoison;
          c.rotation = option != 0 ? Rotation::kHadamard : Rotation::kNone;
          c.eta_one = k.residual == ResidualMode::kLocal;
          c.bits = bits;
          c.group = group;
          c.kind = kKinds[i % 3];
          c.dtype = kDTypes[i % 3];
          c.ranks = ranks[i % 3];
          c.specials = i % 5 == 4;
          const std::size_t whole = static_cast<std::size_t>(group) * 8 * static_cast<std::size_t>(c.ranks);
          check_case(c, {whole + 37, whole}, 1, 4, true);
          ++i;
        }
      }
    }
  }
}

// Case i of a stream-units sweep: compensator k, a post-norm of `row` elements whose gain alternates
// between 0.5 and 40, the dtypes in turn.
Case stream_case(const CompConfig& k, std::size_t row, int i) {
  Case c = with_comp({}, k);
  c.stream = true;
  c.row_length = row;
  c.weight_scale = i % 2 ? 40.0f : 0.5f;
  c.dtype = kDTypes[i % 3];
  return c;
}

// Compensator units 'stream' (docs/numerics.md 6.1) against echo::allreduce_at_site: the rows'
// gains from each rank's dtype(x) (a warp's lane sums and butterfly), x' = x + c * R and the
// residual times G, every compensator configuration, with and without the rotation, on the quantized
// and the exact path, rows that end inside a lane (7, 100), a row of zeros (gains 0), post-norm gains
// far from 1; backward calls (alternating) and a site without a post-norm take unit gains.
BOOST_AUTO_TEST_CASE(stream_units) {
  if (!have_gpu()) return;
  int i = 0;
  for (std::size_t row : {std::size_t{640}, std::size_t{576}, std::size_t{100}, std::size_t{7}}) {
    for (const CompConfig& k : kCompConfigs) {
      if (k.mode == CompensatorMode::kOff) continue;
      Case c = stream_case(k, row, i);
      c.bits = i % 3 == 2 ? 8 : 4;
      c.ranks = 1 + (3 * i + 1) % kMaxRanks;
      c.rotation = i % 4 == 1 ? Rotation::kHadamard : Rotation::kNone;
      c.overflow = i % 5 == 3 ? OverflowGroups::kPoison : OverflowGroups::kWide;
      c.eta_one = k.residual == ResidualMode::kLocal && i % 2 == 0;
      check_case(c, {row * 8, row * 33}, 1, 4, i % 4 == 3);
      ++i;
    }
  }
  // The exact path (every rank's x' rounded to bf16 where the call rounds), both residual modes.
  for (ResidualMode residual : {ResidualMode::kLocal, ResidualMode::kGlobal}) {
    for (DType dtype : {DType::kBFloat16, DType::kFloat32}) {
      Case c;
      c.mode = CompensatorMode::kDual;
      c.residual = residual;
      c.stream = true;
      c.row_length = 64;
      c.dtype = dtype;
      c.ranks = 4;
      c.exact_max_count = 4096;
      check_case(c, {640, 4096}, 1, 4);
    }
  }
  // Numerics 6.1 steps 6 and 7: profile 'sqrt' (weights of both signs and near 0, so the factors'
  // floor acts) and a clip, alone and together, with and without the rotation, on the quantized
  // and the exact path. A row's correction passes the clip's bound often at 0.5.
  i = 0;
  for (std::size_t row : {std::size_t{640}, std::size_t{100}, std::size_t{7}}) {
    for (const CompConfig& k : kCompConfigs) {
      if (k.mode == CompensatorMode::kOff) continue;
      Case c = stream_case(k, row, i);
      c.weight_swing = 1.2f;
      c.profile_sqrt = i % 3 != 1;
      c.clip = i % 3 == 0 ? 0.0f : (i % 2 ? 0.5f : 2.0f);
      c.bits = i % 4 == 2 ? 8 : 4;
      c.ranks = 1 + (3 * i + 2) % kMaxRanks;
      c.rotation = i % 4 == 1 ? Rotation::kHadamard : Rotation::kNone;
      c.overflow = OverflowGroups::kWide;
      c.exact_max_count = i % 5 == 4 ? 1u << 20 : 0;
      check_case(c, {row * 8, row * 33}, 1, 4, i % 4 == 3);
      ++i;
    }
  }
  // Step 8, gains 'sum': the update after delivery (a warp per row of the output), the apply with the
  // ratios of the last site of the call's kind, every compensator configuration, with profile, clip
  // and the rotation, on the quantized and the exact path; two passes, so the second pass's first
  // MLP call must not read the first pass's MLP ratios (the reset clears which kinds are held).
  i = 0;
  for (std::size_t row : {std::size_t{640}, std::size_t{100}, std::size_t{7}}) {
    for (const CompConfig& k : kCompConfigs) {
      if (k.mode == CompensatorMode::kOff) continue;
      Case c = stream_case(k, row, i);
      c.gains_sum = true;
      c.weight_swing = 1.2f;
      c.profile_sqrt = i % 2 == 0;
      c.clip = i % 3 == 0 ? 0.0f : (i % 2 ? 0.5f : 1.0f);
      c.bits = i % 4 == 2 ? 8 : 4;
      c.ranks = 1 + (3 * i + 1) % kMaxRanks;
      c.rotation = i % 4 == 1 ? Rotation::kHadamard : Rotation::kNone;
      c.overflow = OverflowGroups::kWide;
      c.exact_max_count = i % 5 == 4 ? 1u << 20 : 0;
      check_case(c, {row * 8, row * 33}, 2, 5);
      ++i;
    }
  }
  // A site without a post-norm: the paper's compensator bit for bit (no gains scratch).
  Case c;
  c.mode = CompensatorMode::kDual;
  c.residual = ResidualMode::kLocal;
  c.stream = true;
  c.ranks = 3;
  check_case(c, {1000, 4099}, 1, 3);
}

// Case i of a deficit sweep (docs/numerics.md 6.2): compensator 'deficit' in the settings it runs
// with (units 'stream', the local residual, gains 'sum': forward calls at sites of kind attention,
// MLP, attention, ... as check_call gives them) with state type `state`, at a post-norm of `row`
// elements (0: a site without one) whose weights take both signs and values near 0, so that the
// floor of wf_j acts, and whose gain alternates between 0.5 and 40.
Case deficit_case(std::size_t row, DType state, int i) {
  Case c;
  c.mode = CompensatorMode::kDeficit;
  c.residual = ResidualMode::kLocal;
  c.state_dtype = state;
  c.stream = true;
  c.gains_sum = true;
  c.row_length = row;
  c.weight_swing = 1.2f;
  c.weight_scale = i % 2 ? 40.0f : 0.5f;
  return c;
}

// Compensator 'deficit' at a post-norm site against echo::allreduce_at_site: the rows' estimates e
// in place of R and the floored weights wf_j (the gains kernel), c = fp32(fp32(eta * A) * fp32(e /
// wf_j)) and the clip per element, the undelivered part fp32(u - c) left for the update and A +
// fp32(d * fp32(w_j / r)) after delivery, with the row ratios of both kinds; two passes of five
// calls (the reset clears the ratios held), with and without the clip and the rotation, fp32 and
// bf16 inputs and state, P = 4 and 8, groups of 32 and 128, rows that end inside a lane (100, 7),
// on the quantized and the exact path; then fp16 inputs at P = 3 and 5.
BOOST_AUTO_TEST_CASE(deficit_at_post_norm_sites) {
  if (!have_gpu()) return;
  const std::size_t rows[] = {640, 100, 7};
  int i = 0;
  for (Rotation rotation : {Rotation::kNone, Rotation::kHadamard}) {
    for (int group : {32, 128}) {
      for (int ranks : {4, 8}) {
        for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
          for (DType state : {DType::kFloat32, DType::kBFloat16}) {
            for (float clip : {0.0f, 1.0f}) {
              const std::size_t row = rows[i % 3];
              Case c = deficit_case(row, state, i);
              c.rotation = rotation;
              c.overflow = OverflowGroups::kWide;
              c.group = group;
              c.ranks = ranks;
              c.dtype = dtype;
              c.clip = clip;
              c.bits = i % 4 == 2 ? 8 : 4;
              c.kind = kKinds[i % 3];
              c.eta_one = i % 5 == 1;
              c.exact_max_count = i % 7 == 3 ? 1u << 20 : 0;
              check_case(c, {row * 8, row * 33}, 2, 5);
              ++i;
            }
          }
        }
      }
    }
  }
  for (int ranks : {3, 5}) {
    for (float clip : {0.0f, 0.5f}) {
      Case c = deficit_case(ranks == 3 ? 640 : 100, DType::kFloat32, i);
      c.dtype = DType::kFloat16;
      c.ranks = ranks;
      c.clip = clip;
      c.group = 64;
      c.overflow = OverflowGroups::kWide;
      c.rotation = clip != 0.0f ? Rotation::kHadamard : Rotation::kNone;
      check_case(c, {c.row_length * 8, c.row_length * 33}, 1, 5);
      ++i;
    }
  }
}

// Compensator 'deficit' without a post-norm: at a site without one (forward) and in every backward
// call, A = S(fp32(A + fp32(u - fp32(eta * A)))) from c = fp32(eta * A), through the kernels of the
// paper's units (the batched loads of the quantized kernel, the rotation's and the exact one);
// forward and backward calls alternate, each direction with its state, and at a post-norm site the
// forward calls take the site's loop between them. Some cases with NaN, +-Inf and values at the
// dtypes' limits.
BOOST_AUTO_TEST_CASE(deficit_without_post_norm) {
  if (!have_gpu()) return;
  int i = 0;
  for (std::size_t row : {std::size_t{0}, std::size_t{640}}) {
    for (DType dtype : kDTypes) {
      for (DType state : {DType::kFloat32, DType::kBFloat16}) {
        for (int group : {32, 128}) {
          Case c = deficit_case(row, state, i);
          c.dtype = dtype;
          c.group = group;
          c.ranks = 1 + (3 * i + 1) % kMaxRanks;
          c.kind = kKinds[i % 3];
          c.rotation = i % 3 == 1 ? Rotation::kHadamard : Rotation::kNone;
          c.overflow = i % 2 ? OverflowGroups::kWide : OverflowGroups::kPoison;
          c.exact_max_count = i % 4 == 3 ? 1u << 20 : 0;
          c.specials = row == 0 && i % 5 == 2;
          const std::vector<std::size_t> sizes =
              row == 0 ? std::vector<std::size_t>{1000, 4099} : std::vector<std::size_t>{row * 8, row * 33};
          check_case(c, sizes, 2, 6, true);
          ++i;
        }
      }
    }
  }
  // Backward alone, magnitudes far from 1 (the shared exponent far from 0).
  for (float magnitude : {0x1p-30f, 0x1p+30f}) {
    Case c = deficit_case(0, DType::kBFloat16, i);
    c.direction = Direction::kBackward;
    c.magnitude = magnitude;
    c.ranks = 4;
    check_case(c, {3001}, 1, 4);
    ++i;
  }
}

// Wide groups keep finite inputs finite (docs/numerics.md 2.4): groups at and just past the fp16
// scale limit and magnitudes up to 1e37, every output finite and bit for bit the reference's (which
// is rank-identical), with and without the rotation, every bit width's limit.
BOOST_AUTO_TEST_CASE(wide_groups_keep_finite_inputs_finite) {
  if (!have_gpu()) return;
  int i = 0;
  for (Rotation rot : {Rotation::kNone, Rotation::kHadamard}) {
    for (int bits : {2, 4, 8}) {
      for (int group : {64, 128, 256}) {
        Case c = with_comp({}, kCompConfigs[i % 2 ? 1 : 5]);
        c.overflow = OverflowGroups::kWide;
        c.rotation = rot;
        c.wide_values = true;
        c.eta_one = true;
        c.bits = bits;
        c.group = group;
        c.kind = kKinds[i % 3];
        c.dtype = i % 2 ? DType::kBFloat16 : DType::kFloat32;
        c.ranks = 2 << (i % 3);
        check_case(c, {static_cast<std::size_t>(group) * 40 + 19}, 1, 4, true);
        ++i;
      }
    }
  }
}

// Large enough for many blocks at every group size and P = 4 and 8 (the speed configuration).
BOOST_AUTO_TEST_CASE(larger_messages) {
  if (!have_gpu()) return;
  Case c = with_comp({}, kCompConfigs[1]);
  c.ranks = 4;
  check_case(c, {1 << 20}, 1, 3);
  c = with_comp({}, kCompConfigs[2]);
  c.ranks = 8;
  c.group = 1024;
  c.dtype = DType::kFloat16;
  check_case(c, {(1 << 19) + 77}, 1, 2);
  c = with_comp({}, kCompConfigs[5]);
  c.ranks = 4;
  c.rotation = Rotation::kHadamard;
  c.overflow = OverflowGroups::kWide;
  check_case(c, {(1 << 20) + 5}, 1, 3);
}

// A small sweep that reaches every block-level path (groups inside a warp and across warps, the
// exact and the quantized kernels, backward max) for compute-sanitizer (scripts/emulate_gpu_check.sh).
BOOST_AUTO_TEST_CASE(small_sweep_for_sanitizers) {
  if (!have_gpu()) return;
  int i = 0;
  for (int group : {16, 256, 1024}) {
    for (std::size_t exact : {std::size_t{0}, std::size_t{1} << 20}) {
      for (int p : {3, 8}) {
        Case c = with_comp({}, kCompConfigs[(i * 3 + 1) % kNumCompConfigs]);
        c.group = group;
        c.exact_max_count = exact;
        c.ranks = p;
        c.dtype = kDTypes[i % 3];
        c.direction = i % 2 ? Direction::kBackward : Direction::kForward;
        c.specials = i % 3 == 0;
        // Every other case with the rotation (its shuffles and cross-warp exchanges) and wide groups.
        if (i % 2 == 1) {
          c.rotation = Rotation::kHadamard;
          c.overflow = OverflowGroups::kWide;
        }
        check_case(c, {3001}, 1, 2);
        ++i;
      }
    }
  }
}

// A call captured once into a CUDA graph and replayed on fresh inputs gives the reference's bits
// call after call (the state carried, no host synchronization inside the call).
BOOST_AUTO_TEST_CASE(graph_replay) {
  if (!have_gpu()) return;
  for (Direction d : {Direction::kForward, Direction::kBackward}) {
    Case c = with_comp({}, kCompConfigs[1]);
    c.ranks = 4;
    c.direction = d;
    const std::size_t n = 10007;
    Rig rig(c, n);
    rig.reset();
    TEST_CUDA(cudaStreamSynchronize(rig.stream));
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    TEST_CUDA(cudaStreamBeginCapture(rig.stream, cudaStreamCaptureModeThreadLocal));
    const Status captured = cuda::emulate_allreduce(rig.arguments(d), rig.stream);
    TEST_CUDA(cudaStreamEndCapture(rig.stream, &graph));
    TEST_OK(captured);
    TEST_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    std::vector<CompensatorState> states(c.ranks);
    for (int call = 0; call < 4; ++call) {
      std::vector<std::vector<float>> in(c.ranks), out_ref(c.ranks, std::vector<float>(n));
      std::vector<const float*> ip(c.ranks);
      std::vector<float*> op(c.ranks);
      for (int r = 0; r < c.ranks; ++r) {
        in[r] = make_part(c, n, 0, call, r);
        ip[r] = in[r].data();
        op[r] = out_ref[r].data();
      }
      AllReduceReport rep_ref, rep;
      AllReduceSpec spec = rig.spec;
      spec.direction = d;
      TEST_OK(echo::allreduce(spec, c.ranks, n, ip.data(), op.data(), states.data(), nullptr, &rep_ref));
      rig.upload(in);
      rig.poison_outputs();
      TEST_CUDA(cudaGraphLaunch(exec, rig.stream));
      TEST_OK(cuda::emulate_read_report(rig.workspace, rig.stream, &rep));
      const std::vector<float> out = rig.download_out();
      std::size_t at = 0;
      BOOST_REQUIRE_MESSAGE(bits_equal(out.data(), out_ref[0].data(), n, &at),
                            std::string("graph replay ") + direction_name(d) + " call " + std::to_string(call) +
                                ": output differs at " + std::to_string(at));
      BOOST_CHECK_EQUAL(rep.scale_exponent, rep_ref.scale_exponent);
      std::vector<float> m1(n), m2(n);
      TEST_OK(cuda::emulate_download_state(rig.state[d == Direction::kBackward ? 1 : 0], spec, c.ranks, n, 3,
                                           m1.data(), m2.data(), rig.stream));
      BOOST_REQUIRE(bits_equal(m1.data(), states[3].m1.data(), n, &at));
      BOOST_REQUIRE(bits_equal(m2.data(), states[3].m2.data(), n, &at));
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
}

// Buffers that are not device memory of the current device are named (the GPU's own query).
BOOST_AUTO_TEST_CASE(host_memory_is_refused) {
  if (!have_gpu()) return;
  std::vector<std::uint16_t> host(4000);
  void* dev = nullptr;
  void* ws = nullptr;
  TEST_CUDA(cudaMalloc(&dev, 2000));
  TEST_CUDA(cudaMalloc(&ws, cuda::emulate_workspace_bytes()));
  cuda::EmulateArguments a;
  a.ranks = 4;
  a.count = 1000;
  a.spec.compensator.mode = CompensatorMode::kOff;
  a.parts = host.data();
  a.out = dev;
  a.workspace = ws;
  const Status s = cuda::emulate_can_implement(a);
  BOOST_CHECK_MESSAGE(!s.ok() && s.message().find("parts is not device memory") != std::string::npos, s.message());
  cudaFree(dev);
  cudaFree(ws);
}
