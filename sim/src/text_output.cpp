#include "echo/text_output.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

namespace echo {

Status write_text_file_atomically(const std::string& path, const std::string& content) {
  const std::string temp = path + ".tmp-" + std::to_string(static_cast<long>(getpid()));
  {
    std::ofstream f(temp, std::ios::binary | std::ios::trunc);
    if (!f) return Status(StatusCode::kIoError, path + ": cannot create " + temp);
    f << content;
    f.flush();
    if (!f) {
      std::remove(temp.c_str());
      return Status(StatusCode::kIoError, path + ": write failed");
    }
  }
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    std::remove(temp.c_str());
    return Status(StatusCode::kIoError, path + ": cannot move the finished file into place");
  }
  return Status::Ok();
}

}  // namespace echo
