#include "rows.h"

#include <algorithm>

namespace echo::bench {
namespace {

constexpr auto kP2P = cuda::Transport::kPeerToPeer;
constexpr auto kNccl = cuda::Transport::kNccl;
constexpr auto kOff = CompensatorMode::kOff;
constexpr auto kDual = CompensatorMode::kDual;
constexpr auto kGlobal = ResidualMode::kGlobal;
constexpr auto kLocal = ResidualMode::kLocal;
constexpr auto kF32 = DType::kFloat32;
constexpr auto kBF16 = DType::kBFloat16;
constexpr bool kMatmul = true;
constexpr bool kAlone = false;
constexpr long long kDefault = -1;       // the exact-path limit of --exact-max-count / the library
constexpr long long kNeverExact = 0;     // always quantize
constexpr long long kAlwaysExact = 1LL << 40;

}  // namespace

const std::vector<RowSpec>& all_rows() {
  using C = RowCall;
  // The compensated rows come three ways: with the matmul subtracted (as the paper measures), alone
  // (their own time, meaningful at every size, where the matmul-subtracted rows drown in the
  // matmul's run-to-run spread below a few MiB), and with bf16 state.
  static const std::vector<RowSpec> rows = {
      // name                            call         bits transport comp  residual state matmul   exact
      {"nccl-bf16",                      C::kNcclAllReduce, 16, kNccl, kOff, kGlobal, kBF16, kAlone, kDefault},
      {"nccl-t8",                        C::kEcho,     8, kNccl, kOff,  kGlobal, kF32,  kAlone,  kNeverExact},
      {"nccl-t4",                        C::kEcho,     4, kNccl, kOff,  kGlobal, kF32,  kAlone,  kNeverExact},
      {"echo8",                          C::kEcho,     8, kP2P,  kOff,  kGlobal, kF32,  kAlone,  kDefault},
      {"echo4",                          C::kEcho,     4, kP2P,  kOff,  kGlobal, kF32,  kAlone,  kDefault},
      {"echo4-comp-global",              C::kEcho,     4, kP2P,  kDual, kGlobal, kF32,  kMatmul, kDefault},
      {"echo4-comp-local",               C::kEcho,     4, kP2P,  kDual, kLocal,  kF32,  kMatmul, kDefault},
      {"echo4-comp-global-alone",        C::kEcho,     4, kP2P,  kDual, kGlobal, kF32,  kAlone,  kDefault},
      {"echo4-comp-local-alone",         C::kEcho,     4, kP2P,  kDual, kLocal,  kF32,  kAlone,  kDefault},
      {"echo4-comp-global-bf16",         C::kEcho,     4, kP2P,  kDual, kGlobal, kBF16, kAlone,  kDefault},
      {"echo4-comp-local-bf16",          C::kEcho,     4, kP2P,  kDual, kLocal,  kBF16, kAlone,  kDefault},
      {"echo4-comp-global-bf16-matmul",  C::kEcho,     4, kP2P,  kDual, kGlobal, kBF16, kMatmul, kDefault},
      {"echo4-comp-local-bf16-matmul",   C::kEcho,     4, kP2P,  kDual, kLocal,  kBF16, kMatmul, kDefault},
      {"echo4-quant",                    C::kEcho,     4, kP2P,  kOff,  kGlobal, kF32,  kAlone,  kNeverExact},
      {"exact",                          C::kEcho,     4, kP2P,  kOff,  kGlobal, kF32,  kAlone,  kAlwaysExact},
  };
  return rows;
}

std::vector<std::string> row_names() {
  std::vector<std::string> names;
  for (const RowSpec& r : all_rows()) names.push_back(r.name);
  return names;
}

Status select_rows(const Options& options, std::vector<RowSpec>* rows) {
  rows->clear();
  for (const std::string& name : options.rows) {
    const auto& all = all_rows();
    if (std::none_of(all.begin(), all.end(), [&](const RowSpec& r) { return r.name == name; })) {
      return Status(StatusCode::kInvalidArgument, "--rows: no row named " + name);
    }
  }
  for (const RowSpec& r : all_rows()) {
    const bool asked = std::find(options.rows.begin(), options.rows.end(), r.name) != options.rows.end();
    if (!options.rows.empty() && !asked) continue;
    // The matmul-subtracted rows time the matmul too, which is not captured into the graphs.
    if (options.graph > 0 && r.with_matmul) {
      if (asked) {
        return Status(StatusCode::kInvalidArgument, "row " + r.name + " runs a matmul and cannot be timed with --graph");
      }
      continue;
    }
    rows->push_back(r);
  }
  if (rows->empty()) return Status(StatusCode::kInvalidArgument, "no row selected (--rows)");
  return Status::Ok();
}

AllReduceSpec echo_spec(const RowSpec& row, const Options& options, int ranks) {
  AllReduceSpec spec;
  spec.dtype = DType::kBFloat16;
  spec.quant.bits = row.bits;
  spec.compensator.mode = row.mode;
  spec.compensator.residual = row.residual;
  spec.compensator.state_dtype = row.state_dtype;
  const long long exact_max = row.exact_max >= 0 ? row.exact_max : options.exact_max;
  spec.exact_max_count =
      exact_max < 0 ? cuda::default_exact_max_count(ranks, spec) : static_cast<std::size_t>(exact_max);
  return spec;
}

}  // namespace echo::bench
