// Builds small GGUF file images in memory, valid or deliberately broken, for the reader tests and
// the fuzzer's seeds.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace echo::model::testing {

class GgufBuilder {
 public:
  explicit GgufBuilder(std::uint32_t version = 3) { put<std::uint32_t>(0x46554747); put(version); }

  // Header counts are written by bytes(); entries are appended in order.
  GgufBuilder& kv_u32(const std::string& key, std::uint32_t value) {
    key_header(key, 4);
    put(value);
    return *this;
  }
  GgufBuilder& kv_f32(const std::string& key, float value) {
    key_header(key, 6);
    put(value);
    return *this;
  }
  GgufBuilder& kv_string(const std::string& key, const std::string& value) {
    key_header(key, 8);
    put_string(kv_, value);
    return *this;
  }
  GgufBuilder& kv_strings(const std::string& key, const std::vector<std::string>& values) {
    key_header(key, 9);
    put_to(kv_, std::uint32_t{8});
    put_to(kv_, static_cast<std::uint64_t>(values.size()));
    for (const std::string& v : values) put_string(kv_, v);
    return *this;
  }
  GgufBuilder& kv_i32s(const std::string& key, const std::vector<std::int32_t>& values) {
    key_header(key, 9);
    put_to(kv_, std::uint32_t{5});
    put_to(kv_, static_cast<std::uint64_t>(values.size()));
    for (const std::int32_t v : values) put_to(kv_, v);
    return *this;
  }
  // Raw bytes appended to the metadata section (for malformed entries).
  GgufBuilder& kv_raw(const std::vector<std::uint8_t>& bytes, int entries) {
    kv_.insert(kv_.end(), bytes.begin(), bytes.end());
    kv_count_ += static_cast<std::uint64_t>(entries);
    return *this;
  }

  // A tensor whose data is appended to the data section at the next 32-byte boundary.
  GgufBuilder& tensor(const std::string& name, const std::vector<std::uint64_t>& dims,
                      std::uint32_t type, const std::vector<std::uint8_t>& data) {
    while (data_.size() % 32 != 0) data_.push_back(0);
    return tensor_at(name, dims, type, data_.size(), data);
  }
  // A tensor entry with an explicit offset (data appended as given).
  GgufBuilder& tensor_at(const std::string& name, const std::vector<std::uint64_t>& dims,
                         std::uint32_t type, std::uint64_t offset,
                         const std::vector<std::uint8_t>& data) {
    put_string(tensors_, name);
    put_to(tensors_, static_cast<std::uint32_t>(dims.size()));
    for (const std::uint64_t d : dims) put_to(tensors_, d);
    put_to(tensors_, type);
    put_to(tensors_, offset);
    data_.insert(data_.end(), data.begin(), data.end());
    ++tensor_count_;
    return *this;
  }

  std::vector<std::uint8_t> bytes() const {
    std::vector<std::uint8_t> out = head_;
    put_to(out, tensor_count_);
    put_to(out, kv_count_);
    out.insert(out.end(), kv_.begin(), kv_.end());
    out.insert(out.end(), tensors_.begin(), tensors_.end());
    while (out.size() % 32 != 0) out.push_back(0);
    out.insert(out.end(), data_.begin(), data_.end());
    return out;
  }

  template <typename T>
  static void put_to(std::vector<std::uint8_t>& out, T value) {
    std::uint8_t raw[sizeof(T)];
    std::memcpy(raw, &value, sizeof(T));
    out.insert(out.end(), raw, raw + sizeof(T));
  }
  static void put_string(std::vector<std::uint8_t>& out, const std::string& s) {
    put_to(out, static_cast<std::uint64_t>(s.size()));
    out.insert(out.end(), s.begin(), s.end());
  }

 private:
  template <typename T>
  void put(T value) {
    if (head_.size() < 8) {
      put_to(head_, value);
    } else {
      put_to(kv_, value);
    }
  }
  void key_header(const std::string& key, std::uint32_t type) {
    put_string(kv_, key);
    put_to(kv_, type);
    ++kv_count_;
  }

  std::vector<std::uint8_t> head_;
  std::vector<std::uint8_t> kv_;
  std::vector<std::uint8_t> tensors_;
  std::vector<std::uint8_t> data_;
  std::uint64_t kv_count_ = 0;
  std::uint64_t tensor_count_ = 0;
};

}  // namespace echo::model::testing
