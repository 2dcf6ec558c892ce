// echotk end to end: --help everywhere, replay and quantize outputs, and bad input refused with
// exit code 2, a message naming the problem, and no file left behind.
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "echo/dtype.h"
#include "echo/hdf5_util.h"
#include "echo/quantizer.h"
#include "run_echotk.h"
#include "test_util.h"

namespace fs = std::filesystem;
using echo::test::data_path;
using echo::test::Run;
using echo::test::run_echotk;
using echo::test::TempDir;

namespace {

// Printable ASCII and line ends only: what a message may send to a terminal.
bool printable_text(const std::string& text) {
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte != '\n' && (byte < 0x20 || byte >= 0x7f)) return false;
  }
  return true;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli)

BOOST_AUTO_TEST_CASE(every_subcommand_has_help) {
  for (const char* command : {"replay", "quantize", "verify", "ppl", "capture", "prove", "bench"}) {
    const Run r = run_echotk(std::string(command) + " --help");
    BOOST_TEST(r.exit_code == 0, command << ": " << r.output);
    BOOST_TEST(r.output.find("Usage") != std::string::npos, command);
  }
  const Run top = run_echotk("--help");
  BOOST_TEST(top.exit_code == 0);
  BOOST_TEST(top.output.find("replay") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(unknown_option_is_bad_input) {
  const Run r = run_echotk("replay " + data_path("tests/data/good_small.h5") + " --out /dev/null --bits 3x");
  BOOST_TEST(r.exit_code == 2);
}

BOOST_AUTO_TEST_CASE(replay_writes_the_documented_datasets) {
  TempDir dir;
  const std::string out = dir.file("result.h5");
  const Run r = run_echotk("replay " + data_path("tests/data/good_small.h5") + " --out " + out +
                           " --save-outputs --quiet");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.output);
  BOOST_TEST(r.output.find("max_t ||S_t||") != std::string::npos);
  H5::H5File file;
  BOOST_TEST_REQUIRE(echo::h5::open_read(out, &file).ok());
  const std::pair<const char*, std::vector<hsize_t>> expected[] = {
      {"/outputs", {2, 3, 4, 300}},      {"/net_error", {2, 3, 300}},
      {"/injected_error", {2, 3, 300}},  {"/partial_sum_norm", {2, 3}},
      {"/injected_norm", {2, 3}}};
  for (const auto& [name, dims] : expected) {
    H5::DataSet ds;
    std::vector<hsize_t> got;
    BOOST_TEST_REQUIRE(echo::h5::dataset_shape(file, out, name, &ds, &got).ok(), name);
    BOOST_TEST(got == dims, name);
  }
  for (const char* attr : {"q", "mu_w", "tau_2", "max_partial_sum", "bound"}) {
    BOOST_TEST(file.attrExists(attr), attr);
  }
  // The run is deterministic: a second replay writes the same outputs.
  const std::string again = dir.file("again.h5");
  BOOST_TEST_REQUIRE(run_echotk("replay " + data_path("tests/data/good_small.h5") + " --out " + again +
                                " --save-outputs --quiet").exit_code == 0);
  H5::H5File file2;
  BOOST_TEST_REQUIRE(echo::h5::open_read(again, &file2).ok());
  std::vector<float> a(2 * 3 * 4 * 300), b(a.size());
  echo::h5::read_block(file.openDataSet("/outputs"), {0, 0, 0, 0}, {2, 3, 4, 300}, H5::PredType::NATIVE_FLOAT, a.data());
  echo::h5::read_block(file2.openDataSet("/outputs"), {0, 0, 0, 0}, {2, 3, 4, 300}, H5::PredType::NATIVE_FLOAT, b.data());
  BOOST_TEST(echo::test::first_bit_difference(a.data(), b.data(), a.size()) == -1);
}

// --state-dtype bf16 reaches the reference (the state is rounded, so outputs change) and the
// result file records it.
BOOST_AUTO_TEST_CASE(replay_with_bf16_compensator_state) {
  TempDir dir;
  std::vector<float> outputs[2];
  int k = 0;
  for (const char* state : {"fp32", "bf16"}) {
    const std::string out = dir.file(std::string("result-") + state + ".h5");
    const Run r = run_echotk("replay " + data_path("tests/data/good_small.h5") + " --out " + out +
                             " --save-outputs --quiet --state-dtype " + state);
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.output);
    H5::H5File file;
    BOOST_TEST_REQUIRE(echo::h5::open_read(out, &file).ok());
    std::optional<std::string> recorded;
    BOOST_TEST_REQUIRE(echo::h5::read_string_attribute(file, out, "state_dtype", &recorded).ok());
    BOOST_TEST_REQUIRE(recorded.has_value());
    BOOST_TEST(*recorded == (k == 0 ? "float32" : "bfloat16"));
    outputs[k].resize(2 * 3 * 4 * 300);
    echo::h5::read_block(file.openDataSet("/outputs"), {0, 0, 0, 0}, {2, 3, 4, 300}, H5::PredType::NATIVE_FLOAT,
                         outputs[k].data());
    ++k;
  }
  BOOST_TEST(echo::test::first_bit_difference(outputs[0].data(), outputs[1].data(), outputs[0].size()) != -1);
  const Run bad = run_echotk("replay " + data_path("tests/data/good_small.h5") + " --out " +
                             dir.file("bad.h5") + " --state-dtype fp16");
  BOOST_TEST(bad.exit_code == 2, bad.output);
  BOOST_TEST(!fs::exists(dir.file("bad.h5")));
}

