#include "echo/text_output.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
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

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace echo
