// DLPack arrays as the extension takes them: checked (device, ndim, shape, dtype, contiguity)
// with errors that name the argument, and converted between the all-reduce dtype and fp32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <nanobind/ndarray.h>

#include "echo/dtype.h"

namespace echotk {

namespace nb = nanobind;
// Any device and dtype: the checks below name what is wrong instead of a generic TypeError.
using AnyArray = nb::ndarray<>;

// How elements of an array of the all-reduce dtype are stored: fp32 values, or 16-bit patterns
// (torch.bfloat16 / torch.float16, or uint16 raw bits, e.g. numpy arrays of bf16 bits).
enum class Storage { kFloat32, kBits16 };

// Raises ValueError unless `array` is a C-contiguous array on `device_type` (nb::device::cpu or
// cuda) with `shape` (ndim = shape's size, -1 = any). `name` names the argument.
void check_layout(const AnyArray& array, const char* name, std::initializer_list<std::int64_t> shape,
                  int device_type = nb::device::cpu::value);
// check_layout, and a dtype that can hold `dtype`; returns its storage.
Storage check_values(const AnyArray& array, const char* name, echo::DType dtype,
                     std::initializer_list<std::int64_t> shape, int device_type = nb::device::cpu::value);
// check_layout of a float32 array (float64: CPU only; uint8: `bytes` elements).
void check_float32(const AnyArray& array, const char* name, std::initializer_list<std::int64_t> shape,
                   int device_type = nb::device::cpu::value);
void check_float64(const AnyArray& array, const char* name,
                   std::initializer_list<std::int64_t> shape);
void check_uint8(const AnyArray& array, const char* name, std::int64_t bytes, int device_type);

// values[i] of count elements as fp32 (16-bit patterns decoded exactly).
void load_values(const void* data, Storage storage, echo::DType dtype, std::size_t count,
                 float* out);
// Stores count dtype values (held in fp32) back in the array's storage; exact for dtype values.
void store_values(const float* values, Storage storage, echo::DType dtype, std::size_t count,
                  void* data);

std::string shape_string(const AnyArray& array);

}  // namespace echotk
