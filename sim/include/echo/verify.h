// echotk verify: recomputes every pass and site of a trace with the reference and compares an
// implementation's /outputs bit for bit (docs/conformance.md); where they differ, names what
// differs and, where it can tell, why.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "echo/allreduce.h"
#include "echo/backend.h"
#include "echo/status.h"
#include "echo/trace.h"

namespace echo {

struct VerifyOptions {
  AllReduceSpec spec;                   // dtype from the trace unless dtype_override; direction from the trace
  std::optional<DType> dtype_override;
  std::size_t max_listed = 10;          // how many first differences are listed
  bool diagnose = true;                 // recompute with the alternatives (echo/alternatives.h) on a difference
};

struct OutputDifference {
  std::size_t pass = 0, site = 0, element = 0, group = 0;
  int rank = 0;
  std::uint32_t expected_word = 0, received_word = 0;  // raw bits as stored (16 or 32 bits)
  float expected = 0.0f, received = 0.0f;
};

struct Diagnosis {
  std::string name;         // an alternative's name, or ranks-differ, same-codes, within-one-step, ...
  std::string text;         // what was found, one or two sentences
  std::string numerics;     // the part of docs/numerics.md to read
  bool reproduced = false;  // the reference with this mistake reproduces every output bit for bit
};

struct VerifyResult {
  TraceInfo trace;
  AllReduceSpec spec;                   // as run (dtype and direction set)
  std::string outputs_type;             // how /outputs stores its elements
  int word_bits = 32;                   // 32 (float32) or 16 (dtype bits)
  std::size_t compared = 0;             // elements compared: passes * sites * ranks * n
  std::size_t differing = 0;
  std::vector<std::size_t> per_site_rank;  // differing elements [site * ranks + rank], over passes
  std::vector<std::size_t> per_pass;       // differing elements per pass
  std::vector<OutputDifference> first;     // the first max_listed, in file order
  std::size_t noncanonical_nans = 0;    // received NaNs compared as NaN but not the canonical one
  std::vector<Diagnosis> diagnoses;
  bool identical() const { return differing == 0; }
};

// Every pass and site of an open trace through the backend, as replay runs it (the state reset at
// each pass): outputs[((pass * sites + site) * ranks + rank) * n + i].
Status compute_outputs(const TraceReader& trace, AllReduceBackend& backend, std::vector<float>* outputs);

// The trace must be open. Bad input (an outputs file that does not fit the trace) is a Status
// error; differing outputs are a result.
Status verify_outputs(const TraceReader& trace, const std::string& outputs_path,
                      const VerifyOptions& options, VerifyResult* result);

}  // namespace echo
