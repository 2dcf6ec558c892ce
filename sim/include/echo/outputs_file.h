// /outputs of an implementation under test (docs/conformance.md): every rank's result of every
// site and pass, [passes, sites, ranks, n], in float32 (what `echotk replay --save-outputs`
// writes) or in the trace's 16-bit dtype: an HDF5 16-bit float of that layout (numpy float16),
// or the dtype's raw bits as 16-bit integers (bfloat16, which HDF5 has no type for).
#pragma once

#include <H5Cpp.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "echo/dtype.h"
#include "echo/status.h"
#include "echo/trace.h"

namespace echo {

enum class OutputsEncoding : std::uint8_t {
  kFloat32 = 0,    // binary32 values (of the dtype)
  kDtypeBits = 1,  // 16-bit words: bfloat16 or float16 bit patterns
};

class OutputsReader {
 public:
  // Checks the dataset's presence, rank, shape (against the trace) and element type; messages
  // name the file, the dataset and what is wrong.
  Status open(const std::string& path, const TraceInfo& trace, DType dtype);
  OutputsEncoding encoding() const { return encoding_; }
  // "float32", "float16 (HDF5 16-bit float)", "bfloat16 bits (16-bit integers)", ...
  const std::string& type_description() const { return type_description_; }
  const std::string& path() const { return path_; }
  // One site of every rank as raw words: words[rank * n + i] holds the float32 bits, or the 16-bit
  // dtype bits in the low half.
  Status read_site(std::size_t pass, std::size_t site, std::uint32_t* words) const;
  // The configuration a replay result records as root attributes (name, value as text), in the
  // spelling of echotk's flags; empty for a file without them.
  const std::vector<std::pair<std::string, std::string>>& recorded_configuration() const {
    return recorded_;
  }

 private:
  H5::H5File file_;
  H5::DataSet dataset_;
  H5::DataType memory_type_;
  OutputsEncoding encoding_ = OutputsEncoding::kFloat32;
  std::string type_description_;
  std::string path_;
  std::size_t ranks_ = 0;
  std::size_t count_ = 0;
  std::vector<std::pair<std::string, std::string>> recorded_;
};

// Writes /outputs float32 [passes, sites, ranks, n] from values[((pass * sites + site) * ranks +
// rank) * n + i], with string attributes, to PATH atomically. The file's bits depend only on
// its contents (no timestamps), so a regenerated file is byte for byte the same.
Status write_outputs_file(const std::string& path, std::size_t passes, std::size_t sites,
                          std::size_t ranks, std::size_t count, const float* values,
                          const std::vector<std::pair<std::string, std::string>>& attributes);

}  // namespace echo
