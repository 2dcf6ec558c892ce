// The peer links' bandwidths, printed above the table: copy engines (one copy, and every GPU to all
// its peers at once) and SM-driven stores and loads to all peers at once, as the Echo kernels do.
#pragma once

#include <ostream>

#include "context.h"

namespace echo::bench {

// Each measurement runs three times; the third is reported (the first two warm the links up).
// Nothing below two ranks.
Status measure_links(const Context& c, std::ostream& out);

}  // namespace echo::bench
