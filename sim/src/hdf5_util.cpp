#include "echo/hdf5_util.h"

#include <unistd.h>

#include <cstdio>
#include <mutex>

namespace echo::h5 {

void silence_library_errors() {
  static std::once_flag once;
  std::call_once(once, [] { H5::Exception::dontPrint(); });
}

Status open_read(const std::string& path, H5::H5File* file) {
  silence_library_errors();
  if (access(path.c_str(), R_OK) != 0) {
    return Status(StatusCode::kIoError, path + ": cannot read the file (missing or no permission)");
  }
  try {
    if (!H5::H5File::isHdf5(path)) {
      return Status(StatusCode::kFormatError, path + ": not an HDF5 file");
    }
    file->openFile(path, H5F_ACC_RDONLY);
  } catch (const H5::Exception& e) {
    return Status(StatusCode::kIoError, path + ": cannot open as HDF5 (" + e.getDetailMsg() + ")");
  }
  return Status::Ok();
}

Status read_string_attribute(const H5::H5Object& object, const std::string& file,
                             const std::string& name, std::optional<std::string>* value) {
  value->reset();
  if (!object.attrExists(name)) return Status::Ok();
  try {
    H5::Attribute attr = object.openAttribute(name);
    if (attr.getTypeClass() != H5T_STRING) {
      return Status(StatusCode::kFormatError,
                    file + ": attribute '" + name + "' must be a string");
    }
    std::string s;
    attr.read(attr.getStrType(), s);
    // Fixed-length strings may carry NUL padding.
    while (!s.empty() && s.back() == '\0') s.pop_back();
    *value = s;
  } catch (const H5::Exception& e) {
    return Status(StatusCode::kFormatError,
                  file + ": cannot read attribute '" + name + "' (" + e.getDetailMsg() + ")");
  }
  return Status::Ok();
}

Status read_int_attribute(const H5::H5Object& object, const std::string& file,
                          const std::string& name, std::optional<std::int64_t>* value) {
  value->reset();
  if (!object.attrExists(name)) return Status::Ok();
  try {
    H5::Attribute attr = object.openAttribute(name);
    if (attr.getTypeClass() != H5T_INTEGER) {
      return Status(StatusCode::kFormatError,
                    file + ": attribute '" + name + "' must be an integer");
    }
    if (attr.getSpace().getSimpleExtentNpoints() != 1) {
      return Status(StatusCode::kFormatError,
                    file + ": attribute '" + name + "' must hold a single value");
    }
    std::int64_t v = 0;
    attr.read(H5::PredType::NATIVE_INT64, &v);
    *value = v;
  } catch (const H5::Exception& e) {
    return Status(StatusCode::kFormatError,
                  file + ": cannot read attribute '" + name + "' (" + e.getDetailMsg() + ")");
  }
  return Status::Ok();
}

void write_string_attribute(H5::H5Object& object, const std::string& name,
                            const std::string& value) {
  // Variable-length UTF-8, as h5py writes Python strings.
  H5::StrType type(H5::PredType::C_S1, H5T_VARIABLE);
  type.setCset(H5T_CSET_UTF8);
  H5::Attribute attr = object.createAttribute(name, type, H5::DataSpace(H5S_SCALAR));
  attr.write(type, value);
}

void write_int_attribute(H5::H5Object& object, const std::string& name, std::int64_t value) {
  H5::Attribute attr =
      object.createAttribute(name, H5::PredType::STD_I64LE, H5::DataSpace(H5S_SCALAR));
  attr.write(H5::PredType::NATIVE_INT64, &value);
}

void write_double_attribute(H5::H5Object& object, const std::string& name, double value) {
  H5::Attribute attr =
      object.createAttribute(name, H5::PredType::IEEE_F64LE, H5::DataSpace(H5S_SCALAR));
  attr.write(H5::PredType::NATIVE_DOUBLE, &value);
}

Status dataset_shape(const H5::H5File& file, const std::string& path, const std::string& name,
                     H5::DataSet* dataset, std::vector<hsize_t>* dims) {
  if (!file.nameExists(name)) {
    return Status(StatusCode::kFormatError, path + ": dataset '" + name + "' is missing");
  }
  try {
    *dataset = file.openDataSet(name);
    H5::DataSpace space = dataset->getSpace();
    const int rank = space.getSimpleExtentNdims();
    dims->assign(static_cast<std::size_t>(rank), 0);
    space.getSimpleExtentDims(dims->data());
  } catch (const H5::Exception& e) {
    return Status(StatusCode::kFormatError,
                  path + ": '" + name + "' is not a readable dataset (" + e.getDetailMsg() + ")");
  }
  return Status::Ok();
}

void read_block(const H5::DataSet& dataset, const std::vector<hsize_t>& start,
                const std::vector<hsize_t>& count, const H5::PredType& memory_type, void* out) {
  H5::DataSpace file_space = dataset.getSpace();
  file_space.selectHyperslab(H5S_SELECT_SET, count.data(), start.data());
  hsize_t total = 1;
  for (hsize_t c : count) total *= c;
  H5::DataSpace memory_space(1, &total);
  dataset.read(out, memory_type, memory_space, file_space);
}

void write_block(H5::DataSet& dataset, const std::vector<hsize_t>& start,
                 const std::vector<hsize_t>& count, const H5::PredType& memory_type,
                 const void* in) {
  H5::DataSpace file_space = dataset.getSpace();
  file_space.selectHyperslab(H5S_SELECT_SET, count.data(), start.data());
  hsize_t total = 1;
  for (hsize_t c : count) total *= c;
  H5::DataSpace memory_space(1, &total);
  dataset.write(in, memory_type, memory_space, file_space);
}

H5::DataSet create_dataset(H5::H5File& file, const std::string& name, const H5::PredType& type,
                           const std::vector<hsize_t>& dims, const std::vector<hsize_t>& chunk,
                           int compression) {
  H5::DSetCreatPropList props;
  props.setChunk(static_cast<int>(chunk.size()), chunk.data());
  if (compression > 0) {
    props.setShuffle();
    props.setDeflate(compression);
  }
  H5::DataSpace space(static_cast<int>(dims.size()), dims.data());
  return file.createDataSet(name, type, space, props);
}

AtomicFile::~AtomicFile() {
  if (open_) {
    try {
      file_.close();
    } catch (const H5::Exception&) {
    }
    std::remove(temp_path_.c_str());
  }
}

Status AtomicFile::create(const std::string& path) {
  silence_library_errors();
  path_ = path;
  temp_path_ = path + ".tmp-" + std::to_string(static_cast<long>(getpid()));
  try {
    file_ = H5::H5File(temp_path_, H5F_ACC_TRUNC);
  } catch (const H5::Exception& e) {
    return Status(StatusCode::kIoError, path + ": cannot create (" + e.getDetailMsg() + ")");
  }
  open_ = true;
  return Status::Ok();
}

Status AtomicFile::commit() {
  try {
    file_.close();
  } catch (const H5::Exception& e) {
    return Status(StatusCode::kIoError, path_ + ": cannot finish writing (" + e.getDetailMsg() + ")");
  }
  open_ = false;
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    std::remove(temp_path_.c_str());
    return Status(StatusCode::kIoError, path_ + ": cannot move the finished file into place");
  }
  return Status::Ok();
}

}  // namespace echo::h5
