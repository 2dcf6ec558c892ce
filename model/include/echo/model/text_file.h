// Reads a whole text file, plain or gzip-compressed (by the .gz suffix).
#pragma once

#include <string>

#include "echo/status.h"

namespace echo::model {

Status read_text_file(const std::string& path, std::string* text);

}  // namespace echo::model
