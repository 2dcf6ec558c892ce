// echotk._C: the compiled part of the echotk package (python/echotk).
#include <nanobind/nanobind.h>

#include "allreduce_binding.h"

NB_MODULE(_C, m) {
  m.doc() = "Echo all-reduce over DLPack arrays: the CPU reference, the one-GPU emulation kernel and the P2P communicator";
  // Spec handles cached by echotk.ops live until interpreter exit; that is not a leak.
  nanobind::set_leak_warnings(false);
  echotk::register_spec(m);
  echotk::register_allreduce(m);
#ifdef ECHOTK_HAVE_CUDA
  echotk::register_allreduce_cuda(m);
  m.attr("HAS_CUDA") = true;
#endif
#ifdef ECHOTK_HAVE_COMMUNICATOR
  echotk::register_communicator(m);
  m.attr("HAS_COMMUNICATOR") = true;
#else
  // Built without the communicator: echotk.distributed raises a clear error.
  m.attr("HAS_COMMUNICATOR") = false;
#endif
#ifndef ECHOTK_HAVE_CUDA
  // No CUDA entry point in this build: echotk raises a clear error for device='cuda'.
  m.attr("HAS_CUDA") = false;
#endif
}
