// A small typed layer over the HDF5 C++ API. Every failure becomes an echo::Status
// whose message names the file and the object.
#pragma once

#include <H5Cpp.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "echo/status.h"

namespace echo::h5 {

// Turns HDF5's own error printing off once per process; our messages replace it.
void silence_library_errors();

// Longest string attribute read (the trace's are a few words; a longer one is a damaged file).
inline constexpr std::size_t kMaxStringAttributeBytes = 1 << 16;

Status open_read(const std::string& path, H5::H5File* file);
// Opens an HDF5 file image held in memory (read only); `name` labels it in messages.
Status open_read_image(const void* data, std::size_t size, const std::string& name, H5::H5File* file);

// Attribute readers: nullopt when absent; a Status error when present but of the wrong kind, not a
// single value, or longer than kMaxStringAttributeBytes. They use the C API, each step checked, and
// read fixed-length strings into a buffer of exactly the declared (bounded) size.
Status read_string_attribute(const H5::H5Object& object, const std::string& file,
                             const std::string& name, std::optional<std::string>* value);
Status read_int_attribute(const H5::H5Object& object, const std::string& file,
                          const std::string& name, std::optional<std::int64_t>* value);

void write_string_attribute(H5::H5Object& object, const std::string& name,
                            const std::string& value);
void write_int_attribute(H5::H5Object& object, const std::string& name, std::int64_t value);
void write_double_attribute(H5::H5Object& object, const std::string& name, double value);

// Shape of a dataset; an error unless it exists.
Status dataset_shape(const H5::H5File& file, const std::string& path, const std::string& name,
                     H5::DataSet* dataset, std::vector<hsize_t>* dims);

// Reads / writes the block [start, start + count) of a dataset as a dense array.
void read_block(const H5::DataSet& dataset, const std::vector<hsize_t>& start,
                const std::vector<hsize_t>& count, const H5::PredType& memory_type, void* out);
void write_block(H5::DataSet& dataset, const std::vector<hsize_t>& start,
                 const std::vector<hsize_t>& count, const H5::PredType& memory_type,
                 const void* in);

// Chunked dataset (one chunk per trailing row block), gzip with shuffle when level > 0.
H5::DataSet create_dataset(H5::H5File& file, const std::string& name, const H5::PredType& type,
                           const std::vector<hsize_t>& dims, const std::vector<hsize_t>& chunk,
                           int compression);

// A file written under PATH.tmp-<pid> and renamed to PATH by commit(); removed if never committed.
class AtomicFile {
 public:
  AtomicFile() = default;
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  Status create(const std::string& path);
  H5::H5File& file() { return file_; }
  const std::string& path() const { return path_; }
  Status commit();

 private:
  H5::H5File file_;
  std::string path_;
  std::string temp_path_;
  bool open_ = false;
};

}  // namespace echo::h5
