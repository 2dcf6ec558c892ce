// echotk quantize IN.h5 OUT.h5: one vector through the group quantizer.
#include <cmath>
#include <cstdio>
#include <vector>

#include "echo/hdf5_util.h"
#include "commands.h"
#include "echo/dtype.h"
#include "echo/quantizer.h"

namespace echo::cli {
namespace {

struct QuantizeArgs {
  std::string in;
  std::string out;
  int bits = 4;
  int group = kDefaultGroup;
  std::string quantizer = "zero-aware";
};

Status read_input(const std::string& path, std::vector<float>* x) {
  H5::H5File file;
  ECHO_TRY(h5::open_read(path, &file));
  H5::DataSet dataset;
  std::vector<hsize_t> dims;
  ECHO_TRY(h5::dataset_shape(file, path, "/x", &dataset, &dims));
  if (dims.size() != 1 || dims[0] == 0) {
    return Status(StatusCode::kFormatError, path + ": dataset '/x' must be a non-empty 1-D array");
  }
  if (dataset.getTypeClass() != H5T_FLOAT || dataset.getFloatType().getSize() != 4) {
    return Status(StatusCode::kFormatError, path + ": dataset '/x' must be float32");
  }
  x->resize(dims[0]);
  try {
    h5::read_block(dataset, {0}, {dims[0]}, H5::PredType::NATIVE_FLOAT, x->data());
  } catch (const H5::Exception& e) {
    return Status(StatusCode::kIoError, path + ": reading '/x' failed (" + e.getDetailMsg() + ")");
  }
  return Status::Ok();
}

void run_quantize(const QuantizeArgs& args) {
  const std::string name = "quantize";
  refuse_output_over_input(name, args.in, args.out, "output");
  QuantSpec spec;
  spec.bits = args.bits;
  spec.group = args.group;
  spec.kind = *parse_quantizer(args.quantizer);
  check(name, spec.validate());
  std::vector<float> x;
  check(name, read_input(args.in, &x));
  const std::size_t n = x.size();
  const std::size_t groups = spec.num_groups(n);
  std::vector<std::uint8_t> codes(n);
  std::vector<GroupParams> params(groups);
  const std::size_t poisoned = quantize(spec, x.data(), n, codes.data(), params.data());
  std::vector<float> dequantized(n);
  dequantize(spec, codes.data(), params.data(), n, dequantized.data());
  std::vector<float> scale(groups), zero_point(groups);
  for (std::size_t k = 0; k < groups; ++k) {
    scale[k] = half_bits_to_float(params[k].scale);
    zero_point[k] = half_bits_to_float(params[k].zero_point);
  }

  h5::AtomicFile out;
  check(name, out.create(args.out));
  try {
    H5::H5File& f = out.file();
    auto write = [&](const char* dataset, const H5::PredType& type, const H5::PredType& memory,
                     std::size_t size, const void* data) {
      H5::DataSet ds = h5::create_dataset(f, dataset, type, {size}, {std::min<std::size_t>(size, 1u << 20)}, 0);
      h5::write_block(ds, {0}, {size}, memory, data);
    };
    write("/dequantized", H5::PredType::IEEE_F32LE, H5::PredType::NATIVE_FLOAT, n, dequantized.data());
    write("/codes", H5::PredType::STD_U8LE, H5::PredType::NATIVE_UINT8, n, codes.data());
    write("/scale", H5::PredType::IEEE_F32LE, H5::PredType::NATIVE_FLOAT, groups, scale.data());
    write("/zero_point", H5::PredType::IEEE_F32LE, H5::PredType::NATIVE_FLOAT, groups, zero_point.data());
    h5::write_int_attribute(f, "bits", spec.bits);
    h5::write_int_attribute(f, "group", spec.group);
    h5::write_string_attribute(f, "quantizer", quantizer_name(spec.kind));
    h5::write_int_attribute(f, "poisoned_groups", static_cast<std::int64_t>(poisoned));
  } catch (const H5::Exception& e) {
    fail(name, kExitFailure, args.out + ": write failed (" + e.getDetailMsg() + ")");
  }
  check(name, out.commit());

  double err2 = 0.0, ref2 = 0.0, max_err = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double e = static_cast<double>(dequantized[i]) - x[i];
    if (std::isfinite(e)) {
      err2 += e * e;
      ref2 += static_cast<double>(x[i]) * x[i];
      max_err = std::max(max_err, std::fabs(e));
    }
  }
  std::printf("%zu values, %zu groups of %d, %d-bit %s: max |error| %.6g, relative L2 error %.6g%s\n",
              n, groups, spec.group, spec.bits, quantizer_name(spec.kind), max_err,
              ref2 > 0 ? std::sqrt(err2 / ref2) : 0.0,
              poisoned ? (", " + std::to_string(poisoned) + " poisoned groups (NaN)").c_str() : "");
}

}  // namespace

void register_quantize(CLI::App& app) {
  auto args = std::make_shared<QuantizeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "quantize", "Quantize the float32 vector /x of an HDF5 file and write codes, parameters and "
                  "the dequantized values");
  cmd->add_option("input", args->in, "input HDF5 file holding dataset /x (float32 [n])")->required();
  cmd->add_option("output", args->out,
                  "output HDF5 file: /dequantized, /codes (uint8, unpacked), /scale, /zero_point")
      ->required();
  cmd->add_option("--bits", args->bits, "bit width (2..8)")->check(CLI::Range(kMinBits, kMaxBits))->capture_default_str();
  cmd->add_option("--group", args->group, "group size, a power of two in [16, 1024]")->capture_default_str();
  cmd->add_option("--quantizer", args->quantizer, "zero-aware | naive | symmetric")
      ->check(CLI::IsMember({"zero-aware", "naive", "symmetric"}))
      ->capture_default_str();
  cmd->callback([args] { run_quantize(*args); });
}

}  // namespace echo::cli