// replay --spec-file: the JSON of echotk.Spec.to_json() selects the same all-reduce as the options;
// options given beside it win; an unknown key or a bad value is refused naming the key.
BOOST_AUTO_TEST_CASE(replay_reads_a_spec_file) {
  TempDir dir;
  const std::string trace = data_path("tests/data/good_small.h5");
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir.file(name)) << text;
    return dir.file(name);
  };
  auto outputs = [&](const std::string& out) {
    H5::H5File file;
    BOOST_TEST_REQUIRE(echo::h5::open_read(out, &file).ok());
    std::vector<float> v(2 * 3 * 4 * 300);
    echo::h5::read_block(file.openDataSet("/outputs"), {0, 0, 0, 0}, {2, 3, 4, 300}, H5::PredType::NATIVE_FLOAT,
                         v.data());
    return v;
  };
  const std::string spec = write("spec.json", R"({"bits": 8, "residual": "local", "eta": 0.5, "state_dtype": "bfloat16"})");
  const Run by_file = run_echotk("replay " + trace + " --out " + dir.file("file.h5") + " --save-outputs --quiet "
                                 "--spec-file " + spec);
  BOOST_TEST_REQUIRE(by_file.exit_code == 0, by_file.output);
  const Run by_flags = run_echotk("replay " + trace + " --out " + dir.file("flags.h5") + " --save-outputs --quiet "
                                  "--bits 8 --residual local --eta 0.5 --state-dtype bf16");
  BOOST_TEST_REQUIRE(by_flags.exit_code == 0, by_flags.output);
  const std::vector<float> a = outputs(dir.file("file.h5")), b = outputs(dir.file("flags.h5"));
  BOOST_TEST(echo::test::first_bit_difference(a.data(), b.data(), a.size()) == -1);
  const Run overridden = run_echotk("replay " + trace + " --out " + dir.file("four.h5") + " --quiet --spec-file " +
                                    spec + " --bits 4");
  BOOST_TEST(overridden.output.find("4-bit") != std::string::npos, overridden.output);

  const std::pair<std::string, std::string> bad[] = {
      {R"({"bitz": 4})", "unknown key 'bitz'"},
      {R"({"bits": 9})", "key 'bits': bits must be in [2, 8], got 9"},
      {R"({"bits": "4"})", "key 'bits': bits must be an integer"},
      {R"({"overflow_groups": "saturate"})", "overflow_groups must be one of wide, poison, got 'saturate'"},
      {R"([4])", "one JSON object"},
      {R"({"bits": )", "not JSON"},
  };
  for (const auto& [text, message] : bad) {
    const Run r = run_echotk("replay " + trace + " --out " + dir.file("bad.h5") + " --quiet --spec-file " +
                             write("bad.json", text));
    BOOST_TEST(r.exit_code == 2, text << ": " << r.output);
    BOOST_TEST(r.output.find(message) != std::string::npos, text << ": " << r.output);
    BOOST_TEST(!fs::exists(dir.file("bad.h5")));
  }
}

