// Reader of GGUF model files (versions 2 and 3): metadata, tensor directory and raw tensor bytes.
// Every malformed input is reported as a Status naming the file, the field and its byte offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "echo/model/gguf_types.h"
#include "echo/status.h"

namespace echo::model {

// One metadata value. Scalars fill one of integer / number / boolean / text; arrays fill the
// vector of their element kind (integers, numbers or strings). Nested arrays are refused.
struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  GgufValueType element_type = GgufValueType::kUint8;  // arrays only
  std::int64_t integer = 0;
  double number = 0.0;
  bool boolean = false;
  std::string text;
  std::vector<std::int64_t> integers;
  std::vector<double> numbers;
  std::vector<std::string> strings;
};

inline constexpr int kGgufMaxDims = 4;

struct GgufTensorInfo {
  std::string name;
  int num_dims = 0;
  std::int64_t dims[kGgufMaxDims] = {1, 1, 1, 1};  // ne0 (contiguous) first
  GgmlType type = GgmlType::kF32;
  std::uint64_t offset = 0;  // from the start of the data section
  std::size_t num_elements = 0;
  std::size_t num_bytes = 0;
};

class GgufFile {
 public:
  // Reads and parses the file at path.
  Status open(const std::string& path);
  // Parses a whole file image; name is used in messages.
  Status parse(std::vector<std::uint8_t> bytes, std::string name);

  const std::string& name() const { return name_; }
  std::uint32_t version() const { return version_; }
  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  const GgufValue* find(std::string_view key) const;
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  // Raw bytes of a tensor of this file, num_bytes long.
  const std::uint8_t* tensor_data(const GgufTensorInfo& tensor) const;

  // Typed lookups; the status names the key when it is missing or of another type.
  Status get_integer(std::string_view key, std::int64_t* out) const;
  Status get_float(std::string_view key, double* out) const;
  Status get_string(std::string_view key, std::string* out) const;
  Status get_bool(std::string_view key, bool* out) const;
  Status get_string_array(std::string_view key, const std::vector<std::string>** out) const;
  Status get_integer_array(std::string_view key, const std::vector<std::int64_t>** out) const;

 private:
  std::string name_;
  std::vector<std::uint8_t> bytes_;
  std::uint32_t version_ = 0;
  std::size_t data_offset_ = 0;
  std::map<std::string, GgufValue, std::less<>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
};

}  // namespace echo::model
