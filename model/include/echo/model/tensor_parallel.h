// Tensor-parallel emulation of the all-reduce sites of a Llama forward pass. At each site (the
// attention output projection and the MLP down projection of every layer) the P ranks each hold a
// contiguous slice of the input features; rank r's contribution is its partial product, rounded
// to the serving dtype, and the P contributions are combined by the selected all-reduce.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "echo/allreduce.h"
#include "echo/model/weights.h"
#include "echo/site.h"
#include "echo/status.h"

namespace echo::model {

using SiteKind = ::echo::SiteKind;  // the reference's (echo/site.h): the trace's /site_kind values

enum class ReduceMode : std::uint8_t {
  kExact = 0,  // fp32 sum in rank order, rounded once to dtype ("16-bit" serving)
  kEcho = 1,   // echo::allreduce with spec.allreduce (quantized, optionally compensated)
};

const char* reduce_mode_name(ReduceMode mode);  // "exact", "echo"

struct TensorParallelSpec {
  int ranks = 1;
  DType dtype = DType::kBFloat16;  // contributions and results are rounded to this
  ReduceMode mode = ReduceMode::kExact;
  AllReduceSpec allreduce;  // kEcho only; allreduce.dtype is forced to dtype
  // kEcho only: sites (indices of reduce() calls in a pass) whose all-reduce uses 8-bit codes
  // instead of allreduce.quant.bits (per-site precision from a calibration pass).
  std::vector<int> eight_bit_sites;

  // The all-reduce spec of one site (allreduce with the site's bit width).
  AllReduceSpec site_spec(int site) const;
  // Average wire bits per element over `sites` sites of equal size (codes, parameters, outliers).
  double wire_bits_per_element(int sites) const;

  Status validate() const;
};

// Receives the state of a forward pass as it runs (used by trace capture).
class SiteObserver {
 public:
  virtual ~SiteObserver() = default;
  // contributions[r] is rank r's [tokens, hidden] contribution at the site, row-major.
  virtual void on_site(int site, SiteKind kind, int ranks, std::size_t count,
                       const float* const* contributions) = 0;
  // Residual stream [tokens, hidden]: index 0 after the embedding, index k + 1 after site k.
  virtual void on_hidden(int index, const Matrix& hidden) = 0;
};

// Feature range [begin, end) of rank r when in_features are split over ranks: contiguous,
// r * in / P rounded down, hence head-aligned whenever P divides the head count.
std::size_t slice_begin(std::size_t in_features, int ranks, int rank);

class TensorParallel {
 public:
  Status configure(const TensorParallelSpec& spec);
  const TensorParallelSpec& spec() const { return spec_; }

  // Starts a forward pass: the compensator state is reset, as the paper does per pass.
  void begin_pass();

  // out[tokens, out_features] = all-reduce over ranks of input[:, slice_r] * weight[:, slice_r]^T.
  Status reduce(int site, SiteKind kind, const Matrix& input, const Matrix& weight, Matrix* out,
                SiteObserver* observer);

  // Groups whose output was NaN, summed over the sites since configure().
  std::size_t poisoned_groups() const { return poisoned_groups_; }

 private:
  TensorParallelSpec spec_;
  std::vector<CompensatorState> states_;
  AllReduceWorkspace workspace_;
  std::vector<Matrix> partials_;
  std::size_t poisoned_groups_ = 0;
};

}  // namespace echo::model