// compare --state-dtype reaches every compensated setting of the grid: the header names the type,
// the off row is the same and the compensated rows are not (bf16 state rounds every update).
BOOST_AUTO_TEST_CASE(compare_with_bf16_compensator_state) {
  std::string rows[2];
  int k = 0;
  for (const char* state : {"fp32", "bf16"}) {
    const Run r = run_echotk("compare --synthetic --depth 24 --passes 2 --quantizers zero-aware --gains 0.75 "
                             "--state-dtype " + std::string(state));
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.output);
    BOOST_TEST(r.output.find(k == 0 ? "float32 compensator state" : "bfloat16 compensator state") != std::string::npos,
               r.output);
    rows[k++] = r.output;
  }
  auto row = [](const std::string& out, const std::string& setting) {
    const std::size_t at = out.find("zero-aware  " + setting + " ");
    BOOST_TEST_REQUIRE(at != std::string::npos, setting + " missing in:\n" + out);
    return out.substr(at, out.find('\n', at) - at);
  };
  BOOST_TEST(row(rows[0], "off") == row(rows[1], "off"));
  BOOST_TEST(row(rows[0], "dual/local/0.75") != row(rows[1], "dual/local/0.75"));
  BOOST_TEST(row(rows[0], "dual/global/0.75") != row(rows[1], "dual/global/0.75"));
  BOOST_TEST(run_echotk("compare --synthetic --depth 4 --state-dtype fp16").exit_code == 2);
}

