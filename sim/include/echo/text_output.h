// Text outputs (JSON reports, CSV tables) written all or nothing.
#pragma once

#include <string>

#include "echo/spec_fields.h"
#include "echo/status.h"

namespace echo {

// Writes `content` to PATH.tmp-<pid> and renames it to PATH; on failure the temporary file is
// removed and PATH is left as it was.
Status write_text_file_atomically(const std::string& path, const std::string& content);

// JSON text of a string (quoted; '"', '\\' and control characters escaped) and of a number (17
// significant digits; null for NaN and infinities, which JSON cannot hold).
std::string json_string(const std::string& s);
std::string json_number(double v);
// float_text(v), the shortest decimal text that reads back as the same float (0.35f prints as
// "0.35"), is the spec table's (echo/spec_fields.h).

}  // namespace echo
