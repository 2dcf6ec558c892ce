// echo_make_conformance DIR: writes the conformance pack (docs/conformance.md) into DIR: for every
// case a trace, the reference's outputs for it, and manifest.json (each sha256 a placeholder
// "@sha256:FILE@" that scripts/make_conformance.sh fills in). Contributions come from an integer
// generator and plain fp32 arithmetic (no libm), and the HDF5 files carry no timestamps, so the
// pack regenerates to the same bits.
#include <H5Cpp.h>
#include <algorithm>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "echo/backend.h"
#include "echo/hdf5_util.h"
#include "echo/outputs_file.h"
#include "echo/spec_fields.h"
#include "echo/text_output.h"
#include "echo/trace.h"
#include "echo/verify.h"
#include "spec_options.h"

namespace {

using echo::DType;
using echo::Direction;

// What the contributions look like.
enum class Inputs {
  kActivations,  // bell-shaped values with per-channel scales, both signs
  kOneSided,     // groups offset from zero by 0..3 naive steps, zeros and all-zero groups
  kNonFinite,    // activations with NaN, +-Inf and a value beyond the dtype's range
  kFp16Limit,    // sums whose group scale lands just below and just above fp16's largest value
  kTiny,         // values whose scales are fp16 subnormals, down to the 2^-24 floor
  kGradients,    // small values (about 1e-4) for backward calls
};

struct Case {
  const char* name;
  const char* covers;
  int ranks;
  std::size_t count;
  DType dtype;
  Direction direction;
  Inputs inputs;
  const char* flags;  // echotk spec options; the rest keep their defaults
  std::size_t passes = 2;
  std::size_t sites = 2;
  // > 0: the trace records a post-norm after every site (post_norm "rmsnorm", rows of this many
  // elements, post_norm_weights from post_norm_weight); 0: no post_norm record.
  std::size_t post_norm_hidden = 0;
  // The post-norm's per-feature profile differs from site to site (post_norm_weight): what
  // compensator profile 'sqrt' needs to change any bit, since a profile common to all sites cancels
  // between the update and the apply.
  bool profile_per_site = false;
  // The trace records each site's kind (/site_kind: attention, MLP, attention, ...): what
  // compensator gains 'sum' need.
  bool site_kinds = false;
  // Every 4th feature's post-norm weight is negative (post_norm_weight): what compensator 'deficit'
  // reads, the sign of each feature's gain, needs to show.
  bool signed_weights = false;
};

// The post-norm weights of the pack's post-norm cases: a per-feature profile times a scale that
// grows 8-fold from site to site (the spread of Gemma 3's gains, docs/results-gemma3.md); with
// `profile_per_site` the profile's period changes from site to site (7, 8, 9, ...) and every 5th
// feature of odd sites sits below the profile's floor; with `signed_weights` every 4th feature
// (from feature 1) is negated.
float post_norm_weight(std::size_t site, std::size_t feature, bool profile_per_site, bool signed_weights) {
  const std::size_t period = profile_per_site ? 7 + site : 7;
  float profile = 0.05f + 0.01f * static_cast<float>(feature % period);
  if (profile_per_site && site % 2 == 1 && feature % 5 == 0) profile = 0.001f;
  if (signed_weights && feature % 4 == 1) profile = -profile;
  return profile * static_cast<float>(1u << (3 * site));
}

const DType bf16 = DType::kBFloat16, fp16 = DType::kFloat16, fp32 = DType::kFloat32;
const Direction fwd = Direction::kForward, bwd = Direction::kBackward;

const std::vector<Case> kCases = {
    {"zero-aware-4bit-dual-bf16-p4", "the default configuration (poison: the same bits as wide here)", 4, 1000,
     bf16, fwd, Inputs::kActivations, ""},
    {"zero-aware-8bit-dual-bf16-p4", "8 bits", 4, 1000, bf16, fwd, Inputs::kActivations, "--bits 8"},
    {"zero-aware-4bit-single-fp16-p3", "single compensator, fp16", 3, 777, fp16, fwd, Inputs::kActivations,
     "--compensator single"},
    {"zero-aware-4bit-off-fp32-p5", "no compensator, fp32", 5, 1201, fp32, fwd, Inputs::kActivations,
     "--compensator off"},
    {"naive-4bit-dual-fp16-p3", "naive quantizer", 3, 777, fp16, fwd, Inputs::kActivations, "--quantizer naive"},
    {"naive-8bit-off-bf16-p2", "naive quantizer, 8 bits", 2, 1313, bf16, fwd, Inputs::kOneSided,
     "--quantizer naive --bits 8 --compensator off"},
    {"symmetric-4bit-single-local-fp32-p5", "symmetric quantizer, local residual", 5, 1201, fp32, fwd,
     Inputs::kActivations, "--quantizer symmetric --compensator single --residual local"},
    {"symmetric-8bit-dual-bf16-p6", "symmetric quantizer, 8 bits", 6, 999, bf16, fwd, Inputs::kActivations,
     "--quantizer symmetric --bits 8"},
    {"zero-aware-4bit-dual-local-bf16-p8", "local residual, P = 8", 8, 1015, bf16, fwd, Inputs::kActivations,
     "--residual local"},
    {"zero-aware-8bit-dual-local-fp32-p3", "local residual, 8 bits, fp32", 3, 997, fp32, fwd, Inputs::kActivations,
     "--bits 8 --residual local"},
    {"zero-aware-4bit-single-local-fp16-p4", "single compensator, local residual", 4, 1000, fp16, fwd,
     Inputs::kActivations, "--compensator single --residual local"},
    {"bf16-state-4bit-dual-bf16-p4", "compensator state stored in bf16", 4, 1000, bf16, fwd, Inputs::kActivations,
     "--state-dtype bf16"},
    {"bf16-state-4bit-dual-local-fp16-p2", "bf16 state, local residual", 2, 1313, fp16, fwd, Inputs::kActivations,
     "--state-dtype bf16 --residual local"},
    {"coefficients-4bit-dual-bf16-p4", "non-default compensator coefficients", 4, 1000, bf16, fwd,
     Inputs::kActivations, "--eta 0.5 --a 0.6 --beta1 0.8 --beta2 0.2"},
    {"coefficients-4bit-single-fp32-p3", "non-default single decay and gain", 3, 777, fp32, fwd,
     Inputs::kActivations, "--compensator single --eta 1 --beta 0.25"},
    {"one-rank-4bit-dual-bf16-p1", "P = 1 (no push; the gather alone)", 1, 700, bf16, fwd, Inputs::kActivations, ""},
    {"seven-ranks-4bit-dual-fp16-p7", "P = 7", 7, 1001, fp16, fwd, Inputs::kActivations, ""},
    {"group16-4bit-dual-bf16-p3", "group 16", 3, 333, bf16, fwd, Inputs::kActivations, "--group 16"},
    {"group1024-8bit-dual-fp32-p2", "group 1024, last segment short", 2, 3001, fp32, fwd, Inputs::kActivations,
     "--group 1024 --bits 8"},
    {"short-message-4bit-dual-bf16-p4", "n = 100 < g: segment 0 holds everything", 4, 100, bf16, fwd,
     Inputs::kActivations, ""},
    {"one-sided-4bit-dual-bf16-p4", "zero-aware anchors: one-sided groups at every distance, zeros", 4, 1000, bf16,
     fwd, Inputs::kOneSided, ""},
    {"one-sided-8bit-single-fp32-p3", "zero-aware anchors at 8 bits", 3, 997, fp32, fwd, Inputs::kOneSided,
     "--bits 8 --compensator single"},
    {"exact-at-boundary-dual-bf16-p4", "exact path, n = exact_max_count (x' rounded to bf16)", 4, 1000, bf16, fwd,
     Inputs::kActivations, "--exact-max-count 1000"},
    {"exact-above-boundary-dual-bf16-p4", "n = exact_max_count + 1: quantized", 4, 1001, bf16, fwd,
     Inputs::kActivations, "--exact-max-count 1000"},
    {"exact-at-boundary-local-fp16-p3", "exact path, local residual, fp16", 3, 600, fp16, fwd, Inputs::kActivations,
     "--exact-max-count 600 --residual local"},
    {"exact-above-boundary-local-fp16-p3", "n = exact_max_count + 1, local residual", 3, 601, fp16, fwd,
     Inputs::kActivations, "--exact-max-count 600 --residual local"},
    {"exact-at-boundary-local-bf16-p5", "exact path, local residual with bf16 rounding of x'", 5, 512, bf16, fwd,
     Inputs::kActivations, "--exact-max-count 512 --residual local"},
    {"exact-at-boundary-off-fp32-p8", "exact path, fp32 sums of 8 ranks (where the summation order shows)", 8, 1024,
     fp32, fwd, Inputs::kActivations, "--exact-max-count 1024 --compensator off"},
    {"backward-4bit-dual-bf16-p4", "backward: shared power-of-two scaling", 4, 1000, bf16, bwd, Inputs::kGradients,
     ""},
    {"backward-8bit-dual-local-fp32-p3", "backward, 8 bits, local residual", 3, 777, fp32, bwd, Inputs::kGradients,
     "--bits 8 --residual local"},
    {"backward-exact-at-boundary-bf16-p4", "backward exact path (x' not rounded)", 4, 700, bf16, bwd,
     Inputs::kGradients, "--exact-max-count 700"},
    {"nonfinite-4bit-dual-bf16-p4", "NaN and Inf inputs poison their groups", 4, 1000, bf16, fwd, Inputs::kNonFinite,
     ""},
    {"nonfinite-8bit-single-local-fp16-p3", "non-finite inputs and fp16 overflow, local residual", 3, 777, fp16, fwd,
     Inputs::kNonFinite, "--bits 8 --compensator single --residual local"},
    {"nonfinite-exact-fp32-p4", "non-finite inputs on the exact path", 4, 500, fp32, fwd, Inputs::kNonFinite,
     "--exact-max-count 500"},
    {"fp16-limit-4bit-off-fp32-p4", "scales at fp16's largest value and beyond (poisoned)", 4, 1024, fp32, fwd,
     Inputs::kFp16Limit, "--compensator off"},
    {"fp16-limit-8bit-off-fp32-p2", "scale limit at 8 bits", 2, 1024, fp32, fwd, Inputs::kFp16Limit,
     "--bits 8 --compensator off"},
    {"fp16-limit-4bit-symmetric-fp32-p3", "scale limit, symmetric quantizer", 3, 1024, fp32, fwd, Inputs::kFp16Limit,
     "--quantizer symmetric --compensator off"},
    {"fp16-limit-4bit-wide-off-fp32-p4", "the same scales as wide groups (the default overflow mode): finite out", 4,
     1024, fp32, fwd, Inputs::kFp16Limit, "--compensator off --overflow-groups wide"},
    {"fp16-limit-8bit-wide-dual-bf16-p4", "wide groups at 8 bits through the dual compensator", 4, 1024, bf16, fwd,
     Inputs::kFp16Limit, "--bits 8 --overflow-groups wide"},
    {"tiny-4bit-dual-fp32-p4", "subnormal fp16 scales and the 2^-24 floor", 4, 1000, fp32, fwd, Inputs::kTiny, ""},
    {"ring-4bit-dual-bf16-p4", "ring algorithm (reference only)", 4, 1000, bf16, fwd, Inputs::kActivations,
     "--algorithm ring"},
    {"five-bit-dual-bf16-p3", "5-bit codes (reference only)", 3, 777, bf16, fwd, Inputs::kActivations, "--bits 5"},
    {"stream-4bit-dual-local-bf16-p4", "compensator units 'stream', post-norm sites (reference only)", 4, 1024, bf16,
     fwd, Inputs::kActivations, "--compensator-units stream --residual local", 2, 3, 64},
    {"stream-8bit-dual-fp32-p3", "compensator units 'stream', 8 bits, global residual (reference only)", 3, 768,
     fp32, fwd, Inputs::kActivations, "--bits 8 --compensator-units stream", 2, 3, 64},
    {"stream-4bit-sqrt-clip-local-bf16-p4",
     "compensator units 'stream' with profile 'sqrt' and clip 0.1, post-norms whose profile differs from site to site "
     "(reference only)",
     4, 1024, bf16, fwd, Inputs::kActivations,
     "--compensator-units stream --residual local --compensator-profile sqrt --compensator-clip 0.1", 2, 3, 64, true},
    {"stream-sum-4bit-sqrt-clip-local-bf16-p4",
     "compensator gains 'sum' with profile 'sqrt' and clip 1: attention and MLP sites' row ratios (reference only)",
     4, 1024, bf16, fwd, Inputs::kActivations,
     "--compensator-units stream --residual local --compensator-profile sqrt --compensator-clip 1 "
     "--compensator-gains sum",
     2, 4, 64, true, true},
    {"stream-sum-8bit-dual-fp32-p3", "compensator gains 'sum', 8 bits, global residual (reference only)", 3, 768,
     fp32, fwd, Inputs::kActivations, "--bits 8 --compensator-units stream --compensator-gains sum", 2, 3, 64, false,
     true},
    {"deficit-4bit-clip-local-bf16-p4",
     "compensator 'deficit' with clip 1: the closed loop through attention and MLP post-norms whose profile differs "
     "from site to site, signed weights, some below the floor (reference only)",
     4, 1024, bf16, fwd, Inputs::kActivations,
     "--compensator deficit --compensator-units stream --residual local --compensator-gains sum "
     "--compensator-clip 1",
     2, 4, 64, true, true, true},
    {"deficit-8bit-fp32-p3", "compensator 'deficit' without a clip, 8 bits (reference only)", 3, 768, fp32, fwd,
     Inputs::kActivations,
     "--bits 8 --compensator deficit --compensator-units stream --residual local --compensator-gains sum", 2, 3, 64,
     false, true, true},
};

// splitmix64: the same sequence everywhere.
struct Random {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  float uniform() { return static_cast<float>(next() >> 40) * 0x1p-24f; }  // [0, 1), exact
  // Bell-shaped in [-2, 2): the sum of four uniforms, centred.
  float bell() { return ((uniform() + uniform()) + (uniform() + uniform())) - 2.0f; }
};

// FNV-1a of the case name: a case's data does not depend on its place in the table.
std::uint64_t name_hash(const char* name) {
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (const char* p = name; *p != '\0'; ++p) h = (h ^ static_cast<unsigned char>(*p)) * 0x100000001B3ull;
  return h;
}

float channel_scale(std::size_t i) { return 1.0f + static_cast<float>((i * 2654435761u) % 97) / 24.0f; }

void fill(Inputs kind, int rank, int ranks, std::size_t count, std::uint64_t seed, float* x) {
  Random rng{seed};
  const std::size_t g = 128;
  switch (kind) {
    case Inputs::kActivations:
    case Inputs::kGradients: {
      const float scale = kind == Inputs::kGradients ? 1.0e-4f : 1.0f;
      for (std::size_t i = 0; i < count; ++i) x[i] = rng.bell() * channel_scale(i) * scale + 0.05f * rank * scale;
      // A few outliers, as activations have.
      for (std::size_t i = 17; i < count; i += 211) x[i] = x[i] * 24.0f;
      break;
    }
    case Inputs::kOneSided: {
      for (std::size_t i = 0; i < count; ++i) {
        const std::size_t group = i / g;
        // Offsets of 0..3.5 group widths from zero, on either side; some groups zero, some sparse.
        const float width = 1.0f;
        const float offset = static_cast<float>(group % 8) * 0.5f * width;
        const float sign = (group / 8) % 2 == 0 ? 1.0f : -1.0f;
        float v = sign * (offset + rng.uniform() * width) / static_cast<float>(ranks);
        if (group % 5 == 4) v = 0.0f;                      // an all-zero group
        if (group % 5 == 3 && i % 3 != 0) v = 0.0f;        // mostly zeros
        x[i] = v;
      }
      break;
    }
    case Inputs::kNonFinite: {
      for (std::size_t i = 0; i < count; ++i) x[i] = rng.bell() * channel_scale(i);
      const float inf = std::numeric_limits<float>::infinity();
      const std::size_t at = (static_cast<std::size_t>(rank) * 131 + seed % 97) % count;
      if (rank == 0) x[at] = std::numeric_limits<float>::quiet_NaN();
      if (rank == 1 % ranks) x[(at + 300) % count] = inf;
      if (rank == 2 % ranks) x[(at + 450) % count] = -inf;
      x[(at + 613) % count] = 1.0e5f;  // beyond fp16's range: Inf in an fp16 trace, finite otherwise
      break;
    }
    case Inputs::kFp16Limit: {
      // Groups spanning 65504 * L * (0.97 .. 1.09): the owner sum's scale lands just below and
      // just above fp16's largest value (pushed codes clamp a little of the range away). Even
      // groups aim at L = 255 (at 4 bits they poison already at the push), odd ones at L = 15.
      for (std::size_t i = 0; i < count; ++i) {
        const std::size_t group = i / g;
        const float target = 65504.0f * 255.0f;
        const float fraction = 0.97f + 0.02f * static_cast<float>(group % 7);
        const float span = (group % 2 == 0 ? target : target / 17.0f) * fraction;
        float v = (rng.uniform() - 0.5f) * span / static_cast<float>(ranks);
        if (i % g == 0) v = -0.5f * span / static_cast<float>(ranks);
        if (i % g == 1) v = 0.5f * span / static_cast<float>(ranks);
        x[i] = v;
      }
      break;
    }
    case Inputs::kTiny: {
      for (std::size_t i = 0; i < count; ++i) {
        const std::size_t group = i / g;
        const float scale = group % 3 == 0 ? 0x1p-26f : (group % 3 == 1 ? 0x1p-20f : 0x1p-14f);
        x[i] = rng.bell() * scale;
      }
      break;
    }
  }
}

bool write_trace(const std::string& path, const Case& c, const std::vector<float>& contributions) {
  echo::h5::AtomicFile out;
  if (echo::Status s = out.create(path); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return false;
  }
  try {
    H5::H5File& f = out.file();
    echo::h5::write_string_attribute(f, "format", echo::kTraceFormatName);
    echo::h5::write_int_attribute(f, "version", echo::kTraceFormatVersion);
    echo::h5::write_int_attribute(f, "ranks", c.ranks);
    echo::h5::write_string_attribute(f, "direction", echo::direction_name(c.direction));
    echo::h5::write_string_attribute(f, "model", "conformance pack");
    echo::h5::write_string_attribute(f, "source", std::string("echo_make_conformance: ") + c.name);
    const hsize_t dims[4] = {c.passes, c.sites, static_cast<hsize_t>(c.ranks), c.count};
    const hsize_t chunk[4] = {1, 1, static_cast<hsize_t>(c.ranks), c.count};
    H5::DSetCreatPropList props;
    props.setChunk(4, chunk);
    props.setShuffle();
    props.setDeflate(6);
    H5Pset_obj_track_times(props.getId(), false);
    H5::DataSet d = f.createDataSet("/contributions", H5::PredType::IEEE_F32LE, H5::DataSpace(4, dims), props);
    d.write(contributions.data(), H5::PredType::NATIVE_FLOAT);
    echo::h5::write_string_attribute(d, "dtype", echo::dtype_name(c.dtype));
    if (c.post_norm_hidden > 0) {
      echo::h5::write_int_attribute(f, "tokens", static_cast<std::int64_t>(c.count / c.post_norm_hidden));
      echo::h5::write_int_attribute(f, "hidden", static_cast<std::int64_t>(c.post_norm_hidden));
      echo::h5::write_string_attribute(f, "post_norm", "rmsnorm");
      std::vector<float> weights(c.sites * c.post_norm_hidden);
      for (std::size_t k = 0; k < c.sites; ++k) {
        for (std::size_t j = 0; j < c.post_norm_hidden; ++j) {
          weights[k * c.post_norm_hidden + j] = post_norm_weight(k, j, c.profile_per_site, c.signed_weights);
        }
      }
      const hsize_t wdims[2] = {c.sites, c.post_norm_hidden};
      H5::DSetCreatPropList wprops;
      H5Pset_obj_track_times(wprops.getId(), false);  // no timestamps: the same pack, the same bits
      H5::DataSet w =
          f.createDataSet("/post_norm_weights", H5::PredType::IEEE_F32LE, H5::DataSpace(2, wdims), wprops);
      w.write(weights.data(), H5::PredType::NATIVE_FLOAT);
    }
    if (c.site_kinds) {
      std::vector<std::int8_t> kinds(c.sites);
      for (std::size_t k = 0; k < c.sites; ++k) kinds[k] = static_cast<std::int8_t>(k % 2);
      const hsize_t kdims[1] = {c.sites};
      H5::DSetCreatPropList kprops;
      H5Pset_obj_track_times(kprops.getId(), false);
      H5::DataSet kd = f.createDataSet("/site_kind", H5::PredType::STD_I8LE, H5::DataSpace(1, kdims), kprops);
      kd.write(kinds.data(), H5::PredType::NATIVE_INT8);
    }
  } catch (const H5::Exception& e) {
    std::fprintf(stderr, "%s: %s\n", path.c_str(), e.getDetailMsg().c_str());
    return false;
  }
  const echo::Status s = out.commit();
  if (!s.ok()) std::fprintf(stderr, "%s\n", s.message().c_str());
  return s.ok();
}

// Every spec option, explicit: (option name, value), in the order the pack's files record them. A
// field added since follows in the table's order where a case sets it away from its default (the
// pack's files, made without it, stay as they are).
std::vector<std::pair<std::string, std::string>> all_options(const echo::AllReduceSpec& spec) {
  static const std::vector<std::string> kRecordedOrder = {
      "bits", "group", "quantizer", "compensator", "residual", "algorithm", "eta", "a", "beta1", "beta2", "beta",
      "state_dtype", "exact_max_count", "outliers", "overflow_groups", "rotation"};
  std::vector<std::string> names = kRecordedOrder;
  for (const echo::SpecField& field : echo::spec_fields()) {
    const bool recorded = std::find(names.begin(), names.end(), field.name) != names.end();
    const bool set = echo::spec_value_text(echo::get_spec_field(spec, field.name)) !=
                     echo::spec_value_text(field.default_value);
    if (field.has_flag && !recorded && set) names.push_back(field.name);
  }
  std::vector<std::pair<std::string, std::string>> options;
  for (const std::string& name : names) {
    options.emplace_back(echo::find_spec_field(name)->flag().substr(2),
                         echo::spec_value_text(echo::get_spec_field(spec, name)));
  }
  return options;
}

bool is_number(const std::string& option) {
  std::string name = option;
  std::replace(name.begin(), name.end(), '-', '_');
  return echo::find_spec_field(name)->type != echo::SpecFieldType::kChoice;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR   (writes the conformance pack into DIR)\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  std::ostringstream manifest;
  manifest << "{\n  \"format\": \"echo-conformance\",\n  \"version\": 1,\n"
           << "  \"verify\": \"echotk verify TRACE OUTPUTS FLAGS\",\n  \"cases\": [";
  for (std::size_t k = 0; k < kCases.size(); ++k) {
    const Case& c = kCases[k];
    echo::cli::SpecOptions options;
    // The pack's cases were made when a group past the fp16 scale was poisoned, and their files
    // record that mode: they keep it unless their flags say otherwise.
    options.defaults.quant.overflow = echo::OverflowGroups::kPoison;
    CLI::App parser;
    echo::cli::add_spec_options(&parser, &options);
    try {
      parser.parse(c.flags, false);
    } catch (const CLI::ParseError& e) {
      std::fprintf(stderr, "%s: bad flags '%s': %s\n", c.name, c.flags, e.what());
      return 1;
    }
    echo::AllReduceSpec spec;
    if (echo::Status s = options.to_spec(&spec); !s.ok()) {
      std::fprintf(stderr, "%s: %s\n", c.name, s.message().c_str());
      return 1;
    }
    spec.dtype = c.dtype;
    spec.direction = c.direction;
    if (echo::Status s = spec.validate(c.ranks); !s.ok()) {
      std::fprintf(stderr, "%s: %s\n", c.name, s.message().c_str());
      return 1;
    }

    const std::size_t site_values = static_cast<std::size_t>(c.ranks) * c.count;
    std::vector<float> contributions(c.passes * c.sites * site_values);
    for (std::size_t pass = 0; pass < c.passes; ++pass) {
      for (std::size_t site = 0; site < c.sites; ++site) {
        for (int rank = 0; rank < c.ranks; ++rank) {
          const std::uint64_t seed = name_hash(c.name) + pass * 7919ull + site * 104729ull + rank * 15485863ull;
          fill(c.inputs, rank, c.ranks, c.count, seed,
               contributions.data() + (pass * c.sites + site) * site_values + rank * c.count);
        }
      }
    }
    const std::string trace_name = std::string(c.name) + ".trace.h5";
    const std::string outputs_name = std::string(c.name) + ".outputs.h5";
    if (!write_trace(dir + "/" + trace_name, c, contributions)) return 1;

    echo::TraceReader trace;
    std::vector<float> outputs;
    std::unique_ptr<echo::AllReduceBackend> reference = echo::make_cpu_backend(spec, c.ranks);
    echo::Status s = trace.open(dir + "/" + trace_name);
    if (s.ok()) s = echo::compute_outputs(trace, *reference, &outputs);
    std::string flags;
    std::string spec_json;
    for (const auto& [name, value] : all_options(spec)) {
      flags += (flags.empty() ? "--" : " --") + name + " " + value;
      spec_json += (spec_json.empty() ? "" : ", ") + echo::json_string(name) + ": " +
                   (is_number(name) ? value : echo::json_string(value));
    }
    if (s.ok()) {
      s = echo::write_outputs_file(dir + "/" + outputs_name, c.passes, c.sites, static_cast<std::size_t>(c.ranks),
                                   c.count, outputs.data(),
                                   {{"trace", trace_name}, {"case", c.name}, {"flags", flags}});
    }
    if (!s.ok()) {
      std::fprintf(stderr, "%s: %s\n", c.name, s.message().c_str());
      return 1;
    }
    manifest << (k ? "," : "") << "\n    {\n      \"name\": " << echo::json_string(c.name)
             << ",\n      \"covers\": " << echo::json_string(c.covers)
             << ",\n      \"trace\": " << echo::json_string(trace_name)
             << ",\n      \"outputs\": " << echo::json_string(outputs_name) << ",\n      \"ranks\": " << c.ranks
             << ", \"n\": " << c.count << ", \"passes\": " << c.passes << ", \"sites\": " << c.sites
             << ",\n      \"dtype\": " << echo::json_string(echo::dtype_name(c.dtype))
             << ", \"direction\": " << echo::json_string(echo::direction_name(c.direction))
             << ",\n      \"flags\": " << echo::json_string(flags) << ",\n      \"spec\": {" << spec_json
             << "},\n      \"sha256\": {\"trace\": \"@sha256:" << trace_name << "@\", \"outputs\": \"@sha256:"
             << outputs_name << "@\"}\n    }";
    std::printf("%-40s P = %d, n = %5zu, %-8s %-8s %s\n", c.name, c.ranks, c.count, echo::dtype_name(c.dtype),
                echo::direction_name(c.direction), c.flags);
  }
  manifest << "\n  ]\n}\n";
  if (echo::Status s = echo::write_text_file_atomically(dir + "/manifest.json", manifest.str()); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return 1;
  }
  return 0;
}
