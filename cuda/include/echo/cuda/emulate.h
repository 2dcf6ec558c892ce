// One-GPU emulation of the P-rank Echo all-reduce (docs/cuda-api.md, "One-GPU emulation").
//
// All P ranks' contributions sit in one device buffer parts[P][n] of spec.dtype; one call computes
// on the caller's stream exactly what echo::allreduce (the CPU reference) delivers to every rank,
// bit for bit (docs/numerics.md): x' = x + c per rank, push quantization of every non-owned
// segment, the owner's fp32 sum in rank order, the gather quantization, the output y (the same on
// every rank, so one [n] buffer), the compensator update of every rank, the exact small-message
// path, backward scaling and the non-finite policy. Every configuration the reference accepts is
// served (bits 2..8, every quantizer and group size, compensator and residual modes, state types,
// P = 1..8, wide groups and the Hadamard rotation of docs/numerics.md 2.4 and 2.6, compensator
// units 'stream' of 6.1 as echo::allreduce_at_site runs them, with gains 'own' or 'sum', and
// compensator 'deficit' of 6.2), the owner algorithm only; outliers sent exactly (2.5) are refused.
//
//   EmulateArguments args;                         // spec, ranks, count, buffers
//   emulate_can_implement(args)                    // what is wrong with them, or Ok
//   emulate_state_bytes(spec, P, n)                // one state per pass direction; then
//   emulate_reset_state(state, bytes, stream)      //   at the start of every pass
//   emulate_gains_bytes(spec, P, n, site)          // units 'stream' at a post-norm site: the
//                                                  //   scratch of the rows' gains (args.gains)
//   emulate_ratios_bytes(spec, P, n, site)         // gains 'sum' there: the row ratios kept from
//                                                  //   call to call (args.ratios, one per pass)
//   emulate_allreduce(args, stream)                // enqueue one call
//   emulate_read_report(workspace, stream, &rep)   // the last call's report (synchronizes)
//
// emulate_allreduce performs no host synchronization and issues a fixed sequence of memsets and
// kernels on the stream, so calls can be captured into a CUDA graph. Every function returns a
// Status; none exits or throws.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "echo/allreduce.h"
#include "echo/site.h"
#include "echo/status.h"

