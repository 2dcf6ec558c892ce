// echotk verify: the pack's reference outputs pass, and deliberately wrong implementations are
// caught with exit code 1 and the right diagnosis. The wrong outputs are made here, by the
// reference with one mistake (echo/alternatives.h) or by editing the right outputs.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "echo/alternatives.h"
#include "echo/hdf5_util.h"
#include "echo/outputs_file.h"
#include "echo/verify.h"
#include "run_echotk.h"
#include "test_util.h"

using echo::test::data_path;
using echo::test::Run;
using echo::test::run_echotk;
using echo::test::TempDir;

namespace {

// A case of data/conformance/ with its spec options (as in the generator's table).
struct PackCase {
  std::string name;
  std::string flags;
  echo::AllReduceSpec spec;  // dtype and direction from the trace

  std::string trace() const { return data_path("data/conformance/" + name + ".trace.h5"); }
  std::string outputs() const { return data_path("data/conformance/" + name + ".outputs.h5"); }
};

PackCase default_case() { return {"zero-aware-4bit-dual-bf16-p4", "", {}}; }

PackCase exact_case() {
  PackCase c{"exact-at-boundary-dual-bf16-p4", "--exact-max-count 1000", {}};
  c.spec.exact_max_count = 1000;
  return c;
}

PackCase one_sided_case() { return {"one-sided-4bit-dual-bf16-p4", "", {}}; }

// fp32 sums of 8 ranks on the exact path: where the summation order shows. On the quantized path
// the pushed terms have few significant bits, their fp32 sums are nearly always exact, and the
// gather's rounding hides the rest.
PackCase sum_order_case() {
  PackCase c{"exact-at-boundary-off-fp32-p8", "--exact-max-count 1024 --compensator off", {}};
  c.spec.exact_max_count = 1024;
  c.spec.compensator.mode = echo::CompensatorMode::kOff;
  return c;
}

// The pack's post-norm trace, in stream units or, with `stream` false, in site units.
PackCase post_norm_case(bool stream) {
  PackCase c{"stream-4bit-dual-local-bf16-p4",
             stream ? "--compensator-units stream --residual local" : "--residual local", {}};
  c.spec.compensator.residual = echo::ResidualMode::kLocal;
  if (stream) c.spec.compensator.units = echo::CompensatorUnits::kStream;
  return c;
}

// The pack's post-norm trace with profile 'sqrt' and clip 0.1.
PackCase profile_clip_case() {
  PackCase c{"stream-4bit-sqrt-clip-local-bf16-p4",
             "--compensator-units stream --residual local --compensator-profile sqrt --compensator-clip 0.1", {}};
  c.spec.compensator.residual = echo::ResidualMode::kLocal;
  c.spec.compensator.units = echo::CompensatorUnits::kStream;
  c.spec.compensator.profile = echo::CompensatorProfile::kSqrt;
  c.spec.compensator.clip = 0.1f;
  return c;
}

// The pack's post-norm trace with gains 'sum' (its /site_kind gives each site's kind).
PackCase sum_gains_case() {
  PackCase c{"stream-sum-4bit-sqrt-clip-local-bf16-p4",
             "--compensator-units stream --residual local --compensator-profile sqrt --compensator-clip 1 "
             "--compensator-gains sum",
             {}};
  c.spec.compensator.residual = echo::ResidualMode::kLocal;
  c.spec.compensator.units = echo::CompensatorUnits::kStream;
  c.spec.compensator.profile = echo::CompensatorProfile::kSqrt;
  c.spec.compensator.clip = 1.0f;
  c.spec.compensator.gains = echo::CompensatorGains::kSum;
  return c;
}

// The pack's compensator 'deficit' trace (clip 1, signed post-norm weights, both site kinds).
PackCase deficit_case() {
  PackCase c{"deficit-4bit-clip-local-bf16-p4",
             "--compensator deficit --compensator-units stream --residual local --compensator-gains sum "
             "--compensator-clip 1",
             {}};
  c.spec.compensator.mode = echo::CompensatorMode::kDeficit;
  c.spec.compensator.residual = echo::ResidualMode::kLocal;
  c.spec.compensator.units = echo::CompensatorUnits::kStream;
  c.spec.compensator.clip = 1.0f;
  c.spec.compensator.gains = echo::CompensatorGains::kSum;
  return c;
}

// A case of the pack on which `mistake` changes the outputs.
PackCase case_for(const std::string& mistake) {
  if (mistake == "stream-profile-ignored" || mistake == "stream-clip-ignored") return profile_clip_case();
  if (mistake == "stream-units-ignored") return post_norm_case(true);
  if (mistake == "stream-gains-ignored") return sum_gains_case();
  if (mistake == "deficit-correction-not-subtracted") return deficit_case();
  if (mistake == "stream-units-applied") return post_norm_case(false);
  if (mistake == "ranks-summed-in-reverse") return sum_order_case();
  if (mistake == "exact-path-missing") return exact_case();
  if (mistake == "naive-instead-of-zero-aware") return one_sided_case();
  return default_case();
}

// Outputs of the case's trace from the reference, or from the reference with `mistake`.
std::vector<float> outputs_of(const PackCase& c, const char* mistake, echo::TraceInfo* info = nullptr) {
  echo::TraceReader trace;
  BOOST_TEST_REQUIRE(trace.open(c.trace()).ok());
  echo::AllReduceSpec spec = c.spec;
  spec.dtype = trace.info().dtype;
  spec.direction = trace.info().direction;
  std::unique_ptr<echo::AllReduceBackend> backend;
  if (mistake == nullptr) {
    backend = echo::make_cpu_backend(spec, trace.info().ranks);
  } else {
    const echo::Alternative* alternative = echo::find_alternative(mistake);
    BOOST_TEST_REQUIRE(alternative != nullptr, mistake);
    BOOST_TEST_REQUIRE(alternative->applies(spec, trace.info()), mistake);
    backend = echo::make_alternative_backend(*alternative, spec, trace.info().ranks);
  }
  std::vector<float> outputs;
  BOOST_TEST_REQUIRE(echo::compute_outputs(trace, *backend, &outputs).ok());
  if (info != nullptr) *info = trace.info();
  return outputs;
}

std::string write_outputs(const TempDir& dir, const PackCase& c, const std::vector<float>& outputs) {
  echo::TraceReader trace;
  BOOST_TEST_REQUIRE(trace.open(c.trace()).ok());
  const echo::TraceInfo& t = trace.info();
  const std::string path = dir.file("outputs.h5");
  BOOST_TEST_REQUIRE(echo::write_outputs_file(path, t.passes, t.sites, static_cast<std::size_t>(t.ranks), t.count,
                                              outputs.data(), {})
                         .ok());
  return path;
}

Run run_verify(const PackCase& c, const std::string& outputs, const std::string& extra = "") {
  return run_echotk("verify " + c.trace() + " " + outputs + " " + c.flags + " " + extra);
}

// Outputs made by `mistake` are refused with exit 1, and verify names the mistake as reproduced.
void expect_caught(const PackCase& c, const char* mistake) {
  TempDir dir;
  const std::vector<float> right = outputs_of(c, nullptr);
  const std::vector<float> wrong = outputs_of(c, mistake);
  BOOST_TEST_REQUIRE(echo::test::first_bit_difference(right.data(), wrong.data(), right.size()) != -1,
                     mistake << " changes nothing on " << c.name);
  const Run r = run_verify(c, write_outputs(dir, c, wrong));
  BOOST_TEST(r.exit_code == 1, r.output);
  BOOST_TEST(r.output.find("DIFFERENT") != std::string::npos, r.output);
  BOOST_TEST(r.output.find(std::string(mistake) + ": reproduced bit for bit") != std::string::npos, r.output);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(verify)

BOOST_AUTO_TEST_CASE(reference_outputs_are_identical) {
  const PackCase c = default_case();
  const Run r = run_verify(c, c.outputs());
  BOOST_TEST(r.exit_code == 0, r.output);
  BOOST_TEST(r.output.find("IDENTICAL") != std::string::npos, r.output);
}

BOOST_AUTO_TEST_CASE(scale_rounded_to_nearest_is_caught) { expect_caught(default_case(), "scale-rounded-to-nearest"); }

BOOST_AUTO_TEST_CASE(ranks_summed_in_reverse_are_caught) { expect_caught(sum_order_case(), "ranks-summed-in-reverse"); }

BOOST_AUTO_TEST_CASE(compensator_never_reset_is_caught) {
  expect_caught(default_case(), "compensator-not-reset");
  // The first pass is right: only the later ones differ.
  TempDir dir;
  const PackCase c = default_case();
  const Run r = run_verify(c, write_outputs(dir, c, outputs_of(c, "compensator-not-reset")));
  BOOST_TEST(r.output.find("differing elements per pass: 0 ") != std::string::npos, r.output);
}

BOOST_AUTO_TEST_CASE(exact_path_missing_is_caught) { expect_caught(exact_case(), "exact-path-missing"); }

BOOST_AUTO_TEST_CASE(naive_blend_is_caught) { expect_caught(one_sided_case(), "naive-instead-of-zero-aware"); }

// Every alternative in the table is caught on some case of the pack it applies to.
BOOST_AUTO_TEST_CASE(every_alternative_is_caught_somewhere) {
  for (const echo::Alternative& a : echo::alternatives()) {
    BOOST_TEST_CONTEXT(a.name) { expect_caught(case_for(a.name), a.name); }
  }
}

BOOST_AUTO_TEST_CASE(one_rank_different_is_caught) {
  TempDir dir;
  const PackCase c = default_case();
  echo::TraceInfo t;
  std::vector<float> outputs = outputs_of(c, nullptr, &t);
  // One bf16 step more at pass 1, site 0, rank 2, element 300.
  const std::size_t at = ((1 * t.sites + 0) * t.ranks + 2) * t.count + 300;
  std::uint32_t bits;
  std::memcpy(&bits, &outputs[at], sizeof bits);
  bits += 0x10000;
  std::memcpy(&outputs[at], &bits, sizeof bits);
  const Run r = run_verify(c, write_outputs(dir, c, outputs));
  BOOST_TEST(r.exit_code == 1, r.output);
  BOOST_TEST(r.output.find("DIFFERENT: 1 of 16000") != std::string::npos, r.output);
  BOOST_TEST(r.output.find("ranks-differ: ") != std::string::npos, r.output);
  BOOST_TEST(r.output.find("rank 2 differs from rank 0 at 1 element") != std::string::npos, r.output);
  BOOST_TEST(r.output.find("ranks 0, 1, 3 match the reference") != std::string::npos, r.output);
  // The first difference names its place: pass 1, site 0, rank 2, element 300, group 2.
  BOOST_TEST(r.output.find("     1     0     2      300      2") != std::string::npos, r.output);
  BOOST_TEST(r.output.find("reproduced") == std::string::npos, r.output);
}

// A NaN is compared as NaN: another sign or payload is noted, not counted as a difference.
BOOST_AUTO_TEST_CASE(nans_are_compared_as_the_canonical_nan) {
  TempDir dir;
  const PackCase c{"nonfinite-4bit-dual-bf16-p4", "", {}};
  std::vector<float> outputs = outputs_of(c, nullptr);
  std::size_t nans = 0;
  for (float& v : outputs) {
    if (v != v) {
      const std::uint32_t negative_nan = 0xFFC00001u;
      std::memcpy(&v, &negative_nan, sizeof v);
      ++nans;
    }
  }
  BOOST_TEST_REQUIRE(nans > 0);
  const Run r = run_verify(c, write_outputs(dir, c, outputs));
  BOOST_TEST(r.exit_code == 0, r.output);
  BOOST_TEST(r.output.find(std::to_string(nans) + " received NaNs are not the canonical NaN") != std::string::npos,
             r.output);
}

BOOST_AUTO_TEST_CASE(json_names_the_diagnosis) {
  TempDir dir;
  const PackCase c = default_case();
  const Run r = run_verify(c, write_outputs(dir, c, outputs_of(c, "scale-rounded-to-nearest")), "--json");
  BOOST_TEST(r.exit_code == 1, r.output);
  BOOST_TEST(r.output.find("\"identical\": false") != std::string::npos, r.output);
  BOOST_TEST(r.output.find("{\"name\": \"scale-rounded-to-nearest\", \"reproduced\": true") != std::string::npos,
             r.output);
  const Run same = run_verify(c, c.outputs(), "--json");
  BOOST_TEST(same.exit_code == 0, same.output);
  BOOST_TEST(same.output.find("\"identical\": true") != std::string::npos, same.output);
}

// Outputs given in the trace's dtype, as raw bf16 bits in 16-bit integers, are compared as such.
BOOST_AUTO_TEST_CASE(outputs_in_the_trace_dtype_are_accepted) {
  TempDir dir;
  const PackCase c = default_case();
  echo::TraceInfo t;
  const std::vector<float> outputs = outputs_of(c, nullptr, &t);
  std::vector<std::uint16_t> bits(outputs.size());
  for (std::size_t i = 0; i < outputs.size(); ++i) bits[i] = echo::float_to_bfloat16_bits(outputs[i]);
  bits[5] ^= 1;  // one element one step off
  const std::string path = dir.file("bits.h5");
  {
    H5::H5File f(path, H5F_ACC_TRUNC);
    const hsize_t dims[4] = {t.passes, t.sites, static_cast<hsize_t>(t.ranks), t.count};
    H5::DataSet d = f.createDataSet("/outputs", H5::PredType::STD_U16LE, H5::DataSpace(4, dims));
    d.write(bits.data(), H5::PredType::NATIVE_UINT16);
  }
  const Run r = run_verify(c, path);
  BOOST_TEST(r.exit_code == 1, r.output);
  BOOST_TEST(r.output.find("bfloat16 bits (16-bit integers)") != std::string::npos, r.output);
  BOOST_TEST(r.output.find("DIFFERENT: 1 of") != std::string::npos, r.output);
  BOOST_TEST(r.output.find("(0x") != std::string::npos, r.output);
}

BOOST_AUTO_TEST_CASE(replay_outputs_feed_verify) {
  TempDir dir;
  const PackCase c = exact_case();
  const std::string result = dir.file("result.h5");
  const Run replay = run_echotk("replay " + c.trace() + " --out " + result + " --save-outputs --quiet " + c.flags);
  BOOST_TEST_REQUIRE(replay.exit_code == 0, replay.output);
  BOOST_TEST(run_verify(c, result).exit_code == 0);
  // Verified with other options than it was made with: the recorded configuration says so.
  const Run other = run_verify({c.name, "--exact-max-count 999", {}}, result);
  BOOST_TEST(other.exit_code == 1, other.output);
  BOOST_TEST(other.output.find("spec-options-differ: ") != std::string::npos, other.output);
  BOOST_TEST(other.output.find("exact_max_count 1000 (verify: 999)") != std::string::npos, other.output);
  BOOST_TEST(other.output.find("exact-path-taken: reproduced bit for bit") != std::string::npos, other.output);
}

BOOST_AUTO_TEST_CASE(bad_outputs_are_refused) {
  TempDir dir;
  const PackCase c = default_case();
  // The outputs of another case: the shape does not fit.
  const Run shape = run_verify(c, data_path("data/conformance/exact-above-boundary-dual-bf16-p4.outputs.h5"));
  BOOST_TEST(shape.exit_code == 2, shape.output);
  BOOST_TEST(shape.output.find("'/outputs' has shape [2, 2, 4, 1001] but the trace needs [2, 2, 4, 1000] (n 1001 != 1000)") !=
                 std::string::npos,
             shape.output);
  // A file without /outputs, a missing file, and a float64 dataset.
  const Run missing = run_verify(c, c.trace());
  BOOST_TEST(missing.exit_code == 2, missing.output);
  BOOST_TEST(missing.output.find("/outputs") != std::string::npos, missing.output);
  BOOST_TEST(run_verify(c, dir.file("none.h5")).exit_code == 2);
  const std::string wide = dir.file("f64.h5");
  {
    H5::H5File f(wide, H5F_ACC_TRUNC);
    const hsize_t dims[4] = {2, 2, 4, 1000};
    f.createDataSet("/outputs", H5::PredType::IEEE_F64LE, H5::DataSpace(4, dims));
  }
  const Run f64 = run_verify(c, wide);
  BOOST_TEST(f64.exit_code == 2, f64.output);
  BOOST_TEST(f64.output.find("elements of 8 bytes") != std::string::npos, f64.output);
}

BOOST_AUTO_TEST_SUITE_END()
