// The SmolLM2 model (fetched by scripts/setup_model.sh) and the golden files under data/smollm2/,
// loaded once per test executable.
#pragma once

#include <boost/test/unit_test.hpp>

#include <hdf5.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "echo/model/llama.h"

namespace echo::model::testing {

inline std::string data_path(const std::string& name) {
  return std::string(ECHO_SOURCE_DIR) + "/data/smollm2/" + name;
}

inline std::string model_path() {
  if (const char* path = std::getenv("ECHO_MODEL_GGUF"); path != nullptr && *path != '\0') {
    return path;
  }
  const char* cache = std::getenv("ECHO_CACHE_DIR");
  const char* home = std::getenv("HOME");
  const std::string root = cache && *cache ? cache : std::string(home ? home : ".") + "/.cache/echo";
  return root + "/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
}

inline const LlamaModel& smollm2() {
  static LlamaModel model;
  static const Status status = model.load(model_path());
  BOOST_REQUIRE_MESSAGE(status.ok(), status.message() + " (run scripts/setup_model.sh)");
  return model;
}

// Minimal typed reads of the golden HDF5 files written by tools/*.py.
class GoldenFile {
 public:
  explicit GoldenFile(const std::string& path)
      : file_(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)) {
    BOOST_REQUIRE_MESSAGE(file_ >= 0, "cannot open golden file " + path);
  }
  ~GoldenFile() {
    if (file_ >= 0) H5Fclose(file_);
  }
  GoldenFile(const GoldenFile&) = delete;
  GoldenFile& operator=(const GoldenFile&) = delete;

  bool has(const std::string& name) const { return H5Lexists(file_, name.c_str(), H5P_DEFAULT) > 0; }

  template <typename T>
  std::vector<T> read(const std::string& name) const {
    const hid_t dataset = H5Dopen2(file_, name.c_str(), H5P_DEFAULT);
    BOOST_REQUIRE_MESSAGE(dataset >= 0, "golden dataset " + name + " is missing");
    const hid_t space = H5Dget_space(dataset);
    const hssize_t count = H5Sget_simple_extent_npoints(space);
    std::vector<T> values(static_cast<std::size_t>(count));
    const hid_t type = std::is_same<T, float>::value ? H5T_NATIVE_FLOAT : H5T_NATIVE_INT32;
    const herr_t status = H5Dread(dataset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data());
    H5Sclose(space);
    H5Dclose(dataset);
    BOOST_REQUIRE_MESSAGE(status >= 0, "cannot read golden dataset " + name);
    return values;
  }

  std::string attribute(const std::string& object, const std::string& name) const {
    const hid_t attr = H5Aopen_by_name(file_, object.c_str(), name.c_str(), H5P_DEFAULT, H5P_DEFAULT);
    BOOST_REQUIRE_MESSAGE(attr >= 0, "golden attribute " + object + "@" + name + " is missing");
    const hid_t type = H5Aget_type(attr);
    std::string value;
    if (H5Tis_variable_str(type) > 0) {
      char* text = nullptr;
      const hid_t memtype = H5Tcopy(H5T_C_S1);
      H5Tset_size(memtype, H5T_VARIABLE);
      H5Tset_cset(memtype, H5T_CSET_UTF8);
      if (H5Aread(attr, memtype, &text) >= 0 && text != nullptr) value = text;
      H5free_memory(text);
      H5Tclose(memtype);
    } else {
      value.resize(H5Tget_size(type));
      H5Aread(attr, type, value.data());
      value.resize(value.find('\0') == std::string::npos ? value.size() : value.find('\0'));
    }
    H5Tclose(type);
    H5Aclose(attr);
    return value;
  }

 private:
  hid_t file_;
};

}  // namespace echo::model::testing
