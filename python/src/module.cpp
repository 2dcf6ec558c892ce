// echotk._C: the compiled part of the echotk package (python/echotk).
#include <nanobind/nanobind.h>

#include "allreduce_binding.h"

NB_MODULE(_C, m) {
  m.doc() = "Echo all-reduce reference over DLPack arrays (torch CPU tensors, numpy arrays)";
  // Spec handles cached by echotk.ops live until interpreter exit; that is not a leak.
  nanobind::set_leak_warnings(false);
  echotk::register_allreduce(m);
  // No CUDA entry point in this build: echotk raises a clear error for device='cuda'.
  m.attr("HAS_CUDA") = false;
}
