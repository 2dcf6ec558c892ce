#include "echo/outputs_file.h"

#include <cstdio>

#include "echo/hdf5_util.h"
#include "echo/text_output.h"

namespace echo {
namespace {

constexpr const char* kDataset = "/outputs";

// Root attributes of a replay result that echotk verify's spec options also set.
constexpr const char* kRecordedNames[] = {"dtype",       "algorithm", "quantizer", "bits",  "group",
                                          "compensator", "residual",  "eta",       "a",     "beta1",
                                          "beta2",       "beta",      "state_dtype", "exact_max_count",
                                          "outliers",    "overflow_groups", "rotation"};

Status format_error(const std::string& path, const std::string& what) {
  return Status(StatusCode::kFormatError, path + ": '" + kDataset + "' " + what);
}

std::string shape_text(const std::vector<hsize_t>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// The attribute as text, empty when absent or of another kind.
std::string attribute_text(const H5::H5File& file, const std::string& path, const char* name) {
  if (!file.attrExists(name)) return "";
  const H5::Attribute attribute = file.openAttribute(name);
  const H5T_class_t type_class = attribute.getTypeClass();
  if (type_class == H5T_STRING) {
    std::optional<std::string> text;
    if (!h5::read_string_attribute(file, path, name, &text).ok() || !text) return "";
    return *text;
  }
  if (type_class == H5T_INTEGER) {
    std::optional<std::int64_t> number;
    if (!h5::read_int_attribute(file, path, name, &number).ok() || !number) return "";
    return std::to_string(*number);
  }
  if (type_class == H5T_FLOAT && attribute.getSpace().getSimpleExtentNpoints() == 1) {
    double v = 0.0;
    attribute.read(H5::PredType::NATIVE_DOUBLE, &v);
    return float_text(static_cast<float>(v));
  }
  return "";
}

}  // namespace

Status OutputsReader::open(const std::string& path, const TraceInfo& trace, DType dtype) {
  path_ = path;
  ECHO_TRY(h5::open_read(path, &file_));
  std::vector<hsize_t> dims;
  ECHO_TRY(h5::dataset_shape(file_, path, kDataset, &dataset_, &dims));
  const std::vector<hsize_t> expected = {trace.passes, trace.sites, static_cast<hsize_t>(trace.ranks),
                                         trace.count};
  static const char* const kDims[] = {"passes", "sites", "ranks", "n"};
  if (dims.size() != 4) {
    return format_error(path, "has shape " + shape_text(dims) + ", expected 4 dimensions [passes, sites, ranks, n] = " +
                                  shape_text(expected));
  }
  for (std::size_t d = 0; d < 4; ++d) {
    if (dims[d] != expected[d]) {
      return format_error(path, "has shape " + shape_text(dims) + " but the trace needs " + shape_text(expected) +
                                    " (" + kDims[d] + " " + std::to_string(dims[d]) + " != " +
                                    std::to_string(expected[d]) + ")");
    }
  }
  ranks_ = static_cast<std::size_t>(trace.ranks);
  count_ = trace.count;
  try {
    const H5T_class_t type_class = dataset_.getTypeClass();
    const std::size_t size = dataset_.getDataType().getSize();
    const bool sixteen = dtype == DType::kBFloat16 || dtype == DType::kFloat16;
    const std::string dtype_text = dtype_name(dtype);
    if (type_class == H5T_FLOAT && size == 4) {
      encoding_ = OutputsEncoding::kFloat32;
      memory_type_ = H5::PredType::IEEE_F32LE;
      type_description_ = "float32";
    } else if (type_class == H5T_FLOAT && size == 2 && sixteen) {
      const H5::FloatType type = dataset_.getFloatType();
      std::size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
      type.getFields(spos, epos, esize, mpos, msize);
      const bool layout = dtype == DType::kFloat16 ? (esize == 5 && msize == 10) : (esize == 8 && msize == 7);
      if (!layout || type.getOrder() != H5T_ORDER_LE) {
        return format_error(path, "is a 16-bit float that is not little-endian " + dtype_text +
                                      " (the trace's dtype); write float32 or the " + dtype_text + " bits");
      }
      encoding_ = OutputsEncoding::kDtypeBits;
      memory_type_ = type;  // read as stored: the raw bits
      type_description_ = dtype_text + " (HDF5 16-bit float)";
    } else if (type_class == H5T_INTEGER && size == 2 && sixteen) {
      encoding_ = OutputsEncoding::kDtypeBits;
      memory_type_ = H5::PredType::NATIVE_UINT16;
      type_description_ = dtype_text + " bits (16-bit integers)";
    } else {
      return format_error(path, "has elements of " + std::to_string(size) + " bytes (HDF5 class " +
                                    std::to_string(static_cast<int>(type_class)) + "); expected float32" +
                                    (sixteen ? " or the trace's " + dtype_text + " (16-bit float or its bits as uint16)"
                                             : std::string(" (the trace's dtype is float32)")));
    }
    recorded_.clear();
    for (const char* name : kRecordedNames) {
      std::string value = attribute_text(file_, path, name);
      if (!value.empty()) recorded_.emplace_back(name, std::move(value));
    }
  } catch (const H5::Exception& e) {
    return Status(StatusCode::kFormatError, path + ": '" + kDataset + "' cannot be read (" + e.getDetailMsg() + ")");
  }
  return Status::Ok();
}

Status OutputsReader::read_site(std::size_t pass, std::size_t site, std::uint32_t* words) const {
  const std::size_t total = ranks_ * count_;
  try {
    H5::DataSpace file_space = dataset_.getSpace();
    const hsize_t start[4] = {pass, site, 0, 0};
    const hsize_t block[4] = {1, 1, ranks_, count_};
    file_space.selectHyperslab(H5S_SELECT_SET, block, start);
    const hsize_t points = total;
    H5::DataSpace memory_space(1, &points);
    if (encoding_ == OutputsEncoding::kFloat32) {
      dataset_.read(words, memory_type_, memory_space, file_space);
    } else {
      std::vector<std::uint16_t> half(total);
      dataset_.read(half.data(), memory_type_, memory_space, file_space);
      for (std::size_t i = 0; i < total; ++i) words[i] = half[i];
    }
  } catch (const H5::Exception& e) {
    return Status(StatusCode::kIoError, path_ + ": reading '" + kDataset + "' at pass " + std::to_string(pass) +
                                            ", site " + std::to_string(site) + " failed (" + e.getDetailMsg() + ")");
  }
  return Status::Ok();
}

Status write_outputs_file(const std::string& path, std::size_t passes, std::size_t sites,
                          std::size_t ranks, std::size_t count, const float* values,
                          const std::vector<std::pair<std::string, std::string>>& attributes) {
  h5::AtomicFile out;
  ECHO_TRY(out.create(path));
  try {
    H5::H5File& f = out.file();
    const hsize_t dims[4] = {passes, sites, ranks, count};
    const hsize_t chunk[4] = {1, 1, ranks, count};
    H5::DSetCreatPropList props;
    props.setChunk(4, chunk);
    props.setShuffle();
    props.setDeflate(6);
    H5Pset_obj_track_times(props.getId(), false);  // no timestamps: the same contents, the same bits
    H5::DataSpace space(4, dims);
    H5::DataSet dataset = f.createDataSet(kDataset, H5::PredType::IEEE_F32LE, space, props);
    dataset.write(values, H5::PredType::NATIVE_FLOAT);
    for (const auto& [name, value] : attributes) h5::write_string_attribute(f, name, value);
  } catch (const H5::Exception& e) {
    return Status(StatusCode::kIoError, path + ": cannot write '" + kDataset + "' (" + e.getDetailMsg() + ")");
  }
  return out.commit();
}

}  // namespace echo
