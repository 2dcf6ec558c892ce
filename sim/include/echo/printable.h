// Text taken from a file, made safe to print in a message.
#pragma once

#include <string>
#include <string_view>

namespace echo {

// Printable ASCII as it is, a backslash as "\\", every other byte as "\xNN": a corrupted file
// cannot send control sequences or invalid UTF-8 to a terminal through an error message.
std::string printable(std::string_view bytes);

}  // namespace echo
