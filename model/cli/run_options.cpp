#include "run_options.h"

#include "echo/model/perplexity.h"
#include "echo/model/text_file.h"

#include <omp.h>

#include <Eigen/Core>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace echo::model {

Status load_model_and_windows(const RunOptions& options, const std::string& text_path, int count,
                              int length, const std::string& count_option, LlamaModel* llama,
                              std::vector<std::int32_t>* ids, std::vector<std::size_t>* starts) {
  Status status = llama->load(options.model_path);
  if (status.code() == StatusCode::kIoError) {
    return Status(StatusCode::kIoError, status.message() + " (run scripts/setup_model.sh)");
  }
  if (!status.ok()) return status;
  std::string text;
  if (status = read_text_file(text_path, &text); !status.ok()) return status;
  if (status = llama->tokenizer().encode(text, ids); !status.ok()) {
    return Status(StatusCode::kFormatError, text_path + ": " + status.message());
  }
  if (status = plan_windows(ids->size(), count, length, starts); !status.ok()) {
    return Status(StatusCode::kInvalidArgument, count_option + "/--length: " + status.message());
  }
  return Status::Ok();
}


std::string default_model_path() {
  if (const char* path = std::getenv("ECHO_MODEL_GGUF"); path != nullptr && *path != '\0') {
    return path;
  }
  std::string root;
  if (const char* cache = std::getenv("ECHO_CACHE_DIR"); cache != nullptr && *cache != '\0') {
    root = cache;
  } else if (const char* home = std::getenv("HOME"); home != nullptr) {
    root = std::string(home) + "/.cache/echo";
  } else {
    root = ".cache/echo";
  }
  return root + "/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
}

void add_run_options(CLI::App* command, RunOptions* o) {
  o->model_path = default_model_path();
  command->add_option("--model", o->model_path,
                      "GGUF model file (default: $ECHO_MODEL_GGUF or the cache that "
                      "scripts/setup_model.sh fills)")
      ->capture_default_str();
  command->add_option("--ranks,-P", o->ranks,
                      "tensor-parallel ranks: every attention and MLP output is the all-reduce of "
                      "P partial sums over contiguous input-feature slices")
      ->check(CLI::Range(1, kMaxRanks))
      ->capture_default_str();
  command->add_option("--allreduce", o->reduce,
                      "exact: fp32 sum rounded to --dtype (16-bit serving); echo: the Echo "
                      "all-reduce set by --bits, --group, --quantizer, --compensator, ...")
      ->check(CLI::IsMember({"exact", "echo"}))
      ->capture_default_str();
  command->add_option("--dtype", o->dtype,
                      "dtype of each rank's contribution and of the all-reduce result")
      ->check(CLI::IsMember({"bf16", "fp16", "fp32", "bfloat16", "float16", "float32"}))
      ->capture_default_str();
  command->add_option("--threads", o->threads,
                      "OpenMP threads for the forward pass (0: OMP_NUM_THREADS or all cores)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command->add_option("--eight-bit-sites", o->eight_bit_sites,
                      "comma-separated site indices (0-based reduce calls of a pass) whose Echo "
                      "all-reduce uses 8-bit codes; the others use --bits (tools/rank_sites.py "
                      "picks them from a captured trace)")
      ->delimiter(',')
      ->check(CLI::NonNegativeNumber);
}

Status make_tensor_parallel_spec(const RunOptions& o, const AllReduceSpec& allreduce,
                                 TensorParallelSpec* spec) {
  TensorParallelSpec s;
  s.ranks = o.ranks;
  const auto dtype = parse_dtype(o.dtype);
  if (!dtype) return Status(StatusCode::kInvalidArgument, "--dtype: unknown dtype " + o.dtype);
  s.dtype = *dtype;
  s.mode = o.reduce == "echo" ? ReduceMode::kEcho : ReduceMode::kExact;
  s.allreduce = allreduce;
  s.allreduce.dtype = s.dtype;
  s.eight_bit_sites = o.eight_bit_sites;
  Status status = s.validate();
  if (!status.ok()) return status;
  *spec = s;
  return Status::Ok();
}

int apply_threads(int threads) {
  if (threads > 0) omp_set_num_threads(threads);
  const int in_use = omp_get_max_threads();
  Eigen::setNbThreads(in_use);
  return in_use;
}

std::string describe(const TensorParallelSpec& spec) {
  std::ostringstream out;
  out << "P=" << spec.ranks << " " << dtype_name(spec.dtype) << " ";
  if (spec.mode == ReduceMode::kExact) {
    out << "exact";
    return out.str();
  }
  const AllReduceSpec& ar = spec.allreduce;
  out << "echo " << ar.quant.bits << "-bit " << quantizer_name(ar.quant.kind)
      << " g=" << ar.quant.group << " " << algorithm_name(ar.algorithm) << " ";
  if (!spec.eight_bit_sites.empty()) {
    out << "8-bit at sites ";
    for (std::size_t i = 0; i < spec.eight_bit_sites.size(); ++i) {
      out << (i ? "," : "") << spec.eight_bit_sites[i];
    }
    out << " ";
  }
  if (ar.quant.outliers > 0) out << "outliers=" << ar.quant.outliers << " ";
  if (ar.quant.rotation != Rotation::kNone) out << "rotation=" << rotation_name(ar.quant.rotation) << " ";
  if (ar.quant.overflow != QuantSpec{}.overflow) {
    out << "overflow-groups=" << overflow_groups_name(ar.quant.overflow) << " ";
  }
  out << compensator_mode_name(ar.compensator.mode);
  if (ar.compensator.mode != CompensatorMode::kOff) {
    out << "(" << residual_mode_name(ar.compensator.residual) << ", eta=" << ar.compensator.eta;
    if (ar.compensator.mode == CompensatorMode::kDual) {
      out << ", a=" << ar.compensator.a << ", beta1=" << ar.compensator.beta1
          << ", beta2=" << ar.compensator.beta2;
    } else if (ar.compensator.mode == CompensatorMode::kSingle) {
      out << ", beta=" << ar.compensator.beta;
    }
    out << ")";
  }
  return out.str();
}

ProgressBar::ProgressBar(std::string label, std::size_t total, std::string unit)
    : label_(std::move(label)), total_(total), unit_(std::move(unit)),
      start_(std::chrono::steady_clock::now()) {
  update(0, 0);
}

void ProgressBar::update(std::size_t done, std::size_t tokens) {
  constexpr int kWidth = 30;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const int filled = total_ ? static_cast<int>(kWidth * done / total_) : kWidth;
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r%s [%s] %zu/%zu %s  %.0f tok/s  %.1f s", label_.c_str(), bar.c_str(),
               done, total_, unit_.c_str(), seconds > 0 ? tokens / seconds : 0.0, seconds);
  std::fflush(stderr);
}

void ProgressBar::finish() {
  std::fputc('\n', stderr);
  std::fflush(stderr);
}

}  // namespace echo::model
