#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <utility>

#include "echo/model/gguf.h"

namespace echo::model {
namespace {

constexpr std::uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr std::uint64_t kDefaultAlignment = 32;
constexpr std::size_t kStringHeaderBytes = 8;

// Bounds-checked little-endian reads over the file image; every failure names the byte offset.
class ByteCursor {
 public:
  ByteCursor(const std::vector<std::uint8_t>& bytes, const std::string& name)
      : bytes_(bytes), name_(name) {}

  std::size_t position() const { return position_; }
  std::size_t remaining() const { return bytes_.size() - position_; }

  Status error(const std::string& field, const std::string& what) const {
    return Status(StatusCode::kFormatError, "GGUF " + name_ + ": " + field + " at byte " +
                                                std::to_string(position_) + ": " + what);
  }

  template <typename T>
  Status read(const std::string& field, T* out) {
    if (remaining() < sizeof(T)) return error(field, "file ends inside the field");
    std::memcpy(out, bytes_.data() + position_, sizeof(T));
    position_ += sizeof(T);
    return Status::Ok();
  }

  Status read_string(const std::string& field, std::string* out) {
    std::uint64_t length = 0;
    Status status = read(field + " length", &length);
    if (!status.ok()) return status;
    if (length > remaining()) {
      return error(field, "string of " + std::to_string(length) + " bytes runs past the end");
    }
    out->assign(reinterpret_cast<const char*>(bytes_.data() + position_), length);
    position_ += length;
    return Status::Ok();
  }

