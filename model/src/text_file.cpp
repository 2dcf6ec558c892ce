#include "echo/model/text_file.h"

#include <zlib.h>

#include <fstream>
#include <sstream>

namespace echo::model {

Status read_text_file(const std::string& path, std::string* text) {
  const bool gzipped = path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
  if (!gzipped) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return Status(StatusCode::kIoError, path + ": cannot open text file");
    std::ostringstream buffer;
    buffer << in.rdbuf();
    *text = buffer.str();
    return Status::Ok();
  }
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) return Status(StatusCode::kIoError, path + ": cannot open gzip file");
  text->clear();
  char chunk[1 << 16];
  int read = 0;
  while ((read = gzread(file, chunk, sizeof chunk)) > 0) {
    text->append(chunk, static_cast<std::size_t>(read));
  }
  int error = Z_OK;
  const char* message = gzerror(file, &error);
  const std::string what = message ? message : "";
  gzclose(file);
  if (read < 0 || (error != Z_OK && error != Z_STREAM_END)) {
    return Status(StatusCode::kFormatError, path + ": gzip stream is corrupt (" + what + ")");
  }
  return Status::Ok();
}

}  // namespace echo::model