BOOST_AUTO_TEST_CASE(h5py_files_with_fixed_length_strings_load) {
  TempDir dir;
  const Run r = run_echotk("replay " + data_path("tests/data/good_fixed_strings.h5") + " --out " +
                           dir.file("r.h5") + " --quiet");
  BOOST_TEST(r.exit_code == 0, r.output);
  BOOST_TEST(r.output.find("float16") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(bad_traces_are_refused_with_a_named_reason) {
  const std::pair<const char*, const char*> cases[] = {
      {"bad_missing_contributions.h5", "'/contributions' is missing"},
      {"bad_format.h5", "'format' is 'something-else'"},
      {"bad_version.h5", "unsupported version 2"},
      {"bad_ranks_mismatch.h5", "attribute 'ranks' says 3"},
      {"bad_rank3_dataset.h5", "3 dimensions"},
      {"bad_dtype_attr.h5", "'int8'"},
      {"bad_float64.h5", "must be float32"},
      {"bad_no_direction.h5", "'direction' is missing"},
      {"bad_nonfinite.h5", "pass 1, site 2, rank 3, index 17"},
      {"bad_not_hdf5.h5", "not an HDF5 file"},
      {"bad_negative_tokens.h5", "attribute 'tokens' must be >= 1, got -1"},
      {"bad_tokens_hidden.h5", "tokens x hidden = 4 x 70 do not match n = 300"},
      {"bad_site_kind.h5", "'/site_kind' holds 300 at index 1"},
      {"bad_hidden_states_shape.h5", "must have shape [passes, sites + 1, n] = [2, 4, 300]"},
      {"bad_ranks_range.h5", "'ranks' is 9, must be in [1, 8]"},
      {"bad_declared_size.h5", "declare 16000000000000 bytes of float32 data"},
      {"bad_format_bytes.h5", "'format' is 'echo\\x1b[31m-trace\\xff'"},
      {"does_not_exist.h5", "cannot read the file"}};
  for (const auto& [name, words] : cases) {
    TempDir dir;
    const Run r = run_echotk("replay " + data_path(std::string("tests/data/") + name) + " --out " +
                             dir.file("out.h5") + " --quiet");
    BOOST_TEST(r.exit_code == 2, name << ": " << r.output);
    BOOST_TEST(r.output.find(words) != std::string::npos, name << ": " << r.output);
    BOOST_TEST(r.output.find(name) != std::string::npos, name << " is not named: " << r.output);
    BOOST_TEST(printable_text(r.output), name << ": unprintable bytes in " << r.output);
    BOOST_TEST(dir.entries() == 0u, name << ": a file was left behind");
  }
}

// Files on which HDF5 itself crashes or loops (found by randomly changing bytes of valid traces,
// tests/data/mutate_traces.py): every command that reads a trace refuses them with exit 2, naming
// the file, because it reads the file in a child process first.
BOOST_AUTO_TEST_CASE(damaged_traces_are_refused_by_every_command) {
  const std::pair<const char*, const char*> cases[] = {
      // A variable-length string attribute whose global-heap reference is damaged: H5HG_read
      // copies (size_t)-1 bytes under H5Aread.
      {"damaged_vlen_heap.h5", "HDF5 crashed reading it (signal 11"},
      // A variable-length string whose length is damaged: HDF5 allocates and clears that many
      // bytes (minutes); the check's 1 GiB header memory limit makes the allocation fail.
      {"damaged_vlen_length.h5", "attribute 'format' cannot be read (damaged string storage)"}};
  for (const auto& [name, words] : cases) {
    const std::string trace = data_path(std::string("tests/data/") + name);
    TempDir dir;
    for (const std::string& command : {"replay " + trace + " --out " + dir.file("out.h5") + " --quiet",
                                       "compare " + trace, "prove --trace " + trace}) {
      const Run r = run_echotk(command);
      BOOST_TEST(r.exit_code == 2, command << ": " << r.output);
      BOOST_TEST(r.output.find(words) != std::string::npos, command << ": " << r.output);
      BOOST_TEST(r.output.find(name) != std::string::npos, command << ": the file is not named: " << r.output);
      BOOST_TEST(printable_text(r.output), command << ": unprintable bytes in " << r.output);
    }
    BOOST_TEST(dir.entries() == 0u, name << ": a file was left behind");
  }
}

BOOST_AUTO_TEST_CASE(nonfinite_replay_can_be_allowed) {
  TempDir dir;
  const Run r = run_echotk("replay " + data_path("tests/data/bad_nonfinite.h5") + " --out " +
                           dir.file("out.h5") + " --allow-nonfinite --quiet");
  BOOST_TEST(r.exit_code == 0, r.output);
  BOOST_TEST(r.output.find("poisoned groups") != std::string::npos, r.output);
}

BOOST_AUTO_TEST_CASE(quantize_matches_the_library) {
  TempDir dir;
  const std::string in = dir.file("x.h5"), out = dir.file("q.h5");
  const std::vector<float> x = echo::test::activations(1000, 4u, 3.0f, 0.5f);
  {
    H5::H5File f(in, H5F_ACC_TRUNC);
    H5::DataSet ds = echo::h5::create_dataset(f, "/x", H5::PredType::IEEE_F32LE, {1000}, {1000}, 0);
    echo::h5::write_block(ds, {0}, {1000}, H5::PredType::NATIVE_FLOAT, x.data());
  }
  const Run r = run_echotk("quantize " + in + " " + out + " --bits 4 --group 64 --quantizer naive");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.output);
  echo::QuantSpec spec{4, 64, echo::QuantizerKind::kNaive};
  std::vector<float> expected(1000), got(1000), scale(16);
  echo::quantize_dequantize(spec, x.data(), 1000, expected.data());
  H5::H5File f;
  BOOST_TEST_REQUIRE(echo::h5::open_read(out, &f).ok());
  echo::h5::read_block(f.openDataSet("/dequantized"), {0}, {1000}, H5::PredType::NATIVE_FLOAT, got.data());
  echo::h5::read_block(f.openDataSet("/scale"), {0}, {16}, H5::PredType::NATIVE_FLOAT, scale.data());
  BOOST_TEST(echo::test::first_bit_difference(expected.data(), got.data(), 1000) == -1);
  BOOST_TEST(scale[3] > 0.0f);
  std::vector<std::uint8_t> codes(1000);
  echo::h5::read_block(f.openDataSet("/codes"), {0}, {1000}, H5::PredType::NATIVE_UINT8, codes.data());
  BOOST_TEST(*std::max_element(codes.begin(), codes.end()) == 15);
}

BOOST_AUTO_TEST_CASE(quantize_refuses_bad_input) {
  TempDir dir;
  const std::string in = dir.file("x.h5");
  {
    H5::H5File f(in, H5F_ACC_TRUNC);
    std::vector<double> y(10, 1.0);
    H5::DataSet ds = echo::h5::create_dataset(f, "/y", H5::PredType::IEEE_F64LE, {10}, {10}, 0);
    echo::h5::write_block(ds, {0}, {10}, H5::PredType::NATIVE_DOUBLE, y.data());
  }
  Run r = run_echotk("quantize " + in + " " + dir.file("q.h5"));
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(r.output.find("'/x' is missing") != std::string::npos, r.output);
  r = run_echotk("quantize " + in + " " + dir.file("q.h5") + " --group 100");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(r.output.find("group") != std::string::npos, r.output);
  BOOST_TEST(!fs::exists(dir.file("q.h5")));
}

// echotk prove: a trace named with --trace that does not open is bad input (exit 2); one whose data
// holds a non-finite value fails its data check instead of passing the theorems on it.
BOOST_AUTO_TEST_CASE(prove_refuses_missing_and_nonfinite_traces) {
  TempDir dir;
  Run r = run_echotk("prove --trace " + dir.file("missing.h5"));
  BOOST_TEST(r.exit_code == 2, r.output);
  BOOST_TEST(r.output.find("missing.h5") != std::string::npos, r.output);
  r = run_echotk("prove --trace " + data_path("tests/data/bad_nonfinite.h5"));
  BOOST_TEST(r.exit_code == 1, r.output);
  BOOST_TEST(r.output.find("trace.bad_nonfinite.data") != std::string::npos, r.output);
  BOOST_TEST(r.output.find("non-finite value nan in '/contributions' at pass 1, site 2, rank 3, index 17") != std::string::npos, r.output);
  BOOST_TEST(r.output.find("trace.bad_nonfinite.eq21") == std::string::npos, r.output);
}

// Sizes of zero for the synthetic network are bad input naming the option (a depth of 0 crashed).
BOOST_AUTO_TEST_CASE(compare_refuses_empty_synthetic_networks) {
  for (const char* option : {"--depth", "--width", "--tokens", "--passes"}) {
    const Run r = run_echotk(std::string("compare --synthetic ") + option + " 0");
    BOOST_TEST(r.exit_code == 2, option << ": " << r.output);
    BOOST_TEST(r.output.find(option) != std::string::npos, option << ": " << r.output);
  }
}

// An output path that names the input file is refused before anything is written (the rename
// that completes the write would replace the input), and the input is left as it was.
BOOST_AUTO_TEST_CASE(outputs_never_replace_their_input) {
  TempDir dir;
  const std::string trace = dir.file("trace.h5");
  fs::copy_file(data_path("tests/data/good_small.h5"), trace);
  const auto size = fs::file_size(trace);
  for (const std::string& args : {"replay " + trace + " --out " + trace, "compare " + trace + " --json " + trace,
                                  "quantize " + trace + " " + trace}) {
    const Run r = run_echotk(args);
    BOOST_TEST(r.exit_code == 2, args << ": " << r.output);
    BOOST_TEST(r.output.find("is the input file") != std::string::npos, args << ": " << r.output);
    BOOST_TEST(fs::file_size(trace) == size, args);
  }
  const Run again = run_echotk("replay " + trace + " --out " + dir.file("result.h5"));
  BOOST_TEST(again.exit_code == 0, again.output);
}

// The CUDA backend's limits (4 or 8 bits, the owner algorithm) are bad options: exit 2 before any
// GPU work, with or without a GPU and whether or not this echotk has CUDA.
BOOST_AUTO_TEST_CASE(replay_cuda_backend_refuses_what_it_does_not_implement) {
  TempDir dir;
  Run r = run_echotk("replay " + data_path("tests/data/good_small.h5") + " --out " + dir.file("r.h5") +
                     " --backend cuda --bits 3");
  BOOST_TEST(r.exit_code == 2, r.output);
  BOOST_TEST(r.output.find("--backend cuda: the CUDA path implements bits 4 and 8, got 3") != std::string::npos,
             r.output);
  r = run_echotk("replay " + data_path("tests/data/good_small.h5") + " --out " + dir.file("r.h5") +
                 " --backend cuda --algorithm ring");
  BOOST_TEST(r.exit_code == 2, r.output);
  BOOST_TEST(r.output.find("the CUDA path implements the owner algorithm only, got ring") != std::string::npos,
             r.output);
  BOOST_TEST(dir.entries() == 0u);
}

// The emulation backend's limits (the owner algorithm, no outliers sent exactly) are bad options
// too: exit 2 before any GPU work, naming the limit (or, in an echotk without CUDA, that).
BOOST_AUTO_TEST_CASE(replay_emulate_backend_refuses_what_it_does_not_implement) {
  TempDir dir;
  const std::pair<const char*, const char*> cases[] = {
      {" --algorithm ring", "--backend emulate: the emulation implements the owner algorithm only, not ring"},
      {" --outliers 1", "--backend emulate: the CUDA path implements outliers 0 only"}};
  for (const auto& [options, words] : cases) {
    const Run r = run_echotk("replay " + data_path("tests/data/good_small.h5") + " --out " + dir.file("r.h5") +
                             " --backend emulate" + options);
    BOOST_TEST(r.exit_code == 2, r.output);
    BOOST_TEST((r.output.find(words) != std::string::npos ||
                r.output.find("--backend emulate: this echotk was built without CUDA") != std::string::npos),
               options << ": " << r.output);
  }
  BOOST_TEST(dir.entries() == 0u);
}

// The transport options (docs/numerics.md 2.4-2.6) reach replay and compare, are recorded in the
// result and change the outputs; outliers are refused by the CUDA backend, and every option when
// out of range.
BOOST_AUTO_TEST_CASE(transport_options_reach_replay_and_compare) {
  TempDir dir;
  const std::string trace = data_path("tests/data/good_small.h5");
  std::vector<float> outputs[2];
  int k = 0;
  for (const char* options : {"", " --outliers 2 --rotation hadamard --overflow-groups wide"}) {
    const std::string out = dir.file("r" + std::to_string(k) + ".h5");
    const Run r = run_echotk("replay " + trace + " --out " + out + " --save-outputs --quiet" + options);
    BOOST_TEST_REQUIRE(r.exit_code == 0, r.output);
    H5::H5File file;
    BOOST_TEST_REQUIRE(echo::h5::open_read(out, &file).ok());
    std::optional<std::string> rotation;
    BOOST_TEST_REQUIRE(echo::h5::read_string_attribute(file, out, "rotation", &rotation).ok());
    BOOST_TEST_REQUIRE(rotation.has_value());
    BOOST_TEST(*rotation == (k == 0 ? "none" : "hadamard"));
    outputs[k].resize(2 * 3 * 4 * 300);
    echo::h5::read_block(file.openDataSet("/outputs"), {0, 0, 0, 0}, {2, 3, 4, 300}, H5::PredType::NATIVE_FLOAT,
                         outputs[k].data());
    ++k;
  }
  BOOST_TEST(echo::test::first_bit_difference(outputs[0].data(), outputs[1].data(), outputs[0].size()) != -1);
  Run r = run_echotk("replay " + trace + " --out " + dir.file("c.h5") + " --backend cuda --outliers 1");
  BOOST_TEST(r.exit_code == 2, r.output);
  BOOST_TEST(r.output.find("the CUDA path implements outliers 0 only") != std::string::npos, r.output);
  r = run_echotk("replay " + trace + " --out " + dir.file("c.h5") + " --outliers 3");
  BOOST_TEST(r.exit_code == 2, r.output);
  r = run_echotk("replay " + trace + " --out " + dir.file("c.h5") + " --rotation fourier");
  BOOST_TEST(r.exit_code == 2, r.output);
  BOOST_TEST(!fs::exists(dir.file("c.h5")));
  r = run_echotk("compare --synthetic --depth 8 --passes 1 --quantizers zero-aware --gains 0.75 --outliers 1 "
                 "--rotation hadamard");
  BOOST_TEST(r.exit_code == 0, r.output);
}

// compare --json escapes what it copies into strings (a trace path with a quote in it).
BOOST_AUTO_TEST_CASE(compare_json_escapes_strings) {
  TempDir dir;
  const std::string trace = dir.file("q\"x.h5");
  fs::copy_file(data_path("tests/data/good_small.h5"), trace);
  const std::string json = dir.file("c.json");
  const Run r = run_echotk("compare '" + trace + "' --json " + json + " --gains 0.75 --quantizers zero-aware");
  BOOST_TEST_REQUIRE(r.exit_code == 0, r.output);
  std::ifstream in(json);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BOOST_TEST(text.find("q\\\"x.h5\"") != std::string::npos, text.substr(0, 300));
}

#ifdef ECHO_HAVE_MODEL
// ppl and capture check their files before loading the model: an output that is an input (the
// text or the model), an output that is a folder, a text that does not exist, and a window count
// of 0 are bad input named in the message (no model is needed to see it).
BOOST_AUTO_TEST_CASE(ppl_and_capture_check_their_files_first) {
  TempDir dir;
  const std::string text = dir.file("text.txt");
  {
    std::ofstream(text) << "Call me Ishmael.\n";
  }
  const std::string model = " --model " + dir.file("no-model.gguf");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"ppl --text " + text + " --csv " + text + model, "is the input file"},
      {"capture --text " + text + " --out " + text + model, "is the input file"},
      {"ppl --text " + text + " --csv " + dir.path.string() + model, "not a regular file"},
      {"capture --text " + text + " --out " + dir.file("missing/t.h5") + model, "no directory"},
      {"ppl --text " + dir.file("none.txt") + model, "none.txt"},
      {"ppl --text " + text + " --windows 0" + model, "--windows"},
      {"capture --text " + text + " --passes 0 --out " + dir.file("t.h5") + model, "--passes"},
  };
  for (const auto& [args, named] : cases) {
    const Run r = run_echotk(args);
    BOOST_TEST(r.exit_code == 2, args << ": " << r.output);
    BOOST_TEST(r.output.find(named) != std::string::npos, args << ": " << r.output);
    BOOST_TEST(r.output.find("no-model.gguf") == std::string::npos, args << ": " << r.output);
    BOOST_TEST(r.output.size() < 400u, args << ": " << r.output);
  }
  std::ifstream in(text);
  std::string first;
  std::getline(in, first);
  BOOST_TEST(first == "Call me Ishmael.");
}
#endif