 private:
  const std::vector<std::uint8_t>& bytes_;
  const std::string& name_;
  std::size_t position_ = 0;
};

std::size_t min_encoded_bytes(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool: return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16: return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32: return 4;
    case GgufValueType::kString: return kStringHeaderBytes;
    default: return 8;
  }
}

bool is_known_value_type(std::uint32_t raw) {
  return raw <= static_cast<std::uint32_t>(GgufValueType::kFloat64);
}

// Reads one scalar of the given type into (integer, number, boolean, text).
Status read_scalar(ByteCursor& cursor, const std::string& field, GgufValueType type,
                   GgufValue* out) {
  Status status;
  auto take_int = [&](auto raw) {
    status = cursor.read(field, &raw);
    out->integer = static_cast<std::int64_t>(raw);
    out->number = static_cast<double>(raw);
  };
  switch (type) {
    case GgufValueType::kUint8: take_int(std::uint8_t{}); break;
    case GgufValueType::kInt8: take_int(std::int8_t{}); break;
    case GgufValueType::kUint16: take_int(std::uint16_t{}); break;
    case GgufValueType::kInt16: take_int(std::int16_t{}); break;
    case GgufValueType::kUint32: take_int(std::uint32_t{}); break;
    case GgufValueType::kInt32: take_int(std::int32_t{}); break;
    case GgufValueType::kInt64: take_int(std::int64_t{}); break;
    case GgufValueType::kUint64: {
      std::uint64_t raw = 0;
      status = cursor.read(field, &raw);
      if (status.ok() && raw > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return cursor.error(field, "uint64 value beyond the int64 range");
      }
      out->integer = static_cast<std::int64_t>(raw);
      out->number = static_cast<double>(raw);
      break;
    }
    case GgufValueType::kFloat32: {
      float raw = 0;
      status = cursor.read(field, &raw);
      out->number = raw;
      break;
    }
    case GgufValueType::kFloat64: status = cursor.read(field, &out->number); break;
    case GgufValueType::kBool: {
      std::uint8_t raw = 0;
      status = cursor.read(field, &raw);
      if (status.ok() && raw > 1) return cursor.error(field, "bool value " + std::to_string(raw));
      out->boolean = raw != 0;
      break;
    }
    case GgufValueType::kString: status = cursor.read_string(field, &out->text); break;
    case GgufValueType::kArray: return cursor.error(field, "nested arrays are not supported");
  }
  return status;
}

Status read_array(ByteCursor& cursor, const std::string& field, GgufValue* out) {
  std::uint32_t raw_type = 0;
  std::uint64_t count = 0;
  Status status = cursor.read(field + " element type", &raw_type);
  if (!status.ok()) return status;
  if (!is_known_value_type(raw_type)) {
    return cursor.error(field, "unknown array element type " + std::to_string(raw_type));
  }
  out->element_type = static_cast<GgufValueType>(raw_type);
  if (out->element_type == GgufValueType::kArray) {
    return cursor.error(field, "nested arrays are not supported");
  }
  status = cursor.read(field + " count", &count);
  if (!status.ok()) return status;
  // Refuse counts the remaining bytes cannot hold before allocating anything.
  if (count > cursor.remaining() / min_encoded_bytes(out->element_type)) {
    return cursor.error(field, "array of " + std::to_string(count) + " elements runs past the end");
  }
  GgufValue element;
  for (std::uint64_t i = 0; i < count; ++i) {
    status = read_scalar(cursor, field, out->element_type, &element);
    if (!status.ok()) return status;
    switch (out->element_type) {
      case GgufValueType::kString: out->strings.push_back(std::move(element.text)); break;
      case GgufValueType::kFloat32:
      case GgufValueType::kFloat64: out->numbers.push_back(element.number); break;
      case GgufValueType::kBool: out->integers.push_back(element.boolean ? 1 : 0); break;
      default: out->integers.push_back(element.integer); break;
    }
  }
  return Status::Ok();
}

Status read_tensor_info(ByteCursor& cursor, std::size_t index, GgufTensorInfo* info) {
  const std::string field = "tensor " + std::to_string(index);
  Status status = cursor.read_string(field + " name", &info->name);
  if (!status.ok()) return status;
  const std::string named = field + " (" + info->name + ")";
  std::uint32_t num_dims = 0;
  status = cursor.read(named + " n_dims", &num_dims);
  if (!status.ok()) return status;
  if (num_dims == 0 || num_dims > static_cast<std::uint32_t>(kGgufMaxDims)) {
    return cursor.error(named, "n_dims " + std::to_string(num_dims) + " outside [1, 4]");
  }
  info->num_dims = static_cast<int>(num_dims);
  std::size_t elements = 1;
  for (int d = 0; d < info->num_dims; ++d) {
    std::uint64_t dim = 0;
    status = cursor.read(named + " dims", &dim);
    if (!status.ok()) return status;
    // 2^40 per dimension and 2^50 elements in all are far beyond any model this reads.
    if (dim == 0 || dim > (std::uint64_t{1} << 40) || elements > (std::size_t{1} << 50) / dim) {
      return cursor.error(named, "dimension " + std::to_string(dim) + " out of range");
    }
    info->dims[d] = static_cast<std::int64_t>(dim);
    elements *= static_cast<std::size_t>(dim);
  }
  info->num_elements = elements;
  std::uint32_t raw_type = 0;
  status = cursor.read(named + " type", &raw_type);
  if (!status.ok()) return status;
  const auto traits = ggml_type_traits(raw_type);
  if (!traits) return cursor.error(named, "unsupported tensor type " + std::to_string(raw_type));
  info->type = static_cast<GgmlType>(raw_type);
  if (static_cast<std::size_t>(info->dims[0]) % traits->block_elements != 0) {
    return cursor.error(named, "ne0 " + std::to_string(info->dims[0]) +
                                   " is not a multiple of the " + traits->name + " block size");
  }
  info->num_bytes = elements / traits->block_elements * traits->block_bytes;
  return cursor.read(named + " offset", &info->offset);
}

}  // namespace

Status GgufFile::open(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return Status(StatusCode::kIoError, "GGUF " + path + ": cannot open file");
  const std::streamsize size = in.tellg();
  if (size < 0) return Status(StatusCode::kIoError, "GGUF " + path + ": cannot read file size");
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
  in.seekg(0);
  if (!in.read(reinterpret_cast<char*>(bytes.data()), size)) {
    return Status(StatusCode::kIoError, "GGUF " + path + ": read failed");
  }
  return parse(std::move(bytes), path);
}

