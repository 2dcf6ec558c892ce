// Greedy continuation of a prompt with the fp32 forward pass (P = 1, no all-reduce rounding),
// recomputing the whole window for every new token: a readability check, not a fast generator.
//   smollm2_generate <model.gguf> "<prompt>" [new tokens, default 30]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "echo/model/llama.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: smollm2_generate <model.gguf> \"<prompt>\" [new tokens]\n");
    return 2;
  }
  const int new_tokens = argc > 3 ? std::atoi(argv[3]) : 30;
  echo::model::LlamaModel model;
  echo::Status status = model.load(argv[1]);
  if (!status.ok()) {
    std::fprintf(stderr, "smollm2_generate: error: %s\n", status.message().c_str());
    return 2;
  }
  std::vector<std::int32_t> ids;
  status = model.tokenizer().encode(argv[2], &ids);
  if (!status.ok()) {
    std::fprintf(stderr, "smollm2_generate: error: %s\n", status.message().c_str());
    return 2;
  }
  echo::model::TensorParallelSpec spec;
  spec.ranks = 1;
  spec.dtype = echo::DType::kFloat32;
  echo::model::TensorParallel tp;
  (void)tp.configure(spec);
  echo::model::Matrix logits;
  for (int i = 0; i < new_tokens; ++i) {
    status = model.forward(ids, tp, &logits);
    if (!status.ok()) break;
    Eigen::Index next = 0;
    logits.row(logits.rows() - 1).maxCoeff(&next);
    ids.push_back(static_cast<std::int32_t>(next));
    if (next == model.tokenizer().eos_id()) break;
  }
  std::printf("%s\n", model.tokenizer().decode(ids).c_str());
  return status.ok() ? 0 : 1;
}