namespace echo::cuda {

// The last call's report as the kernels keep it in the caller's workspace (emulate_workspace_bytes
// bytes of device memory): read it with emulate_read_report, or copy these bytes when convenient.
struct EmulateDeviceReport {
  unsigned long long poisoned_groups;  // groups of the output that are NaN (AllReduceReport)
  int scale_exponent;                  // backward: the shared exponent k; 0 forward
  int exact_path;                      // 1 when the call took the exact small-message path
  unsigned int max_abs_bits;           // backward: max |x'| over every rank, as float bits
  unsigned int reserved;
};

inline constexpr std::size_t kEmulateWorkspaceBytes = 256;
inline constexpr std::size_t emulate_workspace_bytes() { return kEmulateWorkspaceBytes; }

struct EmulateArguments {
  AllReduceSpec spec;               // as echo::allreduce takes it (Algorithm::kOwner)
  int ranks = 1;                    // P in [1, 8]
  std::size_t count = 0;            // n >= 1 elements per rank
  const void* parts = nullptr;      // device [P][n] of spec.dtype, rank r at element r * n
  void* out = nullptr;              // device [n] of spec.dtype; may equal parts (rank 0's row), no
                                    // other overlap
  void* state = nullptr;            // the compensator state of spec.direction (null when off)
  std::size_t state_bytes = 0;      // its size, at least emulate_state_bytes(spec, P, n)
  void* workspace = nullptr;        // device, emulate_workspace_bytes(): the report
  float* compensated = nullptr;     // optional device [P][n] fp32: x' = x + c of every rank
  // Compensator units 'stream' (docs/numerics.md 6.1): the call's site, as allreduce_at_site takes
  // it; ignored by every call that does not needs_site(spec). At a site with a post-norm the call
  // needs `gains`, device scratch of at least emulate_gains_bytes(spec, P, n, site) bytes (the rows'
  // gains, clip bounds and profile factors, written and read within the call; 8-byte aligned).
  // Compensator profile 'sqrt' and compensator 'deficit' read the post-norm's effective weights
  // from `weights`, device [site.row_length] fp32, all finite (the kernels read them there;
  // site.weights, the host's copy, is checked by validate_site where it is given and may be left
  // empty).
  SiteInfo site;
  void* gains = nullptr;
  std::size_t gains_bytes = 0;
  const float* weights = nullptr;
  // Compensator gains 'sum' (docs/numerics.md 6.1, step 8) at a site with a post-norm: `ratios`,
  // device memory of at least emulate_ratios_bytes(spec, P, n, site) bytes (4-byte aligned), holds
  // every rank's row ratios per site kind (site.kind) from one call to the next: give the calls of
  // a pass direction the same buffer, as its state. Which kinds it holds is kept in the state, so a
  // reset (emulate_reset_state) clears them and the buffer needs no initialization.
  void* ratios = nullptr;
  std::size_t ratios_bytes = 0;
};

// The part of emulate_can_implement that needs no buffers: kInvalidArgument for a spec that does not
// validate for `ranks`, kUnsupported for what the emulation does not implement (the ring algorithm,
// outliers sent exactly; the message says "implements"); Ok otherwise.
Status emulate_can_implement_spec(const AllReduceSpec& spec, int ranks);

// Bytes of one pass direction's compensator state for P ranks of n elements: m1 (and m2 in the
// dual mode) of every rank in spec.compensator.state_dtype, plus a word that marks a reset state.
// 0 when the compensator is off. A state serves one (spec compensator, P, n) until it is reset
// for another; a pass's forward and backward calls each need their own.
std::size_t emulate_state_bytes(const AllReduceSpec& spec, int ranks, std::size_t count);

// Bytes of the scratch a call at `site` needs where needs_site(spec) and the site has a post-norm
// (else 0): 8 per rank and row (count / site.row_length rows) for the rows' gains, 4 more per rank
// and row with a clip, and 4 per feature (site.row_length) with profile 'sqrt' or compensator
// 'deficit'; with gains 'sum' 4 more per rank and row (their own RMS) and 4 per rank and element (the
// residuals the update takes once the delivered rows' RMS is known).
std::size_t emulate_gains_bytes(const AllReduceSpec& spec, int ranks, std::size_t count, const SiteInfo& site);

// Bytes of the row ratios a call of gains 'sum' at `site` keeps (else 0): 4 per site kind, rank and
// row (count / site.row_length rows).
std::size_t emulate_ratios_bytes(const AllReduceSpec& spec, int ranks, std::size_t count, const SiteInfo& site);

// Start of a pass: zero averages, and the next call applies no correction (as the reference does
// for an empty CompensatorState). Every new state must be reset before its first call.
Status emulate_reset_state(void* state, std::size_t state_bytes, cudaStream_t stream);

// kInvalidArgument naming what is wrong (spec, ranks, count, a null or misaligned buffer, a state
// or gains scratch too small, a site that does not serve the call (validate_site), overlapping
// buffers, a buffer that is not device memory of the current device, compensator profile 'sqrt' or
// compensator 'deficit' at a post-norm site without device weights, gains 'sum' there without
// ratios), kUnsupported for the ring algorithm and for outliers sent exactly; Ok when
// emulate_allreduce can run the call.
Status emulate_can_implement(const EmulateArguments& args);

// One call on `stream`: enqueues and returns. Checks the arguments as emulate_can_implement does,
// except the device-memory queries (cudaPointerGetAttributes), which that function alone makes.
Status emulate_allreduce(const EmulateArguments& args, cudaStream_t stream);

// Waits for `stream` and fills `report` (poisoned groups, scale exponent, exact path) from the
// workspace of the last call issued on it.
Status emulate_read_report(const void* workspace, cudaStream_t stream, AllReduceReport* report);

// Waits for `stream` and copies rank r's averages to the host as floats (bf16 state widened
// exactly): m1[count] (mode 'deficit': its deficit), and m2[count] in the dual mode (m2 may be null
// otherwise). For tests and inspection; a reset state reads as zeros.
Status emulate_download_state(const void* state, const AllReduceSpec& spec, int ranks, std::size_t count,
                              int rank, float* m1, float* m2, cudaStream_t stream);

}  // namespace echo::cuda
