// Typed metadata lookups of GgufFile; messages name the file and the key.
#include <string>

#include "echo/model/gguf.h"

namespace echo::model {
namespace {

Status lookup(const GgufFile& file, std::string_view key, bool found_type, const GgufValue* value,
              const char* wanted) {
  if (value == nullptr) {
    return Status(StatusCode::kFormatError,
                  "GGUF " + file.name() + ": metadata key " + std::string(key) + " is missing");
  }
  if (!found_type) {
    return Status(StatusCode::kFormatError, "GGUF " + file.name() + ": metadata " +
                                                std::string(key) + " is " +
                                                gguf_value_type_name(value->type) + ", expected " +
                                                wanted);
  }
  return Status::Ok();
}

bool is_integer_type(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kUint64:
    case GgufValueType::kInt64: return true;
    default: return false;
  }
}

}  // namespace

Status GgufFile::get_integer(std::string_view key, std::int64_t* out) const {
  const GgufValue* value = find(key);
  Status status = lookup(*this, key, value && is_integer_type(value->type), value, "an integer");
  if (status.ok()) *out = value->integer;
  return status;
}

Status GgufFile::get_float(std::string_view key, double* out) const {
  const GgufValue* value = find(key);
  const bool ok = value && (value->type == GgufValueType::kFloat32 ||
                            value->type == GgufValueType::kFloat64);
  Status status = lookup(*this, key, ok, value, "a float");
  if (status.ok()) *out = value->number;
  return status;
}

Status GgufFile::get_string(std::string_view key, std::string* out) const {
  const GgufValue* value = find(key);
  Status status = lookup(*this, key, value && value->type == GgufValueType::kString, value,
                         "a string");
  if (status.ok()) *out = value->text;
  return status;
}

Status GgufFile::get_bool(std::string_view key, bool* out) const {
  const GgufValue* value = find(key);
  Status status = lookup(*this, key, value && value->type == GgufValueType::kBool, value, "a bool");
  if (status.ok()) *out = value->boolean;
  return status;
}

Status GgufFile::get_string_array(std::string_view key,
                                  const std::vector<std::string>** out) const {
  const GgufValue* value = find(key);
  const bool ok = value && value->type == GgufValueType::kArray &&
                  value->element_type == GgufValueType::kString;
  Status status = lookup(*this, key, ok, value, "an array of strings");
  if (status.ok()) *out = &value->strings;
  return status;
}

Status GgufFile::get_integer_array(std::string_view key,
                                   const std::vector<std::int64_t>** out) const {
  const GgufValue* value = find(key);
  const bool ok = value && value->type == GgufValueType::kArray &&
                  is_integer_type(value->element_type);
  Status status = lookup(*this, key, ok, value, "an array of integers");
  if (status.ok()) *out = &value->integers;
  return status;
}

}  // namespace echo::model
