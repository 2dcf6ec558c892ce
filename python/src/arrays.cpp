#include "arrays.h"

#include <cstring>
#include <vector>

namespace echotk {
namespace {

using Code = nb::dlpack::dtype_code;

bool is(const nb::dlpack::dtype& t, Code code, int bits) {
  return t.code == static_cast<std::uint8_t>(code) && t.bits == bits && t.lanes == 1;
}

std::string dtype_string(const nb::dlpack::dtype& t) {
  const char* kind = "?";
  switch (static_cast<Code>(t.code)) {
    case Code::Int: kind = "int"; break;
    case Code::UInt: kind = "uint"; break;
    case Code::Float: kind = "float"; break;
    case Code::Bfloat: kind = "bfloat"; break;
    case Code::Complex: kind = "complex"; break;
    case Code::Bool: kind = "bool"; break;
  }
  return std::string(kind) + std::to_string(t.bits);
}

const char* device_string(int device_type) {
  switch (device_type) {
    case nb::device::cuda::value: return "cuda";
    case nb::device::cuda_host::value: return "cuda_host";
    case nb::device::cuda_managed::value: return "cuda_managed";
    default: return "a non-CPU device";
  }
}

}  // namespace

// Device, ndim, shape and C-contiguity (strides of dimensions of size 1 do not matter).
void check_layout(const AnyArray& a, const char* name, std::initializer_list<std::int64_t> shape,
                  int device_type) {
  if (a.device_type() != device_type) {
    const bool cpu = device_type == nb::device::cpu::value;
    throw nb::value_error((std::string(name) + " is on " +
                           (a.device_type() == nb::device::cpu::value ? "cpu" : device_string(a.device_type())) +
                           (cpu ? "; this call takes CPU arrays" : "; this call takes CUDA device arrays")).c_str());
  }
  if (a.ndim() != shape.size()) {
    throw nb::value_error((std::string(name) + " must have " + std::to_string(shape.size()) +
                           " dimensions, got shape " + shape_string(a)).c_str());
  }
  std::size_t d = 0;
  for (const std::int64_t want : shape) {
    if (want >= 0 && static_cast<std::int64_t>(a.shape(d)) != want) {
      throw nb::value_error((std::string(name) + " has shape " + shape_string(a) + ", dimension " +
                             std::to_string(d) + " must be " + std::to_string(want)).c_str());
    }
    ++d;
  }
  std::int64_t expected = 1;
  for (std::size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) > 1 && a.stride(i) != expected) {
      throw nb::value_error((std::string(name) + " is not C-contiguous (shape " + shape_string(a) +
                             "); pass a contiguous copy").c_str());
    }
    expected *= static_cast<std::int64_t>(a.shape(i));
  }
}

std::string shape_string(const AnyArray& a) {
  std::string s = "[";
  for (std::size_t i = 0; i < a.ndim(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(a.shape(i));
  }
  return s + "]";
}

Storage check_values(const AnyArray& a, const char* name, echo::DType dtype,
                     std::initializer_list<std::int64_t> shape, int device_type) {
  check_layout(a, name, shape, device_type);
  const nb::dlpack::dtype t = a.dtype();
  switch (dtype) {
    case echo::DType::kFloat32:
      if (is(t, Code::Float, 32)) return Storage::kFloat32;
      break;
    case echo::DType::kBFloat16:
      if (is(t, Code::Bfloat, 16) || is(t, Code::UInt, 16)) return Storage::kBits16;
      break;
    case echo::DType::kFloat16:
      if (is(t, Code::Float, 16) || is(t, Code::UInt, 16)) return Storage::kBits16;
      break;
  }
  throw nb::value_error((std::string(name) + " has dtype " + dtype_string(t) + " but the spec's dtype is " +
                         echo::dtype_name(dtype) +
                         (dtype == echo::DType::kFloat32 ? " (float32)"
                                                         : " (its own 16-bit type, or uint16 raw bits)"))
                            .c_str());
}

void check_float32(const AnyArray& a, const char* name, std::initializer_list<std::int64_t> shape,
                   int device_type) {
  check_layout(a, name, shape, device_type);
  if (!is(a.dtype(), Code::Float, 32)) {
    throw nb::value_error((std::string(name) + " must be float32, got " + dtype_string(a.dtype())).c_str());
  }
}

void check_float64(const AnyArray& a, const char* name, std::initializer_list<std::int64_t> shape) {
  check_layout(a, name, shape, nb::device::cpu::value);
  if (!is(a.dtype(), Code::Float, 64)) {
    throw nb::value_error((std::string(name) + " must be float64, got " + dtype_string(a.dtype())).c_str());
  }
}

void check_uint8(const AnyArray& a, const char* name, std::int64_t bytes, int device_type) {
  check_layout(a, name, {bytes}, device_type);
  if (!is(a.dtype(), Code::UInt, 8)) {
    throw nb::value_error((std::string(name) + " must be uint8, got " + dtype_string(a.dtype())).c_str());
  }
}

void load_values(const void* data, Storage storage, echo::DType dtype, std::size_t count, float* out) {
  if (storage == Storage::kFloat32) {
    std::memcpy(out, data, count * sizeof(float));
    return;
  }
  const auto* bits = static_cast<const std::uint16_t*>(data);
  if (dtype == echo::DType::kBFloat16) {
    for (std::size_t i = 0; i < count; ++i) out[i] = echo::bfloat16_bits_to_float(bits[i]);
  } else {
    for (std::size_t i = 0; i < count; ++i) out[i] = echo::half_bits_to_float(bits[i]);
  }
}

void store_values(const float* values, Storage storage, echo::DType dtype, std::size_t count, void* data) {
  if (storage == Storage::kFloat32) {
    std::memcpy(data, values, count * sizeof(float));
    return;
  }
  auto* bits = static_cast<std::uint16_t*>(data);
  if (dtype == echo::DType::kBFloat16) {
    for (std::size_t i = 0; i < count; ++i) bits[i] = echo::float_to_bfloat16_bits(values[i]);
  } else {
    for (std::size_t i = 0; i < count; ++i) bits[i] = echo::float_to_half_bits(values[i]);
  }
}

}  // namespace echotk