#ifdef ECHO_HAVE_CUDA
// echotk bench refuses bad options before it looks for a GPU (so also on machines without one),
// naming what is wrong, and writes no --markdown or --csv file.
BOOST_AUTO_TEST_CASE(bench_refuses_bad_options_before_the_run) {
  TempDir dir;
  const std::string md = " --markdown " + dir.file("table.md") + " --csv " + dir.file("rows.csv");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--rows echo4 echo5" + md, "echo5"},
      {"--ranks 9" + md, "--ranks"},
      {"-b 3" + md, "--min-bytes"},
      {"-b 4096 -e 2048" + md, "--max-bytes is below --min-bytes"},
      {"--graph 20 --rows echo4-comp-local" + md, "echo4-comp-local runs a matmul"},
      {"--settle-below 1.5" + md, "--settle-below"},
      {"--markdown " + dir.file("missing/table.md"), "no directory"},
      {"--markdown " + dir.path.string(), "not a regular file"},
      {"--csv " + dir.file("missing/rows.csv"), "--csv " + dir.file("missing/rows.csv") + ": no directory"},
      {"--csv " + dir.path.string(), "not a regular file"},
  };
  for (const auto& [args, named] : cases) {
    const Run r = run_echotk("bench " + args);
    BOOST_TEST(r.exit_code == 2, args << ": " << r.output);
    BOOST_TEST(r.output.find(named) != std::string::npos, args << ": " << r.output);
  }
  BOOST_TEST(dir.entries() == 0u);
}

// --csv appends only to a file of this version's columns: a file an earlier echotk bench wrote
// (its #wrong counted what #differ counts now) is refused before the run and left as it was.
BOOST_AUTO_TEST_CASE(bench_refuses_a_csv_of_older_columns) {
  TempDir dir;
  const std::string csv = dir.file("old.csv");
  const std::string old_rows =
      "row,ranks,mode,size,count,type,time,algbw,busbw,#wrong,ratio_vs_nccl,rel_error\n"
      "nccl-bf16,2,plain,65536,32768,bf16,10.7,6.1,6.1,0,1.00,0.001787\n";
  std::ofstream(csv) << old_rows;
  const Run r = run_echotk("bench --csv " + csv);
  BOOST_TEST(r.exit_code == 2, r.output);
  BOOST_TEST(r.output.find("--csv " + csv + ": its columns are not this version's") != std::string::npos, r.output);
  std::ifstream in(csv);
  BOOST_TEST(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()) == old_rows);
}
#endif

BOOST_AUTO_TEST_SUITE_END()
