// Known ways to get Echo wrong, each the reference with one mistake made on purpose. echotk verify
// recomputes a trace with every alternative that applies and names those that reproduce an
// implementation's outputs bit for bit; the tests use them as deliberately wrong implementations.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "echo/allreduce.h"
#include "echo/alteration.h"
#include "echo/backend.h"
#include "echo/trace.h"

namespace echo {

struct Alternative {
  const char* name;      // e.g. "scale-rounded-to-nearest"
  const char* mistake;   // what an implementation reproduced by it did, one sentence
  const char* numerics;  // the part of docs/numerics.md that states the rule
  // Whether the mistake changes anything for this spec and trace (dtype and direction set).
  bool (*applies)(const AllReduceSpec& spec, const TraceInfo& trace);
  // The spec the mistaken implementation effectively ran (identity for most).
  AllReduceSpec (*spec_of)(AllReduceSpec spec);
  Alteration alteration;           // the reference change, kNone for a spec change alone
  bool keeps_state_across_passes;  // the compensator is reset only before the first pass
};

// Every alternative, in the order verify reports them.
const std::vector<Alternative>& alternatives();
// nullptr when there is none of that name.
const Alternative* find_alternative(std::string_view name);

// The CPU reference running `alternative` for `spec` (the correct spec, before spec_of).
std::unique_ptr<AllReduceBackend> make_alternative_backend(const Alternative& alternative,
                                                           const AllReduceSpec& spec, int ranks);

}  // namespace echo
