#include "echo/hdf5_util.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <mutex>

#include "echo/printable.h"

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
    return Status(StatusCode::kIoError, path + ": cannot open as HDF5 (" + printable(e.getDetailMsg()) + ")");
  }
  return Status::Ok();
}

namespace {

// Owns an HDF5 C API identifier (attribute, datatype, dataspace) and closes it.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  void reset(hid_t id) {
    if (id_ >= 0) close_(id_);
    id_ = id;
  }
  bool valid() const { return id_ >= 0; }
  hid_t id() const { return id_; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// An attribute's handle, type and dataspace, opened through the C API so every step is checked.
struct OpenedAttribute {
  Handle attribute{-1, H5Aclose};
  Handle type{-1, H5Tclose};
  Handle space{-1, H5Sclose};
};

Status attribute_error(const std::string& file, const std::string& name, const std::string& what) {
  return Status(StatusCode::kFormatError, file + ": attribute '" + name + "' " + what);
}

// Ok with *found false when the attribute is absent; an error unless it holds exactly one element.
Status open_attribute(const H5::H5Object& object, const std::string& file, const std::string& name,
                      OpenedAttribute* out, bool* found) {
  silence_library_errors();
  const htri_t exists = H5Aexists(object.getId(), name.c_str());
  if (exists < 0) return attribute_error(file, name, "cannot be looked up (damaged attribute table)");
  *found = exists > 0;
  if (!*found) return Status::Ok();
  out->attribute.reset(H5Aopen(object.getId(), name.c_str(), H5P_DEFAULT));
  if (!out->attribute.valid()) return attribute_error(file, name, "cannot be opened (damaged header)");
  out->type.reset(H5Aget_type(out->attribute.id()));
  out->space.reset(H5Aget_space(out->attribute.id()));
  if (!out->type.valid() || !out->space.valid()) {
    return attribute_error(file, name, "has an unreadable type or dataspace");
  }
  if (H5Sget_simple_extent_npoints(out->space.id()) != 1) {
    return attribute_error(file, name, "must hold a single value");
  }
  return Status::Ok();
}

}  // namespace

Status open_read_image(const void* data, std::size_t size, const std::string& name, H5::H5File* file) {
  silence_library_errors();
  try {
    H5::FileAccPropList access;
    // The core driver serves the file from memory; H5Pset_file_image copies the bytes.
    if (H5Pset_fapl_core(access.getId(), 1 << 16, false) < 0 ||
        H5Pset_file_image(access.getId(), const_cast<void*>(data), size) < 0) {
      return Status(StatusCode::kIoError, name + ": cannot set up an in-memory HDF5 file");
    }
    file->openFile(name, H5F_ACC_RDONLY, access);
  } catch (const H5::Exception& e) {
    return Status(StatusCode::kIoError, name + ": cannot open as HDF5 (" + printable(e.getDetailMsg()) + ")");
  }
  return Status::Ok();
}

Status read_string_attribute(const H5::H5Object& object, const std::string& file,
                             const std::string& name, std::optional<std::string>* value) {
  value->reset();
  OpenedAttribute a;
  bool found = false;
  if (Status s = open_attribute(object, file, name, &a, &found); !s.ok() || !found) return s;
  if (H5Tget_class(a.type.id()) != H5T_STRING) return attribute_error(file, name, "must be a string");
  const htri_t variable = H5Tis_variable_str(a.type.id());
  const H5T_cset_t cset = H5Tget_cset(a.type.id());
  if (variable < 0 || cset < 0) return attribute_error(file, name, "has an unreadable string type");
  Handle memory(H5Tcopy(H5T_C_S1), H5Tclose);
  if (!memory.valid() || H5Tset_cset(memory.id(), cset) < 0) {
    return attribute_error(file, name, "has an unreadable string type");
  }
  std::string s;
  if (variable > 0) {
    char* text = nullptr;
    if (H5Tset_size(memory.id(), H5T_VARIABLE) < 0 || H5Aread(a.attribute.id(), memory.id(), &text) < 0) {
      return attribute_error(file, name, "cannot be read (damaged string storage)");
    }
    if (text != nullptr) {
      s.assign(text, strnlen(text, kMaxStringAttributeBytes + 1));
      H5free_memory(text);
    }
  } else {
    // Fixed length: the declared size is bounded before a buffer of exactly that size is read.
    const std::size_t size = H5Tget_size(a.type.id());
    if (size == 0 || size > kMaxStringAttributeBytes) {
      return attribute_error(file, name, "declares a string of " + std::to_string(size) + " bytes (at most " +
                                             std::to_string(kMaxStringAttributeBytes) + ")");
    }
    s.assign(size, '\0');
    if (H5Tset_size(memory.id(), size) < 0 || H5Tset_strpad(memory.id(), H5T_STR_NULLPAD) < 0 ||
        H5Aread(a.attribute.id(), memory.id(), s.data()) < 0) {
      return attribute_error(file, name, "cannot be read (damaged string storage)");
    }
    // Fixed-length strings may carry NUL padding.
    while (!s.empty() && s.back() == '\0') s.pop_back();
  }
  if (s.size() > kMaxStringAttributeBytes) {
    return attribute_error(file, name, "is longer than " + std::to_string(kMaxStringAttributeBytes) + " bytes");
  }
  *value = std::move(s);
  return Status::Ok();
}

Status read_int_attribute(const H5::H5Object& object, const std::string& file,
                          const std::string& name, std::optional<std::int64_t>* value) {
  value->reset();
  OpenedAttribute a;
  bool found = false;
  if (Status s = open_attribute(object, file, name, &a, &found); !s.ok() || !found) return s;
  const std::size_t size = H5Tget_size(a.type.id());
  if (H5Tget_class(a.type.id()) != H5T_INTEGER || size == 0 || size > sizeof(std::int64_t)) {
    return attribute_error(file, name, "must be an integer (of at most 8 bytes)");
  }
  std::int64_t v = 0;
  if (H5Aread(a.attribute.id(), H5T_NATIVE_INT64, &v) < 0) {
    return attribute_error(file, name, "cannot be read (damaged storage)");
  }
  *value = v;
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
                  path + ": '" + name + "' is not a readable dataset (" + printable(e.getDetailMsg()) + ")");
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