Status GgufFile::parse(std::vector<std::uint8_t> bytes, std::string name) {
  bytes_ = std::move(bytes);
  name_ = std::move(name);
  metadata_.clear();
  tensors_.clear();
  ByteCursor cursor(bytes_, name_);

  std::uint32_t magic = 0;
  Status status = cursor.read("magic", &magic);
  if (!status.ok()) return status;
  if (magic != kGgufMagic) return cursor.error("magic", "not a GGUF file");
  status = cursor.read("version", &version_);
  if (!status.ok()) return status;
  if (version_ != 2 && version_ != 3) {
    return cursor.error("version", "version " + std::to_string(version_) + " (supported: 2, 3)");
  }
  std::uint64_t tensor_count = 0;
  std::uint64_t kv_count = 0;
  if (!(status = cursor.read("tensor_count", &tensor_count)).ok()) return status;
  if (!(status = cursor.read("kv_count", &kv_count)).ok()) return status;
  // A key-value pair takes at least 12 bytes, a tensor entry at least 28.
  if (kv_count > cursor.remaining() / 12) return cursor.error("kv_count", "too large for the file");
  if (tensor_count > cursor.remaining() / 28) {
    return cursor.error("tensor_count", "too large for the file");
  }

  for (std::uint64_t i = 0; i < kv_count; ++i) {
    std::string key;
    status = cursor.read_string("metadata key " + std::to_string(i), &key);
    if (!status.ok()) return status;
    std::uint32_t raw_type = 0;
    status = cursor.read("metadata " + key + " type", &raw_type);
    if (!status.ok()) return status;
    if (!is_known_value_type(raw_type)) {
      return cursor.error("metadata " + key, "unknown value type " + std::to_string(raw_type));
    }
    GgufValue value;
    value.type = static_cast<GgufValueType>(raw_type);
    status = value.type == GgufValueType::kArray
                 ? read_array(cursor, "metadata " + key, &value)
                 : read_scalar(cursor, "metadata " + key, value.type, &value);
    if (!status.ok()) return status;
    if (!metadata_.emplace(key, std::move(value)).second) {
      return cursor.error("metadata " + key, "duplicate key");
    }
  }

  std::uint64_t alignment = kDefaultAlignment;
  if (const GgufValue* value = find("general.alignment")) {
    if (value->type != GgufValueType::kUint32 || value->integer <= 0 ||
        (value->integer & (value->integer - 1)) != 0) {
      return cursor.error("metadata general.alignment", "must be a power-of-two uint32");
    }
    alignment = static_cast<std::uint64_t>(value->integer);
  }

  std::set<std::string, std::less<>> names;
  tensors_.resize(tensor_count);
  for (std::uint64_t i = 0; i < tensor_count; ++i) {
    status = read_tensor_info(cursor, i, &tensors_[i]);
    if (!status.ok()) return status;
    if (!names.insert(tensors_[i].name).second) {
      return cursor.error("tensor " + tensors_[i].name, "duplicate tensor name");
    }
  }

  data_offset_ = (cursor.position() + alignment - 1) / alignment * alignment;
  const std::size_t data_bytes = bytes_.size() >= data_offset_ ? bytes_.size() - data_offset_ : 0;
  for (const GgufTensorInfo& tensor : tensors_) {
    const std::string field = "tensor " + tensor.name;
    if (tensor.offset % alignment != 0) {
      return Status(StatusCode::kFormatError, "GGUF " + name_ + ": " + field + ": offset " +
                                                  std::to_string(tensor.offset) +
                                                  " is not aligned to " + std::to_string(alignment));
    }
    if (tensor.offset > data_bytes || tensor.num_bytes > data_bytes - tensor.offset) {
      return Status(StatusCode::kFormatError,
                    "GGUF " + name_ + ": " + field + ": data [" + std::to_string(tensor.offset) +
                        ", +" + std::to_string(tensor.num_bytes) + ") runs past the end of the " +
                        std::to_string(data_bytes) + "-byte data section");
    }
  }
  return Status::Ok();
}

const GgufValue* GgufFile::find(std::string_view key) const {
  const auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  for (const GgufTensorInfo& tensor : tensors_) {
    if (tensor.name == name) return &tensor;
  }
  return nullptr;
}

const std::uint8_t* GgufFile::tensor_data(const GgufTensorInfo& tensor) const {
  return bytes_.data() + data_offset_ + tensor.offset;
}

}  // namespace echo::model
